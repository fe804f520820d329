"""Size models fitted on real stores, checked at a size they were not fitted on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from slimvec.errors import ConfigError
from slimvec.planner.sizing import SizeModel, calibrate, check_model, fit_model, measure_store, sizing_spec


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


@pytest.mark.parametrize("spec", ["hnsw:threads=1", "faiss:HNSW32", "qdrant-edge"])
def test_size_model_predicts_unseen_size_within_10_percent(spec: str, tmp_path: Path) -> None:
    model, measured = calibrate(spec, sizes=(1000, 2000), dims=(32, 96), workdir=tmp_path)
    assert len(measured) == 4 and all(m.total > 0 for m in measured)
    # twice the largest fitted corpus, at a dimension between the fitted ones
    check = check_model(model, n=4000, dim=64, workdir=tmp_path)
    assert check.measured > measured[-1].total / 2
    assert abs(check.error) < 0.10, (spec, check)
    # the vectors cost about 4 bytes per float32 coordinate, whatever else the store adds
    vec_comp = "vectors" if spec == "qdrant-edge" else "index"
    assert 3.5 < model.components[vec_comp].per_dim < 4.5
    # RAM counts the resident parts only, so it never exceeds disk for the graph stores' files
    assert 0 < model.ram_bytes(1e6, 96) <= model.disk_bytes(1e6, 96) + model.extra_ram_per_vector * 1e6
    assert list(tmp_path.iterdir()) == []  # temporary stores are removed


def test_hnswlib_links_match_the_format(tmp_path: Path) -> None:
    """hnswlib stores 2·M level-0 links of 4 bytes, an 8-byte label and headers per vector."""
    model, _ = calibrate("hnsw:M=8,threads=1", sizes=(1000, 3000), dims=(16, 64), workdir=tmp_path)
    per_vector = model.components["index"].per_vector
    links = 4 * 2 * 8
    assert links < per_vector < links + 40


def test_sq8_stores_one_byte_per_coordinate(tmp_path: Path) -> None:
    model, _ = calibrate("faiss:SQ8", sizes=(1000, 2000), dims=(32, 96), workdir=tmp_path)
    assert 0.9 < model.components["index"].per_dim < 1.1
    check = check_model(model, 3000, 48, workdir=tmp_path)
    assert abs(check.error) < 0.10


def test_real_vectors_and_json_round_trip(minilm_vectors: np.ndarray, tmp_path: Path) -> None:
    vecs = minilm_vectors[:1500, :]
    m = measure_store("hnsw:threads=1", 1500, 384, vectors=vecs, workdir=tmp_path)
    assert m.components["index"] >= 1500 * 384 * 4
    model, _ = calibrate("hnsw:threads=1", sizes=(500, 1000), dims=(384,), workdir=tmp_path)
    again = SizeModel.from_json(json.loads(json.dumps(model.to_json())))
    assert again.disk_bytes(1500, 384) == pytest.approx(model.disk_bytes(1500, 384))
    assert abs(model.disk_bytes(1500, 384) - m.total) / m.total < 0.10


def test_specs_and_bad_input(tmp_path: Path) -> None:
    assert sizing_spec("qdrant-edge:/data/idx,quant=sq8") == "qdrant-edge:quant=sq8"
    assert sizing_spec("faiss") == "faiss:HNSW32"
    assert sizing_spec("faiss:IVF64,PQ8,nprobe=4") == "faiss:IVF64,PQ8,nprobe=4"
    with pytest.raises(ConfigError, match="No size model for store 'qdrant'"):
        sizing_spec("qdrant:http://localhost:6333")
    with pytest.raises(ConfigError, match="Unknown store"):
        sizing_spec("milvus")
    one = measure_store("hnsw:threads=1", 200, 8, workdir=tmp_path)
    with pytest.raises(ConfigError, match="two or more corpus sizes"):
        fit_model([one, one])
    with pytest.raises(ConfigError, match="expected 10 vectors of dimension 8"):
        measure_store("hnsw", 10, 8, vectors=np.zeros((10, 4), np.float32), workdir=tmp_path)
    model, _ = calibrate("hnsw:threads=1", sizes=(200, 400), dims=(8,), workdir=tmp_path)
    with pytest.raises(ConfigError, match="fitted on"):
        check_model(model, 400, 8, workdir=tmp_path)


def test_measured_resident_memory_holds_the_vectors(tmp_path: Path) -> None:
    from slimvec.planner.sizing import measure_resident

    n, dim = 4000, 128
    r = measure_resident("hnsw:threads=1", n, dim, workdir=tmp_path)
    model, _ = calibrate("hnsw:threads=1", sizes=(1000, 2000), dims=(dim,), workdir=tmp_path)
    # hnswlib loads the whole graph: the process grows by at least the float32 vectors,
    # and the model (resident data structures only) does not exceed what was measured
    assert r["rss_delta"] >= n * dim * 4
    assert model.ram_bytes(n, dim) <= r["rss_delta"]
    assert r["mapped"].get("index", 0) == 0  # read into memory, not memory-mapped


def test_trained_stores_are_sized_above_what_they_need_to_train(tmp_path: Path) -> None:
    from slimvec.connectors import store_dim_problem
    from slimvec.planner.sizing import sizing_sizes

    assert sizing_sizes("hnsw") == (1000, 2000)
    assert sizing_sizes("faiss:HNSW32,SQ8") == (1000, 2000)
    assert sizing_sizes("faiss:IVF256,PQ16") == (1000, 2000)   # 512 vectors suffice
    assert sizing_sizes("faiss:IVF1024,PQ16,nprobe=32") == (4000, 8000)
    # an IVF640 store can be fitted at those sizes (1,000 vectors: 1.6 per list, FAISS refuses
    # fewer than one)
    spec = "faiss:IVF640,PQ4"
    assert sizing_sizes(spec) == (2000, 4000)
    model, measured = calibrate(spec, sizes=sizing_sizes(spec), dims=(16,), workdir=tmp_path)
    assert [m.n for m in measured] == [2000, 4000] and model.disk_bytes(4000, 16) > 4000 * 4
    with pytest.raises(ConfigError, match="needs at least 640 training vectors .*got 600"):
        calibrate(spec, sizes=(600,), dims=(16,), workdir=tmp_path)  # refused before FAISS trains
    assert store_dim_problem("faiss:PQ32", 48) and store_dim_problem("faiss:PQ16", 48) is None
