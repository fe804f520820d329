"""Benchmark inputs: pair files, vectors, ann-benchmarks HDF5, VectorDBBench Parquet, the cache."""

from __future__ import annotations

import numpy as np
import pytest

from slimvec.benchmarks.datasets import from_hdf5, from_pairs, from_vectordbbench, from_vectors, load_dataset_path
from slimvec.benchmarks.encoding_cache import EncodingCache
from slimvec.benchmarks.pairs import build_corpus, build_train_pairs, load_pairs
from slimvec.errors import ConfigError


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_pairs_corpus_duplicates_and_task_entries(tmp_path):
    f = _write(tmp_path / "p.tsv", "sentence1\tsentence2\tscore\nA\tB\t5.0\nA\tC\t1.0\nD\tE\t4.0\n")
    corpus = build_corpus([load_pairs(f)], dup_threshold=4.0)
    assert corpus.texts == ["A", "B", "C", "D", "E"]
    assert corpus.dup_pairs().tolist() == [[0, 1], [3, 4]]
    vecs = np.eye(5, dtype=np.float32)
    ds = from_pairs(corpus, vecs)
    # four task entries: A->B, D->E, B->A, E->D; queries are the four duplicate-pair sentences
    assert ds.query_rows.tolist() == [0, 1, 3, 4]
    pairs = {(int(ds.query_rows[q]), int(t)) for q, t in zip(ds.task_query, ds.task_target)}
    assert pairs == {(0, 1), (3, 4), (1, 0), (4, 3)}
    assert all(int(r) not in row for r, row in zip(ds.query_rows, ds.truth.tolist()))  # self excluded
    a, b, gold = ds.sts["p"]
    assert gold.tolist() == [5.0, 1.0, 4.0]


def test_malformed_pair_rows_name_file_and_line_or_are_counted(tmp_path):
    f = _write(tmp_path / "bad.tsv", "A\tB\t5\nA\tB\tfive\n\tB\t1\nX\tY\t2\n")
    with pytest.raises(ConfigError, match=r"bad.tsv:2: score 'five' is not a finite number"):
        load_pairs(f)
    pf = load_pairs(f, skip_bad_rows=True)
    assert pf.skipped == 2 and len(pf) == 2
    ds = from_pairs(build_corpus([pf]), np.eye(4, dtype=np.float32))
    assert any("2 malformed" in n for n in ds.notes)


def test_train_pairs_never_contain_evaluation_pairs(tmp_path):
    ev = _write(tmp_path / "dev.tsv", "A\tB\t5\n")
    tr = _write(tmp_path / "train.tsv", "B\tA\t5\nC\tD\t4.5\nE\tF\t1\n")
    train = build_train_pairs([load_pairs(tr)], 4.0, eval_corpus=build_corpus([load_pairs(ev)]))
    assert train.dropped_overlap == 1
    assert [(train.texts[a], train.texts[b]) for a, b in train.pairs] == [("C", "D")]


def test_vectors_npy_queries_sampled_and_excluded(tmp_path, minilm_vectors):
    np.save(tmp_path / "v.npy", minilm_vectors[:200])
    ds = from_vectors(tmp_path / "v.npy", max_queries=20)
    assert ds.corpus.shape == (200, 384) and len(ds.queries) == 20
    assert all(int(r) not in row for r, row in zip(ds.query_rows, ds.truth.tolist()))
    np.save(tmp_path / "q.npy", minilm_vectors[:5, :100])
    with pytest.raises(ConfigError, match="dimension 100, the corpus .* 384"):
        from_vectors(tmp_path / "v.npy", tmp_path / "q.npy")


def test_hdf5_dataset_uses_its_neighbors_and_names_missing_fields(tmp_path, minilm_vectors):
    import h5py

    path = tmp_path / "ds.hdf5"
    nb = np.arange(30, dtype=np.int64).reshape(3, 10)
    with h5py.File(path, "w") as fh:
        fh.attrs["distance"] = "angular"
        fh["train"] = minilm_vectors[:100]
        fh["test"] = minilm_vectors[100:103]
        fh["neighbors"] = nb
    ds = load_dataset_path(path)
    assert ds.truth.tolist() == nb.tolist() and ds.metric == "cosine" and ds.query_rows is None
    with h5py.File(tmp_path / "broken.hdf5", "w") as fh:
        fh["train"] = minilm_vectors[:10]
        fh["test"] = minilm_vectors[:2]
    with pytest.raises(ConfigError, match="no 'neighbors' field"):
        from_hdf5(tmp_path / "broken.hdf5")


def test_vectordbbench_folder(tmp_path, minilm_vectors):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "vdb"
    folder.mkdir()
    ids = np.arange(1000, 1050)
    pq.write_table(pa.table({"id": ids, "emb": list(minilm_vectors[:50])}), folder / "train.parquet")
    pq.write_table(pa.table({"id": [7, 8], "emb": list(minilm_vectors[50:52])}), folder / "test.parquet")
    with pytest.raises(ConfigError, match="no 'neighbors' parquet file"):
        from_vectordbbench(folder)
    pq.write_table(pa.table({"id": [7, 8], "neighbors_id": [list(ids[:10]), list(ids[10:20])]}),
                   folder / "neighbors.parquet")
    ds = from_vectordbbench(folder)
    assert ds.truth.tolist() == [list(range(10)), list(range(10, 20))]  # ids mapped to corpus rows


def test_encoding_cache_encodes_each_text_once(tmp_path, encoder):
    calls: list[int] = []

    class Counting:
        def encode(self, texts):
            calls.append(len(texts))
            return encoder.encode(texts)

    cache = EncodingCache(tmp_path, encoder.fingerprint)
    first = cache.encode(Counting(), ["a cat", "a dog"])
    again = EncodingCache(tmp_path, encoder.fingerprint).encode(Counting(), ["a dog", "a bird", "a cat"])
    assert calls == [2, 1]  # only "a bird" was new
    np.testing.assert_allclose(again[[2, 0]], first, rtol=1e-6)
