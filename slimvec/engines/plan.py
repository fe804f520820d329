"""The engine side of ``slimvec plan``: encoder workers, ingest hours, shards and nodes.

Inputs, each printed with the plan:

- **CPU encoder throughput** per core: measured on this machine by :func:`measure_cpu_rate`
  (MiniLM docs/s at 1 and 2 torch threads; ``python -m slimvec.engines.plan`` prints it), or
  given by the user;
- **GPU encoder throughput**: the rate ``benchmarks/gpu_ingest_check.py`` measured on this
  machine's GPU and recorded (:func:`measured_gpu_rate`, ``$SLIMVEC_CACHE/gpu-rate.json``), else
  the one measured on an H200 for issue 36, :data:`GPU_DOCS_PER_S` (the plan says which);
- **bytes per vector** of each configuration: the RAM predicted by the store size models of
  ``slimvec plan`` (:mod:`slimvec.planner.sizing`, fitted on real builds) at the planned N,
  divided by N.

- **the one writer's ceiling**: every engine writes through one writer, and on a GPU machine the
  encoders outrun it (issue 36: on an H200 with 16 cores ``slimvec ingest`` wrote 5,586 docs/s
  with the default recipe while the encoder alone gave 9,676). The ingest rate
  ``benchmarks/gpu_ingest_check.py`` recorded on this machine, else :data:`WRITER_DOCS_PER_S`;
  the plan's rate is the smaller of the encoders' and the writer's.

The model is linear up to that ceiling: workers scale the encoding rate, and a node's RAM budget
holds ``ram_fraction`` of the shard it serves. A multi-node run has not been executed.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from slimvec.ranges import check_int, check_number

__all__ = ["EngineConfig", "EngineRow", "EnginePlan", "engine_plan", "check_engine_config", "measure_cpu_rate",
           "GPU_DOCS_PER_S", "GPU_SOURCE", "gpu_rate_file", "measured_gpu_rate", "WRITER_DOCS_PER_S",
           "WRITER_MEASURED_N", "writer_rate"]

#: all-MiniLM-L6-v2 sentences/s on one NVIDIA H200, measured encoder-only (issue 36)
GPU_DOCS_PER_S = 10_989.0
GPU_SOURCE = ("measured: all-MiniLM-L6-v2 encoder-only on one NVIDIA H200, calls of 1,024 held-out "
              "English sentences (mean 60 characters) in passes of 256, 10,989 sentences/s "
              "(issue 36; benchmarks/gpu_ingest_check.py re-measures it on your GPU); the published "
              "V100 figure of sentence-transformers' model table, 14,200, was not reached there")


@dataclass
class EngineConfig:
    """Cluster assumptions of a plan (``slimvec plan --engine ...`` options)."""

    engine: str = "ray"
    workers: int = 8
    cores_per_worker: int = 1
    gpus_per_worker: float = 0.0
    cpu_docs_per_s_per_core: float = 0.0
    cpu_source: str = "measured here"
    gpu_docs_per_s: float | None = None  # None: measured_gpu_rate(), else GPU_DOCS_PER_S
    node_ram_bytes: int = 64 * 2**30
    ram_fraction: float = 0.7
    node_hour_price: float = 0.0
    replication: int = 1


@dataclass
class EngineRow:
    """One configuration sized for the cluster."""

    label: str
    dim_out: int
    bytes_per_vector: float
    ram_bytes: float
    shards: int
    nodes: int
    saved_ram_bytes: float = 0.0
    saved_per_month: float = 0.0


@dataclass
class EnginePlan:
    """Ingest time and serving footprint of ``docs`` documents."""

    docs: int
    config: EngineConfig
    docs_per_s: float
    ingest_hours: float
    worker_hours: float
    rows: list[EngineRow] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"docs": self.docs, "config": asdict(self.config), "docs_per_s": self.docs_per_s,
                "ingest_hours": self.ingest_hours, "worker_hours": self.worker_hours,
                "rows": [asdict(r) for r in self.rows], "inputs": self.inputs}


def check_engine_config(cfg: EngineConfig) -> None:
    """Refuse numbers no cluster has (zero or negative workers, rates, RAM, replicas; NaN).

    Raises
    ------
    ConfigError
        One line naming the field (and its ``slimvec plan`` option), the allowed range and the
        value given.
    """
    check_int("workers (--workers)", cfg.workers, low=1)
    check_int("cores_per_worker", cfg.cores_per_worker, low=1)
    check_number("gpus_per_worker (--gpus-per-worker)", cfg.gpus_per_worker, low=0)
    if cfg.gpus_per_worker > 0:
        if cfg.gpu_docs_per_s is not None:
            check_number("gpu_docs_per_s", cfg.gpu_docs_per_s, low=0, low_open=True)
    else:
        check_number("cpu_docs_per_s_per_core (--cpu-rate)", cfg.cpu_docs_per_s_per_core, low=0,
                     low_open=True, hint="measure it with measure_cpu_rate() or give it; GPUs use the "
                     "measured rate")
    check_int("node_ram_bytes (--node-ram)", cfg.node_ram_bytes, low=1)
    check_number("ram_fraction", cfg.ram_fraction, low=0, high=1, low_open=True)
    check_number("node_hour_price (--node-hour-price)", cfg.node_hour_price, low=0)
    check_int("replication (--replication)", cfg.replication, low=1)


def gpu_rate_file() -> Path:
    """``$SLIMVEC_CACHE/gpu-rate.json`` or ``~/.cache/slimvec/gpu-rate.json``."""
    root = os.environ.get("SLIMVEC_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "slimvec") / "gpu-rate.json"


def _recorded(key: str, path: Path | None = None) -> tuple[float, dict[str, Any]] | None:
    """A positive finite rate ``key`` of the record ``benchmarks/gpu_ingest_check.py`` wrote on
    this machine, with the record; None when nothing usable was recorded."""
    try:
        rec = json.loads((path or gpu_rate_file()).read_text(encoding="utf-8"))
        rate = float(rec[key])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (rate, rec) if math.isfinite(rate) and rate > 0 else None


def measured_gpu_rate(path: Path | None = None) -> tuple[float, str] | None:
    """The encoder-only rate ``benchmarks/gpu_ingest_check.py`` recorded on this machine, and its
    source line; None when nothing usable was recorded."""
    found = _recorded("docs_per_s", path)
    if found is None:
        return None
    rate, rec = found
    return rate, (f"measured on this machine: {rec.get('model', 'the encoder')} encoder-only on "
                  f"{rec.get('gpu') or rec.get('device')}, passes of {rec.get('batch')}, "
                  f"{rec.get('texts', '?')} texts, {rec.get('measured_at', '?')}, by "
                  "benchmarks/gpu_ingest_check.py")


#: docs/s one writer took end to end on one NVIDIA H200 machine with 16 cores (issue 36:
#: ``slimvec ingest`` of 200,000 real texts, default recipe, the FAISS graph inserted beside the
#: writer); the plan's rate is capped by it unless this machine recorded its own
WRITER_DOCS_PER_S = 5_586.0
#: documents the writer rate was measured over (issue 36's ingest, or this machine's record)
WRITER_MEASURED_N = 200_000


def writer_rate(path: Path | None = None) -> tuple[float, str]:
    """The one writer's ceiling (docs/s) and its source: the ingest rate
    ``benchmarks/gpu_ingest_check.py`` recorded on this machine, else :data:`WRITER_DOCS_PER_S`."""
    found = _recorded("ingest_docs_per_s", path)
    if found is not None:
        rate, rec = found
        return rate, (f"slimvec ingest measured on this machine ({rec.get('gpu') or rec.get('device')}, "
                      f"{rec.get('measured_at', '?')})")
    return WRITER_DOCS_PER_S, ("slimvec ingest on one NVIDIA H200 with 16 cores, default recipe, "
                               "issue 36; not measured on this machine")


def _rate(cfg: EngineConfig) -> tuple[float, str]:
    if cfg.gpus_per_worker > 0:
        given = (cfg.gpu_docs_per_s, "given") if cfg.gpu_docs_per_s is not None else None
        rate, source = given or measured_gpu_rate() or (GPU_DOCS_PER_S, "not measured on this machine; " + GPU_SOURCE)
        return rate * cfg.gpus_per_worker * cfg.workers, f"{rate:,.0f} docs/s per GPU ({source})"
    per = cfg.cpu_docs_per_s_per_core * cfg.cores_per_worker
    return per * cfg.workers, f"{cfg.cpu_docs_per_s_per_core:,.1f} docs/s per CPU core ({cfg.cpu_source})"


def engine_plan(docs: int, configs: Sequence[tuple[str, int, float]], cfg: EngineConfig,
                writer_scale: tuple[float, str] | None = None) -> EnginePlan:
    """Size ingest and serving for ``docs`` documents.

    Parameters
    ----------
    docs : int
    configs : list of (label, dim_out, ram_bytes at ``docs``)
        Configurations from the size models; the one with the largest ``dim_out`` is the
        full-precision reference the savings are measured against.
    cfg : EngineConfig
    writer_scale : (float, str), optional
        The writer's mean rate over ``docs`` relative to its rate over
        :data:`WRITER_MEASURED_N` documents, and how it was fitted
        (:func:`slimvec.planner.growth.insertion_scale`): the graph insertion slows as N grows.
        Without it the measured rate is applied flat, and the plan says so.

    Raises
    ------
    ConfigError
        ``docs`` < 1, a configuration's RAM negative or not finite, or a number of ``cfg`` out of
        range (:func:`check_engine_config`).
    """
    docs = check_int("docs", docs, low=1)
    check_engine_config(cfg)
    for label, _, ram in configs:
        check_number(f"RAM of {label}", ram, low=0)
    rate, rate_note = _rate(cfg)
    ceiling, ceiling_note = writer_rate()
    if docs <= WRITER_MEASURED_N:
        growth = ""
    elif writer_scale is not None:
        ceiling *= writer_scale[0]
        growth = (f"; measured over {WRITER_MEASURED_N:,} documents, scaled by {writer_scale[0]:.2f} to "
                  f"{docs:,} as the graph insertion slows with N ({writer_scale[1]})")
    else:
        growth = (f"; measured over {WRITER_MEASURED_N:,} documents and applied flat to {docs:,}: the graph "
                  "insertion slows as N grows (each insert searches a larger graph, ~ln N), so at this N "
                  "the writer is slower and the ingest longer than planned; bench the default recipe at "
                  "two or more sizes and pass --results to scale it")
    encoders, rate = rate, min(rate, ceiling)
    seconds = docs / rate
    plan = EnginePlan(docs, cfg, rate, seconds / 3600, seconds / 3600 * cfg.workers)
    usable = cfg.node_ram_bytes * cfg.ram_fraction
    for label, dim_out, ram in configs:
        shards = max(1, math.ceil(ram / usable))
        plan.rows.append(EngineRow(label, dim_out, ram / docs, ram, shards, shards * cfg.replication))
    if plan.rows:
        full = max(plan.rows, key=lambda r: (r.dim_out, r.ram_bytes))
        for r in plan.rows:
            r.saved_ram_bytes = full.ram_bytes - r.ram_bytes
            r.saved_per_month = (full.nodes - r.nodes) * cfg.node_hour_price * 730
    plan.inputs = [
        f"encoder rate: {rate_note}; {cfg.workers} worker(s) x "
        + (f"{cfg.gpus_per_worker:g} GPU" if cfg.gpus_per_worker else f"{cfg.cores_per_worker} core(s)")
        + f" = {encoders:,.0f} docs/s",
        f"one writer: at most {ceiling:,.0f} docs/s ({ceiling_note}{growth}); the ingest runs at "
        f"{rate:,.0f} docs/s" + (", the writer's pace" if ceiling < encoders else ""),
        f"node RAM {cfg.node_ram_bytes / 2**30:,.0f} GiB, {cfg.ram_fraction:.0%} usable per shard; "
        f"replication {cfg.replication}; node-hour price {cfg.node_hour_price:g} (730 h/month)",
        "bytes per vector: the size models' RAM prediction at N divided by N",
        "linear model: workers scale the encoding rate up to the writer's; a multi-node run has "
        "not been executed",
    ]
    return plan


def measure_cpu_rate(threads: int, n: int = 512, batch_size: int | None = None,
                     texts: list[str] | None = None) -> float:
    """MiniLM docs/s on ``threads`` torch threads, on ``n`` bundled sentences or of ``texts`` (the
    user's own: the rate falls with text length), after a warm-up, encoded as an ingest encodes
    them: sorted by length, one encoder call per pass of ``batch_size`` [default: the ingest's,
    :data:`~slimvec.encoder.INGEST_ENCODE_BATCH`].

    On one thread the rate is per CPU-second of the encoding thread (``time.thread_time``, as the
    ingest summary's ``encode_cpu_seconds``): what a core given to the encoder does, whatever else
    the machine runs (on a shared machine the wall-clock rate falls with the load); on several
    threads it is per wall-clock second."""
    import json
    from pathlib import Path

    import torch

    from slimvec.encoder import INGEST_ENCODE_BATCH, Encoder

    if texts is None:
        data = Path(__file__).resolve().parents[1] / "data" / "sentences.jsonl"
        with open(data, encoding="utf-8") as fh:
            texts = [json.loads(line)["text"] for _, line in zip(range(n), fh)]
    texts = sorted(texts[:n], key=len, reverse=True)
    step = int(batch_size or INGEST_ENCODE_BATCH)
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        enc = Encoder(batch_size=step)
        enc.encode(texts[:step])
        clock = time.thread_time if threads == 1 else time.perf_counter
        t0 = clock()
        for lo in range(0, len(texts), step):
            enc.encode(texts[lo:lo + step])
        return len(texts) / (clock() - t0)
    finally:
        torch.set_num_threads(old)


if __name__ == "__main__":  # python -m slimvec.engines.plan: the CPU figure the plan uses
    for t in (1, 2):
        print(f"MiniLM on {t} thread(s): {measure_cpu_rate(t):,.1f} docs/s")
