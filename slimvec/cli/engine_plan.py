"""The ``--engine`` part of ``slimvec plan``: workers, hours, shards and nodes (rendering)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rich.console import Console
from rich.table import Table

from slimvec.engines.plan import EngineConfig, EnginePlan, check_engine_config, engine_plan, measure_cpu_rate

__all__ = ["run_engine_plan"]


def run_engine_plan(plan: Any, engine: str, workers: int, gpus_per_worker: float,
                    cpu_rate: float | None, node_ram: str, node_hour_price: float,
                    replication: int, err: Console, cpu_source: str | None = None,
                    rows: Sequence[Any] = ()) -> EnginePlan:
    """Size ingest and serving for the candidates of a ``slimvec plan`` result; ``rows`` (the
    plan's results) scale the writer's rate to N when they time the default recipe's index at
    two or more sizes (:func:`slimvec.planner.growth.insertion_scale`)."""
    from slimvec.buildspec import DEFAULTS
    from slimvec.engines.plan import WRITER_MEASURED_N
    from slimvec.planner.growth import insertion_scale
    from slimvec.planner.plan import parse_bytes

    source = cpu_source or "given with --cpu-rate"
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
    scale = insertion_scale(rows, str(DEFAULTS["recipe_store"]), WRITER_MEASURED_N, plan.docs)
    result = engine_plan(plan.docs, configs, cfg, writer_scale=scale)
    if source.startswith("measured"):
        result.inputs.append("the measured rate is the encoder alone on your --corpus texts; a whole "
                             "ingest (reading, store writes) runs slower: take the docs/s "
                             "`slimvec ingest` prints on a sample of your data and pass --cpu-rate")
    return _agree(plan, result, cfg)


def _agree(plan: Any, result: EnginePlan, cfg: EngineConfig) -> EnginePlan:
    """Say why `plan` and `plan --engine` differ on a row instead of contradicting each other:
    the plan checks a configuration's RAM against --memory-budget, the engine splits it into
    shards of the usable part of --node-ram (issue 27 item 2)."""
    usable = cfg.node_ram_bytes * cfg.ram_fraction
    for cand, row in zip(plan.candidates, result.rows):
        if cand.meets_target and plan.memory_budget is not None and row.shards > 1:
            result.inputs.append(
                f"why they differ: {row.label} fits --memory-budget {plan.memory_budget / 2**30:,.1f} GiB "
                f"as one index, but needs {row.shards} shards at {usable / 2**30:,.1f} GiB usable per "
                f"node ({cfg.ram_fraction:.0%} of --node-ram {cfg.node_ram_bytes / 2**30:,.0f} GiB); one node "
                f"serves it with --node-ram {row.ram_bytes / cfg.ram_fraction / 2**30:,.1f}GiB or more")
            break
    return result


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
