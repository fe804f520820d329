"""The engine capacity model: rates, hours, shards, nodes and savings (pure arithmetic)."""

from __future__ import annotations

import json

import pytest

from slimvec.engines.plan import GPU_DOCS_PER_S, WRITER_DOCS_PER_S, EngineConfig, engine_plan
from slimvec.errors import ConfigError

GiB = 2**30
CONFIGS = [("pca:96 → hnsw", 96, 50 * GiB), ("none → hnsw", 384, 157 * GiB)]


def test_cpu_plan_hours_shards_and_savings():
    cfg = EngineConfig(workers=10, cpu_docs_per_s_per_core=50.0, node_ram_bytes=64 * GiB,
                       ram_fraction=0.5, node_hour_price=1.0, replication=2)
    plan = engine_plan(100_000_000, CONFIGS, cfg)
    assert plan.docs_per_s == 500.0
    assert plan.ingest_hours == pytest.approx(100_000_000 / 500 / 3600)
    reduced, full = plan.rows
    assert (reduced.shards, reduced.nodes) == (2, 4)  # 50 GiB over 32 GiB usable, 2 replicas
    assert (full.shards, full.nodes) == (5, 10)
    assert reduced.bytes_per_vector == pytest.approx(50 * GiB / 1e8)
    assert reduced.saved_ram_bytes == 107 * GiB
    assert reduced.saved_per_month == (10 - 4) * 730.0
    assert full.saved_per_month == 0


def test_gpu_plan_uses_the_measured_rate_with_its_source(tmp_path, monkeypatch):
    """Issue 36 item 4: the rate recorded on this machine (benchmarks/gpu_ingest_check.py), else
    the H200 figure, saying it was not measured here."""
    monkeypatch.setenv("SLIMVEC_CACHE", str(tmp_path))
    plan = engine_plan(1_000_000, CONFIGS, EngineConfig(workers=2, gpus_per_worker=1))
    # two H200s' encoders (2 x 10,989) outrun the one writer measured there: its pace
    assert 2 * GPU_DOCS_PER_S > WRITER_DOCS_PER_S == plan.docs_per_s == 5_586
    assert any("not measured on this machine" in line and "H200" in line for line in plan.inputs)
    assert any("the writer's pace" in line for line in plan.inputs)
    (tmp_path / "gpu-rate.json").write_text(json.dumps(
        {"docs_per_s": 4321.0, "batch": 256, "device": "cuda", "gpu": "NVIDIA L4", "texts": 200000,
         "ingest_docs_per_s": 9000.0}))
    plan = engine_plan(1_000_000, CONFIGS, EngineConfig(workers=2, gpus_per_worker=1))
    assert plan.docs_per_s == 2 * 4321.0  # under this machine's measured writer
    assert not any("the writer's pace" in line for line in plan.inputs)
    assert any("measured on this machine" in line and "NVIDIA L4" in line for line in plan.inputs)
    given = engine_plan(1_000_000, CONFIGS, EngineConfig(workers=2, gpus_per_worker=1,
                                                         gpu_docs_per_s=1000.0))
    assert given.docs_per_s == 2000.0


def test_cpu_plan_needs_a_rate():
    with pytest.raises(ValueError):
        engine_plan(1000, CONFIGS, EngineConfig())


@pytest.mark.parametrize("fields,says", [
    ({"workers": 0}, "workers (--workers) must be an integer >= 1, got 0"),  # was ZeroDivisionError
    ({"workers": -4}, "workers (--workers) must be an integer >= 1, got -4"),  # was -400 docs/s
    ({"cpu_docs_per_s_per_core": -3.0}, "cpu_docs_per_s_per_core (--cpu-rate) must be a finite number > 0"),
    ({"cpu_docs_per_s_per_core": float("nan")}, "> 0, got nan"),
    ({"gpus_per_worker": -1.0}, "gpus_per_worker (--gpus-per-worker) must be a finite number >= 0, got -1.0"),
    ({"replication": 0}, "replication (--replication) must be an integer >= 1, got 0"),
    ({"node_ram_bytes": 0}, "node_ram_bytes (--node-ram) must be an integer >= 1, got 0"),
    ({"node_hour_price": float("inf")}, "node_hour_price (--node-hour-price) must be a finite number >= 0"),
    ({"ram_fraction": 0.0}, "ram_fraction must be a finite number in (0, 1], got 0.0"),
    ({"cores_per_worker": 0}, "cores_per_worker must be an integer >= 1, got 0"),
])
def test_absurd_cluster_numbers_are_config_errors(fields, says):
    """Issue 23 item 10: a Python caller gets one line naming the field, its option and the range."""
    cfg = EngineConfig(**{"workers": 4, "cpu_docs_per_s_per_core": 50.0, **fields})
    with pytest.raises(ConfigError) as info:
        engine_plan(1_000_000, CONFIGS, cfg)
    assert says in str(info.value)


def test_plan_needs_documents():
    with pytest.raises(ConfigError, match="docs must be an integer >= 1, got 0"):
        engine_plan(0, CONFIGS, EngineConfig(workers=2, gpus_per_worker=1))


def test_the_writer_rate_slows_with_n_or_the_plan_says_it_is_applied_flat(tmp_path, monkeypatch):
    """The writer's 5,586 docs/s was measured over 200,000 documents; at 40M the graph insertion
    is slower: scaled by the build times measured at two sizes, else stated as applied flat."""
    from slimvec.buildspec import DEFAULTS
    from slimvec.engines.plan import WRITER_MEASURED_N
    from slimvec.planner.growth import insertion_scale
    from slimvec.planner.rows import Row

    monkeypatch.setenv("SLIMVEC_CACHE", str(tmp_path))  # no rate recorded on this machine
    cfg = EngineConfig(workers=4, gpus_per_worker=1)
    flat = engine_plan(40_000_000, CONFIGS, cfg)
    assert flat.docs_per_s == WRITER_DOCS_PER_S
    assert any("applied flat to 40,000,000" in line and "slows as N grows" in line for line in flat.inputs)
    small = engine_plan(WRITER_MEASURED_N, CONFIGS, cfg)
    assert not any("applied flat" in line for line in small.inputs)
    # the default index built at 100k and 300k (240.7 s: bench-results/realtext-300k), one family
    rows = [Row.from_json({"dataset": f"realtext-minilm-{n // 1000}k", "n_corpus": n, "reducer": "none",
                           "store": "faiss:HNSW16,SQ4,efc=200", "build_s": s})
            for n, s in ((100_000, 60.0), (300_000, 240.66))]
    rows.append(Row.from_json({"dataset": "realtext-minilm-300k", "n_corpus": 300_000, "reducer": "pca:96",
                               "store": "faiss:HNSW16,SQ4", "build_s": 1.0}))  # another dim: not used
    scale = insertion_scale(rows, str(DEFAULTS["recipe_store"]), WRITER_MEASURED_N, 40_000_000)
    assert scale is not None and 0.2 < scale[0] < 0.6 and "n = 100,000, 300,000" in scale[1]
    grown = engine_plan(40_000_000, CONFIGS, cfg, writer_scale=scale)
    assert grown.docs_per_s == pytest.approx(WRITER_DOCS_PER_S * scale[0])
    assert grown.ingest_hours > flat.ingest_hours * 1.5
    assert any(f"scaled by {scale[0]:.2f} to 40,000,000" in line for line in grown.inputs)
    assert insertion_scale(rows[1:], str(DEFAULTS["recipe_store"]), WRITER_MEASURED_N, 40_000_000) is None
