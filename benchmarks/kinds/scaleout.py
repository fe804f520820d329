"""The Ray engine against one process on one machine (``python -m benchmarks scaleout``).

The same N documents are ingested by ``slimvec ingest`` in one process and with ``--engine ray
--workers W``; each run is a fresh ``python -m slimvec ingest ... --json`` subprocess into a new
index folder. Rows carry the summary's docs/s (model loading excluded for one process; Ray
start-up and actor model loading included for the engine) and the command's wall time. The one
process runs with torch's default threads (all cores), each Ray actor with one thread and one CPU.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.corpora.sentences import DATA, pair_sentences, write_jsonl
from benchmarks.kinds.proc import run_cli
from slimvec.errors import ConfigError

__all__ = ["scaleout_corpus", "parse_run", "measure_scaleout"]

log = logging.getLogger(__name__)


def scaleout_corpus(n: int, path: Path) -> Path:
    """The first ``n`` unique bundled sentences (pair files, then sentences.jsonl) as JSONL with ids."""
    texts = pair_sentences(n, extra_jsonl=DATA / "sentences.jsonl")
    return write_jsonl(path, [{"id": f"doc{i}", "text": t} for i, t in enumerate(texts)])


def parse_run(name: str) -> list[str]:
    """``local`` -> no engine options; ``rayW`` -> ``--engine ray --workers W``."""
    if name == "local":
        return []
    if name.startswith("ray") and name[3:].isdigit() and int(name[3:]) > 0:
        return ["--engine", "ray", "--workers", name[3:]]
    raise ConfigError(f"Unknown scale-out run {name!r}: expected 'local' or 'rayW' (W workers, e.g. ray2).")


def measure_scaleout(docs: int, work: Path, runs: Sequence[str] = ("local", "ray2", "ray1")) -> dict[str, Any]:
    """Ingest ``docs`` bundled sentences once per run; indexes are written under ``work``.

    Returns
    -------
    dict
        ``{"docs", "rows": [{"run", "docs", "docs_per_s", "total_seconds", "fit_seconds",
        "stream_seconds", "wall_seconds", "load1"}]}``.
    """
    engine_args = {name: parse_run(name) for name in runs}  # every name checked before any run
    work.mkdir(parents=True, exist_ok=True)
    src = scaleout_corpus(docs, work / "corpus.jsonl")
    rows = []
    for name, extra in engine_args.items():
        wall, res = run_cli(["ingest", str(src), "--index", str(work / f"idx-{name}"), "--rebuild", *extra, "--json"],
                            threads=None if not extra else 1, drop_threads=not extra)
        rows.append({"run": name, "docs": res["ingested"], "docs_per_s": res["docs_per_s"],
                     "total_seconds": round(res["total_seconds"], 1), "fit_seconds": round(res["fit_seconds"], 2),
                     "stream_seconds": round(res["seconds"], 1), "wall_seconds": round(wall, 1),
                     "load1": round(os.getloadavg()[0], 2)})
        log.info("%s", rows[-1])
    return {"docs": docs, "rows": rows}
