"""The ``--engine`` part of ``slimvec plan``: workers, hours, shards and nodes (rendering)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rich.console import Console
from rich.table import Table

from slimvec.engines.plan import EngineConfig, EnginePlan, check_engine_config, engine_plan, measure_cpu_rate

__all__ = ["run_engine_plan"]


def run_engine_plan(plan: Any, engine: str, workers: int, gpus_per_worker: float,
                    cpu_rate: float | None, node_ram: str, node_hour_price: float,
                    replication: int, err: Console) -> EnginePlan:
    """Size ingest and serving for the candidates of a ``slimvec plan`` result."""
    from slimvec.benchmarks.plan import parse_bytes

    source = "given with --cpu-rate"
    cfg = EngineConfig(engine=engine, workers=workers, gpus_per_worker=gpus_per_worker,
                       cpu_docs_per_s_per_core=cpu_rate or 0.0,
                       node_ram_bytes=parse_bytes(node_ram, "--node-ram"),
                       node_hour_price=node_hour_price, replication=replication, cpu_source=source)
    measure = cpu_rate is None and not gpus_per_worker
    # every number before the measurement (the rate to measure stands in as 1 doc/s)
    check_engine_config(replace(cfg, cpu_docs_per_s_per_core=1.0) if measure else cfg)
    if measure:
        err.print("measuring MiniLM docs/s on 1 CPU thread ...")
        cfg.cpu_docs_per_s_per_core, cfg.cpu_source = measure_cpu_rate(1), "measured here now, 1 thread"
    configs = [(c.label, c.dim_out, c.ram_bytes) for c in plan.candidates]
    return engine_plan(plan.docs, configs, cfg)


def render(result: EnginePlan, out: Console, human: Any) -> None:
    """Print the engine plan table and its inputs."""
    table = Table(title=f"Ingest {result.docs:,} documents: {result.docs_per_s:,.0f} docs/s → "
                        f"{result.ingest_hours:,.1f} h ({result.worker_hours:,.0f} worker-hours)")
    for col in ("configuration", "dim", "bytes/vector", "RAM", "shards", "nodes", "RAM saved",
                "saved / month"):
        table.add_column(col, justify="left" if col == "configuration" else "right")
    for r in result.rows:
        table.add_row(r.label, str(r.dim_out), f"{r.bytes_per_vector:,.0f}", human(r.ram_bytes),
                      str(r.shards), str(r.nodes), human(r.saved_ram_bytes),
                      f"{r.saved_per_month:,.0f}")
    out.print(table)
    for line in result.inputs:
        out.print(f"engine input: {line}")
