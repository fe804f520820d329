"""Issue 23 items 8 and 9: the dimension of a source is not taken from its first row, and vector
files that are not flat real numbers are refused in one line before anything is written.

Every bad file is built for real in ``tmp_path`` (pyarrow, ``numpy.save``); vectors are random
(no model needed), the corpora a few hundred rows.
"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import slimvec
from slimvec.errors import ConfigError, SlimvecError
from slimvec.migrate import MigrateOptions, migrate

DIM = 48
BAD_DIM = 10


def _opts(**kw) -> MigrateOptions:
    base = dict(reducer="pca:8", store="faiss:Flat", progress=False, batch_size=64)
    base.update(kw)
    return MigrateOptions(**base)


def _rejects(index) -> list[dict]:
    return [json.loads(x) for x in (index / "rejects.jsonl").read_text().splitlines()]


def _vectors(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


# --------------------------------------------------------------------------- item 8
def test_parquet_dimension_is_the_dominant_length_not_row_0s(tmp_path):
    """Row 0 and 28 other rows hold 10 values, 171 rows hold 48: the 171 are migrated, the 29
    rejected as wrong dimension, and the reducer takes 48-d vectors (before: the reverse)."""
    n = 200
    good = _vectors(n)
    bad_rows = sorted({0, *range(1, 200, 7)})[:29]
    assert len(bad_rows) == 29 and bad_rows[0] == 0
    vecs = [list(map(float, v)) for v in good]
    for r in bad_rows:
        vecs[r] = [float(r)] * BAD_DIM
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(n)], "vector": vecs}),
                   tmp_path / "v.parquet", row_group_size=50)
    summary = migrate(f"parquet:{tmp_path / 'v.parquet'}", tmp_path / "idx", _opts(fit_sample=n))
    assert (summary.ingested, summary.rejected) == (171, 29)
    rej = _rejects(tmp_path / "idx")
    assert sorted(r["row"] for r in rej if not r["kept"]) == bad_rows
    assert all(f"vector has {BAD_DIM}, index expects {DIM}" in r["reason"] for r in rej), rej
    with slimvec.open(tmp_path / "idx") as idx:
        assert idx.dim_in == DIM and idx.info()["count"] == 171
        good_rows = [i for i in range(n) if i not in bad_rows]
        res = idx.search(good[good_rows[:20]], 1)
        assert res.ids.shape == (20, 1)


def test_parquet_of_two_comparable_vector_lengths_is_refused_naming_rows_and_lengths(tmp_path):
    n = 120
    vecs = [list(map(float, v)) for v in _vectors(n)]
    for r in range(0, n, 2):  # half the rows are 10-d: no length dominates
        vecs[r] = [1.0] * BAD_DIM
    pq.write_table(pa.table({"id": list(range(n)), "vector": vecs}), tmp_path / "v.parquet")
    with pytest.raises(ConfigError) as err:
        migrate(f"parquet:{tmp_path / 'v.parquet'}", tmp_path / "idx", _opts())
    msg = str(err.value)
    assert "\n" not in msg and "v.parquet" in msg and "'vector'" in msg
    assert f"60 have {DIM} values (rows 1, 3, 5" in msg and f"60 have {BAD_DIM} values (rows 0, 2, 4" in msg
    assert "one migration per dimension" in msg
    assert not (tmp_path / "idx").exists()


# --------------------------------------------------------------------------- item 9
def _string_npy(path):
    np.save(path, np.array([["0.1", "0.2"], ["0.3", "x"]] * 20))


def _complex_npy(path):
    x = _vectors(60)
    np.save(path, x + 1j * x)


def _bool_npy(path):
    np.save(path, _vectors(60) > 0)


def _structured_npy(path):
    np.save(path, np.zeros((60, 4), dtype=[("a", "f4"), ("b", "i4")]))


def _datetime_npy(path):
    np.save(path, np.zeros((60, 4), dtype="datetime64[s]"))


BAD_NPY = {
    "string": (_string_npy, "<U3"),
    "complex": (_complex_npy, "complex64"),
    "bool": (_bool_npy, "bool"),
    "structured": (_structured_npy, "[('a', '<f4'), ('b', '<i4')]"),
    "datetime": (_datetime_npy, "datetime64[s]"),
}


@pytest.mark.parametrize("kind", list(BAD_NPY))
def test_npy_of_anything_but_real_numbers_is_refused_in_one_line(tmp_path, kind):
    make, dtype = BAD_NPY[kind]
    make(tmp_path / "v.npy")
    with pytest.raises(ConfigError) as err:
        migrate(str(tmp_path / "v.npy"), tmp_path / "idx", _opts())
    msg = str(err.value)
    assert "\n" not in msg and str(tmp_path / "v.npy") in msg
    assert f"dtype {dtype}" in msg and "expected float or integer numbers" in msg, msg
    assert not (tmp_path / "idx").exists()


def test_integer_and_float16_npy_still_migrate(tmp_path):
    x = np.random.default_rng(1).integers(-50, 50, size=(80, DIM)).astype(np.int16)
    np.save(tmp_path / "i.npy", x)
    np.save(tmp_path / "h.npy", x.astype(np.float16))
    for name in ("i.npy", "h.npy"):
        summary = migrate(str(tmp_path / name), tmp_path / name.replace(".npy", ""), _opts())
        assert summary.ingested == 80 and summary.rejected == 0


class _Trap:
    """Unpickling this creates a marker file: proof that pickle ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_object_npy_is_refused_without_unpickling(tmp_path):
    marker = tmp_path / "unpickled"
    arr = np.empty((3, 2), dtype=object)
    arr[:] = _Trap(str(marker))
    np.save(tmp_path / "v.npy", arr, allow_pickle=True)
    assert b"open" in (tmp_path / "v.npy").read_bytes()  # a real pickle calling open()
    with pytest.raises(ConfigError) as err:
        migrate(str(tmp_path / "v.npy"), tmp_path / "idx", _opts())
    msg = str(err.value)
    assert "\n" not in msg and "dtype object" in msg and "never unpickles" in msg, msg
    assert not marker.exists() and not (tmp_path / "idx").exists()


def _nested_parquet(path):
    pq.write_table(pa.table({"id": list(range(40)), "vector": [[[0.1, 0.2], [0.3]]] * 40}), path)


def _string_parquet(path):
    pq.write_table(pa.table({"id": list(range(40)), "vector": [str(i) for i in range(40)]}), path)


def _string_list_parquet(path):
    pq.write_table(pa.table({"id": list(range(40)), "vector": [["0.1", "0.2"]] * 40}), path)


def _bool_list_parquet(path):
    pq.write_table(pa.table({"id": list(range(40)), "vector": [[True, False]] * 40}), path)


BAD_PARQUET = {
    "nested lists": (_nested_parquet, "list<element: list<element: double>>"),
    "strings": (_string_parquet, "string"),
    "lists of strings": (_string_list_parquet, "list<element: string>"),
    "lists of bools": (_bool_list_parquet, "list<element: bool>"),
}


@pytest.mark.parametrize("kind", list(BAD_PARQUET))
def test_parquet_vector_column_of_anything_but_flat_numbers_is_refused(tmp_path, kind):
    make, found = BAD_PARQUET[kind]
    make(tmp_path / "v.parquet")
    with pytest.raises(ConfigError) as err:
        migrate(f"parquet:{tmp_path / 'v.parquet'}", tmp_path / "idx", _opts())
    msg = str(err.value)
    assert "\n" not in msg and "v.parquet" in msg and "column 'vector'" in msg
    assert found in msg and "expected a list of float or integer numbers" in msg, msg
    assert not (tmp_path / "idx").exists()


def test_cli_refuses_a_string_npy_with_exit_2_and_no_traceback(tmp_path):
    _string_npy(tmp_path / "v.npy")
    proc = subprocess.run([sys.executable, "-m", "slimvec", "migrate", "--from", str(tmp_path / "v.npy"),
                           "--index", str(tmp_path / "idx"), "--reducer", "pca:2", "--store",
                           "faiss:Flat"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert "v.npy" in line and "dtype <U3" in line
    assert not (tmp_path / "idx").exists()


def test_garbage_faiss_and_hnsw_files_are_refused_in_one_line(tmp_path):
    (tmp_path / "x.faiss").write_bytes(b"IxF2" + b"\x00" * 64)
    (tmp_path / "x.bin").write_bytes(b"\x07" * 64)
    for spec in (f"faiss:{tmp_path / 'x.faiss'}", f"hnsw:{tmp_path / 'x.bin'},dim=8"):
        with pytest.raises(SlimvecError) as err:
            migrate(spec, tmp_path / "idx", _opts())
        assert "\n" not in str(err.value) and "x." in str(err.value), err.value
        assert not (tmp_path / "idx").exists()


def test_qdrant_dimension_comes_from_the_collection_not_its_first_point(tmp_path):
    """A collection with two named vectors whose first point has only one of them: the chosen
    vector's size comes from the collection config, and points without it are rejects (before:
    'has named vectors (): choose one' although one was chosen)."""
    from qdrant_client import QdrantClient
    from qdrant_client import models as m

    rng = np.random.default_rng(0)
    text = _vectors(100)
    client = QdrantClient(path=str(tmp_path / "qd"))
    client.create_collection("docs", vectors_config={
        "text": m.VectorParams(size=DIM, distance=m.Distance.COSINE),
        "image": m.VectorParams(size=8, distance=m.Distance.COSINE)})
    missing = {0, 40, 41}
    client.upsert("docs", [m.PointStruct(
        id=i, payload={"n": i},
        vector={"image": rng.normal(size=8).tolist(),
                **({} if i in missing else {"text": text[i].tolist()})}) for i in range(100)])
    client.close()
    summary = migrate(f"qdrant:{tmp_path / 'qd'}/docs,vector=text", tmp_path / "idx",
                      _opts(batch_size=16))
    assert (summary.ingested, summary.rejected) == (97, 3)
    rej = _rejects(tmp_path / "idx")
    assert sorted(r["row"] for r in rej) == sorted(missing)
    assert all("no vector 'text'" in r["reason"] for r in rej), rej
    with slimvec.open(tmp_path / "idx") as idx:
        assert idx.dim_in == DIM
        assert idx.payloads([5])[0]["n"] == 5
    with pytest.raises(ConfigError) as err:  # no name among several: the names and sizes listed
        migrate(f"qdrant:{tmp_path / 'qd'}/docs", tmp_path / "idx2", _opts())
    assert "text (48)" in str(err.value) and "image (8)" in str(err.value), err.value
    assert not (tmp_path / "idx2").exists()


def test_bench_and_tune_vector_files_refuse_the_same_dtypes(tmp_path):
    """`slimvec bench/tune --vectors` and `--dataset FILE.hdf5` read untrusted files too: a
    complex .npy lost its imaginary part, HDF5 string / compound datasets ended in tracebacks."""
    h5py = pytest.importorskip("h5py")
    from slimvec.benchmarks.datasets import from_hdf5, load_vector_file

    _complex_npy(tmp_path / "c.npy")
    with pytest.raises(ConfigError, match=r"c\.npy: dtype complex64 found, expected float or integer"):
        load_vector_file(tmp_path / "c.npy")
    _string_list_parquet(tmp_path / "s.parquet")
    with pytest.raises(ConfigError, match=r"s\.parquet: column 'vector' is list<element: string>, "
                                          "expected a list of float or integer numbers"):
        load_vector_file(tmp_path / "s.parquet")
    good = _vectors(30, 8)
    for name, train in {"str": np.array([[b"0.1"] * 8] * 30),
                        "compound": np.zeros((30, 8), dtype=[("a", "f4"), ("b", "i4")])}.items():
        with h5py.File(tmp_path / f"{name}.hdf5", "w") as fh:
            fh["train"], fh["test"] = train, good[:5]
            fh["neighbors"] = np.zeros((5, 10), dtype=np.int64)
        with pytest.raises(ConfigError) as err:
            from_hdf5(tmp_path / f"{name}.hdf5")
        msg = str(err.value)
        assert "\n" not in msg and f"{name}.hdf5: dataset 'train' dtype" in msg, msg
        assert "expected float or integer numbers" in msg
