"""The JSON record every ``python -m benchmarks KIND`` measurement writes, with the machine's facts.

A record is one JSON object::

    {"kind": "rebuild",                       # which measurement
     "command": "python -m benchmarks rebuild ...",  # what produced it
     "when": "2026-11-25T17:00:00Z",
     "machine": {"cpus": 2, "load_average_start": [..3], "load_average_end": [..3],
                 "others_cores": 0.02,        # CPU of every other process meanwhile, in cores
                 "quiet": true},              # quiet: others under a quarter core (or the load rule)
     "result": {...}}                         # the measurement's own figures (documented per kind)

Measurements whose figures are per-configuration recall rows use
:class:`slimvec.planner.rows.Row` (``slimvec bench --suite``); these records hold figures
that are not rows of that kind (whole-command wall times, server load, size models).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["MachineFacts", "Record", "write_record", "load_record", "command_line"]

log = logging.getLogger(__name__)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def command_line() -> str:
    """The command as typed: ``slimvec`` plus its arguments (``python -m slimvec`` included), or
    ``python -m benchmarks`` plus its arguments for the checkout's measurements."""
    program = "python -m benchmarks" if Path(sys.argv[0]).parent.name == "benchmarks" else "slimvec"
    return f"{program} " + shlex.join(sys.argv[1:])


def _cpu_seconds() -> tuple[float, float, float] | None:
    """:func:`slimvec.measure.cpu_seconds` counting the run's children as its own."""
    from slimvec.measure import cpu_seconds

    return cpu_seconds(children=True)


#: CPU of other processes, in cores, averaged over a run, below which the run counts as quiet
QUIET_OTHERS = 0.25


def quiet_during(machine: dict[str, Any]) -> bool | None:
    """Whether a recorded run (its ``machine`` object) was quiet *while it ran*: other processes
    used under :data:`QUIET_OTHERS` of a core. A page judges by this rather than the record's
    ``quiet`` flag, which also counts the load of whatever ended just before the run started;
    records without ``others_cores`` fall back to that flag (None when it is missing too)."""
    others = machine.get("others_cores")
    return machine.get("quiet") if others is None else float(others) < QUIET_OTHERS


@dataclass
class MachineFacts:
    """Cores, load average and what else ran around a measurement; ``quiet`` when nothing else
    competed.

    Attributes
    ----------
    cpus : int
        ``os.cpu_count()``.
    load_average_start, load_average_end : list of float
        1, 5 and 15-minute load averages before and after the measurement.
    others_cores : float or None
        CPU used by every *other* process during the measurement, in cores on average: the
        machine's busy time (``/proc/stat``) minus this process's and its children's
        (``getrusage``), over the wall time. A load average counts the measurement itself (a
        one-thread run on two cores ends near 1.0 by itself), this does not. None off Linux.
    """

    cpus: int = field(default_factory=lambda: os.cpu_count() or 1)
    load_average_start: list[float] = field(default_factory=_load)
    load_average_end: list[float] | None = None
    others_cores: float | None = None
    _cpu_start: tuple[float, float, float] | None = field(default_factory=_cpu_seconds, repr=False)

    def finish(self) -> None:
        """Record the load average at the end and what other processes used meanwhile."""
        self.load_average_end = _load()
        end = _cpu_seconds()
        if self._cpu_start is not None and end is not None and end[2] > self._cpu_start[2]:
            busy, own, wall = (b - a for a, b in zip(self._cpu_start, end))
            self.others_cores = round(max(busy - own, 0.0) / wall, 3)

    @property
    def quiet(self) -> bool:
        """Other processes used under :data:`QUIET_OTHERS` of a core on average while it ran (when
        that was measured), and the 1-minute load was below half the cores when it started: the
        figures are not contended. Without the CPU accounting, the load rule at both ends."""
        if self.others_cores is not None:
            return self.others_cores < QUIET_OTHERS and self.load_average_start[0] < self.cpus / 2
        ends = [self.load_average_start, self.load_average_end or self.load_average_start]
        return all(load[0] < self.cpus / 2 for load in ends)

    def to_json(self) -> dict[str, Any]:
        """The ``machine`` object of a record."""
        return {"cpus": self.cpus, "load_average_start": self.load_average_start,
                "load_average_end": self.load_average_end, "others_cores": self.others_cores,
                "quiet": self.quiet}


@dataclass
class Record:
    """One measurement's figures with its kind, command and machine facts."""

    kind: str
    result: dict[str, Any]
    machine: MachineFacts
    command: str = field(default_factory=command_line)
    when: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    def to_json(self) -> dict[str, Any]:
        """The record as written to disk."""
        return {"kind": self.kind, "command": self.command, "when": self.when,
                "machine": self.machine.to_json(), "result": self.result}


def write_record(record: Record, out: Path | None) -> str:
    """Finish the machine facts, write the record to ``out`` (when given) and return its JSON text."""
    if record.machine.load_average_end is None:
        record.machine.finish()
    text = json.dumps(record.to_json(), indent=2, ensure_ascii=False)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")
        log.info("wrote %s", out)
    return text


def load_record(path: Path) -> dict[str, Any]:
    """Read a record written by :func:`write_record` (or an older script's bare JSON result).

    Returns the ``result`` object; a file without one (written before the records) is returned
    whole.
    """
    from slimvec.errors import ConfigError

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"Cannot read the measurement record {path}: {exc}. Expected the JSON "
                          "file a `python -m benchmarks KIND --out FILE` run wrote; run it again.") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object (a measurement record), got "
                          f"{type(data).__name__}. Pass the file a `python -m benchmarks KIND --out` wrote.")
    result = data.get("result", data)
    return result if isinstance(result, dict) else {"rows": result}
