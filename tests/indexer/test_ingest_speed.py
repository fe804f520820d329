"""Issue 36 (bulk ingest at the encoder's speed) and issue 40 item 9 (no fit sample without a
reducer): the staged stream, the FAISS graph's batched insertions, the GPU comparison script."""

import json
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import slimvec
from slimvec.indexer.pipeline import IngestOptions, ingest

ROOT = Path(__file__).resolve().parents[2]


class RecordingEncoder:
    """The real encoder, with the sizes of its calls written down."""

    def __init__(self, real):
        self.real, self.calls = real, []
        self.dim, self.name, self.batch_size = real.dim, real.name, real.batch_size
        self.max_seq_length, self.model = real.max_seq_length, real.model

    def encode(self, texts, show_progress=False):
        texts = list(texts)
        self.calls.append(len(texts))
        return self.real.encode(texts)


@pytest.fixture()
def small_corpus(tmp_path, sentences):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": s}) + "\n"
                            for i, s in enumerate(sentences[:300])), encoding="utf-8")
    return path


def test_recipe_without_reducer_encodes_no_fit_sample(small_corpus, sentences, encoder, tmp_path,
                                                       capfd):
    """Issue 40 item 9: a recipe without a reducer neither encodes a fit sample on its own nor
    says it fits 'none'; each document is encoded once and every one is found."""
    rec = RecordingEncoder(encoder)
    summary = ingest(small_corpus, tmp_path / "idx",
                     IngestOptions(recipe="none|faiss:HNSW16", encoder_instance=rec, progress=True))
    err = capfd.readouterr().err
    assert summary.ingested == 300
    assert rec.calls[0] == 1 and sum(rec.calls) == 300, rec.calls  # was: a 256-text sample first
    assert "fitting none" not in err and "fit sample" not in err, err
    with slimvec.open(tmp_path / "idx") as idx:
        res = idx.search([sentences[7], sentences[250]], k=1)
        assert [p["text"] for p in idx.payloads(res.ids[:, 0])] == [sentences[7], sentences[250]]


def test_stage_keeps_order_raises_in_the_consumer_and_stops_when_left():
    from slimvec.indexer.ingest_stream import _Stage

    def items(fail_at=None):
        for i in range(50):
            if i == fail_at:
                raise ValueError("row 7 is bad")
            yield i

    with _Stage(items(), "t-ok") as stage:
        assert list(stage) == list(range(50))
    with pytest.raises(ValueError, match="row 7"), _Stage(items(7), "t-fail") as stage:
        assert list(stage)[:7] == list(range(7))
    endless = _Stage(iter(lambda: 1, None), "t-endless")  # never ends on its own
    with endless as stage:
        next(iter(stage))
    assert not endless._thread.is_alive()
    assert not any(t.name == "t-endless" for t in threading.enumerate())
    # a stop asked while the consumer waits (Ctrl-C, issue 52): the items end at the next poll,
    # not when the slow producer delivers
    asked, left = threading.Event(), threading.Event()

    def slow():  # as the encoder: a long window, with a look at the stop between its passes
        yield 0
        asked.set()
        left.wait(30)
        yield 1

    t0 = time.monotonic()
    with _Stage(slow(), "t-slow", left, poll=asked.is_set) as stage:
        assert list(stage) == [0]
    assert time.monotonic() - t0 < 10


def test_faiss_graph_inserts_in_large_batches_and_finds_every_acknowledged_vector(tmp_path):
    """An HNSW store keeps small upserts in its appendable segment for one large insertion; any
    read, delete or flush sees all of them, and a reopened store has every flushed one."""
    from slimvec.connectors.faiss_segments import ROUND_MIN
    from slimvec.connectors.faiss_store import FaissStore

    rng = np.random.default_rng(0)
    X = rng.standard_normal((1200, 32)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    store = FaissStore(str(tmp_path / "s"), factory="HNSW16").create(32)
    assert store.bulk_add  # on by default
    for i in range(0, 1000, 100):
        store.upsert(np.arange(i, i + 100), X[i:i + 100], [{"n": j} for j in range(i, i + 100)])
    assert 1000 < ROUND_MIN and store._index.ntotal == 0  # appended, not inserted 100 by 100
    assert store.count() == 1000
    res = store.search(X[:1000], 1)
    assert (res.ids[:, 0] == np.arange(1000)).mean() > 0.99
    store.upsert(np.array([5, 1100]), X[[1100, 1100]])  # a changed vector and a new id
    assert store.search(X[1100][None, :], 2).ids[0].tolist() in ([5, 1100], [1100, 5])
    assert store.delete([7]) == 1 and 7 not in store.ids()
    store.flush()
    store.close()
    again = FaissStore(str(tmp_path / "s"), factory="HNSW16").open()
    assert again.count() == 1000 and 1100 in again.ids() and 7 not in again.ids()
    again.close()


def test_graph_thread_inserts_with_the_writers_openmp_threads(tmp_path):
    """The background insertion round runs with the writer's OpenMP thread count: a new
    thread starts at every core, so ``ingest-ceiling --threads 1`` ran the graph on two threads."""
    import faiss

    from slimvec.connectors.faiss_segments import ROUND_MIN
    from slimvec.connectors.faiss_store import FaissStore

    before = faiss.omp_get_max_threads()
    wanted = before + 1  # differs from what a fresh thread starts with, on any machine
    X = np.random.default_rng(3).standard_normal((ROUND_MIN, 16)).astype(np.float32)
    store = FaissStore(str(tmp_path / "s"), factory="HNSW16").create(16)
    try:
        faiss.omp_set_num_threads(wanted)
        store.upsert(np.arange(len(X)), X)
        assert store._builder.busy  # inserted in the background
        store.drain()
        assert store._index.ntotal == len(X)
        assert store._builder._pool.submit(faiss.omp_get_max_threads).result() == wanted
        assert store.count() == len(X) and store.search(X[:1], 1).ids[0, 0] == 0
    finally:
        faiss.omp_set_num_threads(before)
        store.close()


def test_faiss_queue_trained_at_first_search_answers_it(tmp_path):
    """A quantized graph trained by its first search (fewer vectors than ``train_size``) inserts
    what it trained on before searching: a served collection fitted after 100 points answered
    nothing while the graph queue held them."""
    from slimvec.connectors.faiss_store import FaissStore

    X = np.random.default_rng(11).standard_normal((300, 32)).astype(np.float32)
    store = FaissStore(str(tmp_path / "s"), factory="HNSW16,SQ8").create(32)
    store.upsert(np.arange(300), X)
    assert not store._index.is_trained
    assert store.search(X[5:6], 3).ids[0, 0] == 5
    store.close()


def test_gpu_ingest_check_runs_on_cpu(tmp_path, sentences):
    """The GPU comparison script runs here on a few hundred texts and prints both rates and the
    ratio; the rate it records is what ``slimvec plan`` quotes for a GPU (issue 36 item 4)."""
    import subprocess

    from slimvec.engines.plan import measured_gpu_rate

    corpus = tmp_path / "texts.txt"
    corpus.write_text("\n".join(sentences[:300]) + "\n", encoding="utf-8")
    record = tmp_path / "gpu-rate.json"
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_ingest_check.py"),
                          "--corpus", str(corpus), "--limit", "200", "--device", "cpu",
                          "--batches", "32,64", "--json", str(tmp_path / "r.json"),
                          "--record", str(record)],
                         capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["texts"] == 200 and result["ingest"]["ingested"] == 200
    assert set(result["encoder_only_docs_per_s"]) == {"batch 32", "batch 64"}
    assert result["ratio"] == pytest.approx(result["ingest"]["docs_per_s"]
                                            / max(result["encoder_only_docs_per_s"].values()))
    assert "ratio:" in out.stdout and "encoder only, best" in out.stdout
    rate, source = measured_gpu_rate(record)
    assert rate == max(result["encoder_only_docs_per_s"].values()) and "this machine" in source


def test_bulk_load_builds_the_graph_over_float16_and_writes_the_recipes_codes(tmp_path):
    """Issue 36: with ``fp16_build`` (what ``slimvec ingest`` sets) an ``HNSW16,SQ4`` store
    inserts into a graph over float16 codes; every index file written (a mid-load commit, the
    end) holds 4-bit codes of every vector, the graph found the same neighbours, and after
    ``finalize`` the store searches its 4-bit codes (what calibration must see)."""
    import faiss

    from slimvec.connectors.faiss_store import FaissStore

    X = np.random.default_rng(3).standard_normal((5000, 32)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)

    def qtype(index):
        return faiss.downcast_index(faiss.downcast_index(index).storage).sq.qtype

    stores = {}
    for fp16 in (False, True):
        store = FaissStore(str(tmp_path / f"s{fp16}"), factory="HNSW16,SQ4", train_size=1000)
        store.create(32)
        store.fp16_build = fp16
        store.upsert(np.arange(4000), X[:4000])
        store.drain()  # what a background round does, at once (past half the file: written whole)
        store.flush()  # a commit in the middle of the load
        assert qtype(store._index) == (faiss.ScalarQuantizer.QT_fp16 if fp16 else
                                       faiss.ScalarQuantizer.QT_4bit)
        on_disk = faiss.read_index(str(tmp_path / f"s{fp16}" / "index.faiss"))
        assert qtype(on_disk) == faiss.ScalarQuantizer.QT_4bit and on_disk.ntotal == 4000
        store.upsert(np.arange(4000, 5000), X[4000:])
        store.finalize()
        assert qtype(store._index) == faiss.ScalarQuantizer.QT_4bit and not store.fp16_build
        stores[fp16] = store.search(X, 1).ids[:, 0]
        store.close()
        again = FaissStore(str(tmp_path / f"s{fp16}"), factory="HNSW16,SQ4").open()
        assert qtype(again._index) == faiss.ScalarQuantizer.QT_4bit and again.count() == 5000
        assert (again.search(X, 1).ids[:, 0] == stores[fp16]).all()
        again.close()
    found = {k: (v == np.arange(5000)).mean() for k, v in stores.items()}
    assert found[True] >= found[False] - 0.01 and found[True] > 0.9, found
