"""FAISS's RaBitQ family through the FAISS store: factory checks, the code-size model, the
quantization label, and the query-bits option ``qb`` (whose out-of-range values abort FAISS)."""

from __future__ import annotations

import numpy as np
import pytest

from slimvec.connectors import canonical_store_spec, make_store, store_class, store_min_train_vectors
from slimvec.errors import ConfigError

FACTORIES = ("RaBitQ", "RaBitQ4", "IVF16,RaBitQ", "IVF16,RaBitQ4", "RaBitQfs", "IVF16,RaBitQfs")


def _vectors(n: int = 600, dim: int = 64, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("factory", FACTORIES)
def test_rabitq_factories_are_accepted(factory):
    assert canonical_store_spec(f"faiss:{factory}") == f"faiss:{factory}"


def test_rabitq_bits_out_of_range_name_the_token_and_range():
    with pytest.raises(ConfigError, match=r"RaBitQ10.*from 1 to 9, got 10"):
        canonical_store_spec("faiss:RaBitQ10")


def test_quantization_label_says_rabitq_and_its_bits():
    faiss = store_class("faiss")
    assert faiss.quantization_label("RaBitQ", {}) == "rabitq"
    assert faiss.quantization_label("IVF1024,RaBitQfs", {}) == "rabitq"
    assert faiss.quantization_label("RaBitQ4", {}) == "rabitq4"
    assert faiss.quantization_label("IVF16,PQ8", {}) == "pq"  # unchanged for the others


@pytest.mark.parametrize("dim", [50, 96, 384])
@pytest.mark.parametrize("factory", ["RaBitQ", "RaBitQ2", "RaBitQ4", "RaBitQfs4", "IVF4,RaBitQ"])
def test_code_bytes_model_matches_faiss_including_the_factors(factory, dim):
    import faiss

    from slimvec.connectors.faiss_store import code_bytes

    index = faiss.downcast_index(faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT))
    assert code_bytes(factory, dim) == int(index.code_size)


def test_code_bytes_of_the_issue_table():
    from slimvec.connectors.faiss_store import code_bytes

    # issue 28: "full RaBitQ (56 B with its factors)" at 384 dimensions; OPQ48 48 B; SQ8 96 B at 96-d
    assert code_bytes("RaBitQ", 384) == 56
    assert code_bytes("OPQ48,PQ48np", 384) == 48
    assert code_bytes("SQ8", 96) == 96
    assert code_bytes("PQ24np", 96) == 24


def test_min_train_vectors():
    assert store_min_train_vectors("faiss:IVF16,RaBitQ") == 16
    assert store_min_train_vectors("faiss:RaBitQ") == 1


@pytest.mark.parametrize("spec, match", [
    ("faiss:RaBitQ,qb=9", r"qb=9 is out of range: expected a whole number from 0 to 8, got 9"),
    ("faiss:RaBitQfs,qb=0", r"qb=0 is out of range for fast-scan.*expected a whole number from 1 to 8"),
    ("faiss:HNSW32,qb=4", r"qb=4 is RaBitQ's query bits.*has no RaBitQ quantizer"),
])
def test_qb_outside_what_faiss_survives_is_refused_when_parsed(spec, match):
    # FAISS aborts the process (std::terminate) on qb=9 and on qb=0 with fast-scan
    with pytest.raises(ConfigError, match=match):
        canonical_store_spec(spec)


def test_qb_is_recorded_and_used_and_a_per_search_qb_is_undone(tmp_path):
    from slimvec.connectors.faiss_store import _rabitq_index

    X = _vectors()
    store = make_store("faiss:RaBitQ,qb=0", tmp_path / "s")
    store.create(X.shape[1], "cosine")
    store.upsert(np.arange(1, len(X) + 1), X)
    store.finalize()
    store.close()
    reader = make_store("faiss:RaBitQ", tmp_path / "s").open()
    try:
        assert reader.options["qb"] == 0
        assert int(_rabitq_index(reader._index).qb) == 0
        exact = reader.search(X[:50], 1).ids[:, 0]
        assert (exact == np.arange(1, 51)).mean() >= 0.95  # float queries find themselves
        reader.search(X[:5], 3, qb=1)
        assert int(_rabitq_index(reader._index).qb) == 0  # the store's own qb is back
        with pytest.raises(ConfigError, match="from 0 to 8, got 12"):
            reader.search(X[:1], 3, qb=12)
    finally:
        reader.close()


def test_size_model_of_rabitq_is_its_code_with_factors_plus_the_id():
    from slimvec.connectors.faiss_store import rabitq_code_bytes
    from slimvec.planner.sizing import calibrate

    model = calibrate("faiss:RaBitQ", sizes=(1000, 2000), dims=(32, 128))[0]
    for dim in (96, 384):  # fitted at 32 and 128 dimensions, predicted at 96 and 384
        per_vector = model.ram_bytes(1_000_000, dim) / 1_000_000
        assert per_vector == pytest.approx(rabitq_code_bytes(dim) + 8, abs=1.0)  # + the int64 id


def test_hnsw_over_rabitq_serves_a_cosine_store_by_l2_with_cosine_scores(tmp_path):
    # FAISS builds IndexHNSWRaBitQ for METRIC_L2 only; on unit vectors L2 ranks as cosine does,
    # and the store reports 1 - d / 2 (RaBitQ's estimate of the cosine)
    X = _vectors(n=800, dim=64)
    store = make_store("faiss:HNSW16,RaBitQ,efc=100", tmp_path / "s")
    store.create(X.shape[1], "cosine")
    store.upsert(np.arange(len(X)), X)
    store.finalize()
    res = store.search(X[:40], 5)
    assert (res.ids[:, 0] == np.arange(40)).mean() >= 0.9  # each vector finds itself
    true_cos = np.einsum("ij,ij->i", X[res.ids[:, 0]], X[:40])
    assert np.abs(res.scores[:, 0] - true_cos).max() < 0.25  # an estimate of the cosine
    assert (res.scores[:, 0] > 0.5).all()  # not a distance (near 0 for the vector itself)
    store.close()
    reader = make_store("faiss:HNSW16,RaBitQ", tmp_path / "s").open()
    try:  # the L2 build is read back from the index file: scores are cosines after reopening
        assert np.allclose(reader.search(X[:40], 5).scores, res.scores, atol=1e-6)
    finally:
        reader.close()


def test_hnsw_over_rabitq_refuses_the_inner_product_before_creating_anything(tmp_path):
    store = make_store("faiss:HNSW16,RaBitQ", tmp_path / "s")
    with pytest.raises(ConfigError, match=r"L2 metric only.*index by cosine or l2"):
        store.create(64, "ip")
    assert not (tmp_path / "s").exists()


def test_efc_sets_the_hnsw_build_beam_and_is_refused_without_a_graph(tmp_path):
    import faiss

    store = make_store("faiss:HNSW16,SQ8,efc=120", tmp_path / "s")
    store.create(64, "cosine")
    store.upsert(np.arange(300), _vectors(n=300))
    store.finalize()
    store.close()
    index = faiss.downcast_index(faiss.read_index(str(tmp_path / "s" / "index.faiss")))
    assert int(index.hnsw.efConstruction) == 120
    assert canonical_store_spec("faiss:HNSW16,SQ8,efc=120") == "faiss:HNSW16,SQ8,efc=120"
    with pytest.raises(ConfigError, match=r"efc=64 is an HNSW graph's build beam.*has no HNSW graph"):
        canonical_store_spec("faiss:IVF16,PQ8,efc=64")
    with pytest.raises(ConfigError, match=r"from 4 to 4096, got 2"):
        canonical_store_spec("faiss:HNSW16,efc=2")


def test_a_per_search_beam_holds_for_that_search_only(tmp_path):
    import faiss

    store = make_store("faiss:HNSW16", tmp_path / "s")
    store.create(64, "cosine")
    store.upsert(np.arange(300), _vectors(n=300))
    store.search(_vectors(n=2, seed=3), 5, ef=200)
    graph = faiss.downcast_index(store._index)
    assert int(graph.hnsw.efSearch) == 64  # the store's own ef, not the last search's
    store.search(_vectors(n=2, seed=3), 150)  # a deep candidate list raises the beam for this call
    assert int(graph.hnsw.efSearch) == 64
