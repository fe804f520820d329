"""Checks of a Ray cluster before any work, and the per-node times of a run.

Run by :mod:`slimvec.engines.ray_ingest` right after it joins a cluster (``--ray-address``), before
the fit sample is read:

- :func:`check_nodes_see`: one Ray task per alive node (``num_cpus=0``, pinned to that node)
  stats every input file and a custom ``--encoder`` folder. Read tasks run on every node, the
  head included, so a file one node cannot see would abort the run after work was done; here it
  is named, with the node, before any;
- :func:`wait_for_capacity`: a bounded wait (``SLIMVEC_RAY_CAPACITY_WAIT`` seconds, default
  300) for a node with a free CPU (and GPU) for one encoder actor, then an error saying what is
  missing, where Ray alone would wait without a word.

:class:`NodeTimes` adds up what the encoder actors report with each block (their node, their
encode + reduce seconds) and the driver's write time, for the run's JSON summary.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from slimvec.engines.runtime import require_ray
from slimvec.errors import ConfigError

__all__ = ["CAPACITY_ENV", "capacity_wait", "check_nodes_see", "wait_for_capacity", "node_address",
           "NodeTimes"]

log = logging.getLogger(__name__)
CAPACITY_ENV = "SLIMVEC_RAY_CAPACITY_WAIT"
DEFAULT_CAPACITY_WAIT = 300.0
SHARED_STORAGE = ("Every Ray node reads the inputs (and a custom --encoder folder) by the driver's "
                  "path, and writes the segments of a FAISS index into its --index folder: put "
                  "them on storage every node mounts at the same path (NFS, a shared volume), or "
                  "copy the inputs to that path on every node; see docs/scale-out.md.")


def capacity_wait(value: str | None = None) -> float:
    """Seconds to wait for free capacity: ``value``, else ``$SLIMVEC_RAY_CAPACITY_WAIT``, else 300.

    Raises
    ------
    ConfigError
        Not a number of seconds >= 0.
    """
    raw = value if value is not None else os.environ.get(CAPACITY_ENV)
    if raw is None or raw == "":
        return DEFAULT_CAPACITY_WAIT
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise ConfigError(f"{CAPACITY_ENV}={raw!r}: expected seconds >= 0 to wait for a free Ray "
                          f"CPU, e.g. {CAPACITY_ENV}=600.")
    return seconds


def stat_paths(paths: Sequence[str]) -> list[tuple[str, str]]:
    """On a node: ``[(path, reason), ...]`` for each path it cannot read."""
    bad = []
    for path in paths:
        try:
            os.stat(path)
            if not os.access(path, os.R_OK):
                bad.append((path, "not readable by the Ray worker's user"))
        except OSError as exc:
            bad.append((path, exc.strerror or type(exc).__name__))
    return bad


def check_nodes_see(paths: Sequence[str], timeout: float = 120.0) -> int:
    """Stat ``paths`` on every alive node of the joined cluster; returns how many nodes answered.

    A node that does not answer within ``timeout`` (busy, or it died meanwhile) is logged and
    not waited for: the run does not depend on one node.

    Raises
    ------
    ConfigError
        A node cannot see (or read) a path: names the node, the path and what to do.
    """
    ray = require_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(num_cpus=0, max_retries=0)(stat_paths)
    refs = {task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        n["NodeID"], soft=False)).remote(list(paths)): n for n in ray.nodes() if n.get("Alive")}
    if not refs:
        return 0
    ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
    for ref in late:
        log.warning("Ray node %s did not answer the input check in %.0f s; not checked",
                    refs[ref]["NodeManagerAddress"], timeout)
    problems, answered = [], 0
    for ref in ready:
        node = refs[ref]
        try:
            bad = ray.get(ref)
        except Exception as exc:  # a node that died meanwhile: the run may go on without it
            log.warning("Ray node %s could not run the input check: %s",
                        node["NodeManagerAddress"], exc)
            continue
        answered += 1
        problems += [f"Ray node {node['NodeManagerAddress']} (node id {node['NodeID'][:12]}) cannot see {path}: {why}"
                     for path, why in bad]
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise ConfigError("; ".join(problems[:5]) + more + ". Nothing was read or written. "
                          + SHARED_STORAGE)
    return answered


def _have(resources: dict[str, float], cpus: float, gpus: float) -> str:
    cpu, gpu = float(resources.get("CPU", 0.0)), float(resources.get("GPU", 0.0))
    return f"{cpu:g} CPU" + (f" and {gpu:g} GPU" if gpus else "")


def wait_for_capacity(cpus: float, gpus: float, wait_seconds: float, address: str,
                      say: Callable[[str], None] | None = None, poll: float = 1.0) -> float:
    """Wait until the cluster has ``cpus`` CPUs and ``gpus`` GPUs free (one encoder actor).

    Returns the seconds waited.

    Raises
    ------
    ConfigError
        Still not free after ``wait_seconds``: says what the cluster has in all and free, what
        one actor needs, and how to give it room (or wait longer).
    """
    ray = require_ray()
    t0 = time.monotonic()
    deadline, told = t0 + float(wait_seconds), False
    while True:
        free = ray.available_resources()
        if free.get("CPU", 0.0) >= cpus and free.get("GPU", 0.0) >= gpus:
            return time.monotonic() - t0
        now = time.monotonic()
        if now >= deadline:
            break
        if not told:
            (say or log.info)(f"waiting up to {wait_seconds:g} s for a Ray node with {cpus:g} "
                              f"free CPU{f' and {gpus:g} GPU' if gpus else ''} (the cluster at "
                              f"{address} has {_have(free, cpus, gpus)} free)")
            told = True
        time.sleep(min(poll, deadline - now))
    total = ray.cluster_resources()
    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    raise ConfigError(
        f"No capacity in the Ray cluster at {address} for {wait_seconds:g} s: one encoder actor "
        f"needs {cpus:g} CPU{f' and {gpus:g} GPU' if gpus else ''}, the cluster's {nodes} alive "
        f"node(s) have {_have(total, cpus, gpus)} in all and {_have(free, cpus, gpus)} free. "
        "Start a worker node (ray start --address HEAD:PORT --num-cpus N), free the CPUs other "
        "jobs hold, or lower --gpus-per-worker; nothing was written. To wait longer set "
        f"{CAPACITY_ENV}=SECONDS (now {wait_seconds:g}).")


def node_address(node_id: str, known: dict[str, str]) -> str:
    """A node's address as the cluster advertises it (``ray.nodes()``), by its node id;
    ``known`` caches them (refreshed when a new node reports)."""
    if not node_id:
        return "unknown"
    if node_id not in known:
        known.update({n["NodeID"]: n["NodeManagerAddress"] for n in require_ray().nodes()})
        known.setdefault(node_id, node_id[:12])  # asked once, not per block
    return known[node_id]


@dataclass
class NodeTimes:
    """Per-node figures of one run: blocks, documents and encode seconds as the actors report
    them; the driver's write seconds (the builder's upserts and commits)."""

    nodes: dict[str, dict[str, float]] = field(default_factory=dict)

    def encoded(self, node: str, documents: int, seconds: float, blocks: int = 1) -> None:
        """A report of ``blocks`` blocks from the actor on ``node``."""
        entry = self._entry(node)
        entry["blocks"] += int(blocks)
        entry["documents"] += int(documents)
        entry["encode_seconds"] += float(seconds)

    def wrote(self, node: str, seconds: float) -> None:
        """Time a writer on ``node`` spent: the driver's on a block or a segment's adoption, a
        worker's on writing a segment."""
        self._entry(node)["write_seconds"] += float(seconds)

    def _entry(self, node: str) -> dict[str, float]:
        return self.nodes.setdefault(node or "unknown", {"blocks": 0, "documents": 0,
                                                         "encode_seconds": 0.0,
                                                         "write_seconds": 0.0})

    @property
    def encode_seconds(self) -> float:
        """Encode + reduce seconds over all nodes (actor time, which overlaps across nodes)."""
        return sum(e["encode_seconds"] for e in self.nodes.values())

    def to_json(self) -> dict[str, dict[str, float]]:
        """``{node IP: {blocks, documents, encode_seconds, write_seconds}}``, seconds rounded."""
        return {node: {k: (round(v, 3) if k.endswith("seconds") else int(v)) for k, v in e.items()}
                for node, e in sorted(self.nodes.items())}
