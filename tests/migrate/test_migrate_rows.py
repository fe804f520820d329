"""Issue 12 A5, C12, D17 (migrate side): every source row is indexed or reported."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import slimvec
from slimvec.ids import doc_id
from slimvec.migrate import MigrateOptions, migrate

N = 300


def _opts(**kw) -> MigrateOptions:
    base = dict(reducer="pca:16", store="faiss:Flat", progress=False, batch_size=64)
    base.update(kw)
    return MigrateOptions(**base)


def _rejects(index):
    return [json.loads(x) for x in (index / "rejects.jsonl").read_text().splitlines()]


def test_parquet_null_ids_are_rejects_and_repeated_ids_are_reported(tmp_path, minilm_vectors):
    X = minilm_vectors[:N]
    ids = [f"d{i}" for i in range(N)]
    for i in (4, 100, 200):
        ids[i] = None
    ids[250] = "d10"  # reuses row 10's id
    vecs = [list(map(float, v)) for v in X]
    vecs[0] = None  # the first vector is null: dimension must come from the next one
    pq.write_table(pa.table({"id": ids, "vector": vecs, "score": [float("nan")] + [0.5] * (N - 1)}),
                   tmp_path / "v.parquet", row_group_size=70)
    summary = migrate(f"parquet:{tmp_path / 'v.parquet'}", tmp_path / "idx", _opts())
    assert summary.ingested + summary.rejected == N
    assert summary.rejected == 4 and summary.count == N - 4 - 1  # rows 0 (null vector), 4/100/200
    rej = _rejects(tmp_path / "idx")
    dropped = sorted(r["row"] for r in rej if not r["kept"])
    assert dropped == [0, 4, 100, 200]
    assert {r["reason"] for r in rej if r["row"] in (4, 100, 200)} == {"missing id"}
    (dup,) = [r for r in rej if r["kept"] and r["reason"].startswith("duplicate id")]
    assert dup["row"] == 250 and "of row 10" in dup["reason"]
    with slimvec.open(tmp_path / "idx") as idx:
        res = idx.search(X[250:251], 1)
        assert res.ids[0, 0] == doc_id("d10")


def test_one_huge_finite_vector_does_not_ruin_the_pca_fit(tmp_path, minilm_vectors):
    X = minilm_vectors[:N].copy()
    X[7] *= 1e10
    X[8] = (X[8].astype(np.float64) * (3e38 / float(np.abs(X[8]).max()))).astype(np.float32)
    np.save(tmp_path / "v.npy", X)
    summary = migrate(str(tmp_path / "v.npy"), tmp_path / "idx", _opts(fit_sample=N))
    rej = _rejects(tmp_path / "idx")
    assert sorted(r["row"] for r in rej) == [7, 8] and summary.rejected == 2
    assert all("norm" in r["reason"] for r in rej), rej
    with slimvec.open(tmp_path / "idx") as idx:
        res = idx.search(X[20:220], 1)
        assert (res.ids[:, 0] == np.arange(20, 220)).mean() > 0.9
