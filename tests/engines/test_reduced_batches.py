"""The builder's side of the Ray engine (no Ray needed): batches the producer already reduced,
and the typed progress record of committed blocks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from slimvec.errors import ConfigError, PersistenceError
from slimvec.index.folder import open_index
from slimvec.index.manifest import Manifest, Progress
from slimvec.indexer.builder import IndexBuilder, IndexSpec
from slimvec.indexer.writer import VectorBatch

SPEC = IndexSpec(reducer="pca:8", store="hnsw", encoder=None)


def test_reduced_batches_are_upserted_as_sent_and_bad_rows_still_rejected(tmp_path,
                                                                          minilm_vectors):
    vecs = minilm_vectors[:60]
    folder = tmp_path / "idx"
    with IndexBuilder(folder) as b:
        b.open(SPEC, 384, fit=lambda: vecs)
        reduced = b.reducer.transform(vecs[:40]).astype(np.float32)
        reduced[5] = np.nan  # a bad reduced row becomes a reject, as a bad full row does
        ids = np.arange(40)
        ids[7] = 6  # a duplicate id inside the batch: upserted once (the last row wins)
        assert b.write(VectorBatch(ids, reduced, [{"i": i} for i in range(40)], [], 40,
                                   rows=list(range(40)), source="t", reduced=True)) == 40
        # full vectors sent as reduced: checked against dim_out (8), every row rejected
        b.write(VectorBatch(np.arange(40, 43), vecs[40:43], [{}] * 3, [], 43,
                            rows=[40, 41, 42], source="t", reduced=True))
        b.finish()
        assert (b.summary.ingested, b.summary.rejected) == (38, 4)
    reasons = [json.loads(x)["reason"] for x in (folder / "rejects.jsonl").read_text().splitlines()]
    assert len(reasons) == 4 and sum("dimension" in r or "384" in r for r in reasons) == 3
    with open_index(folder) as idx:
        assert idx.info()["count"] == 38
        hits = idx.search(vecs[[0, 20]], 1)  # queried through the same reducer: itself on top
    assert hits.ids[:, 0].tolist() == [0, 20]
    assert hits.scores[:, 0].min() > 0.999


def _keep_full_index(folder, vecs, reduced: bool, full_missing: bool = False):
    """hnsw + float32 side file: batches of full vectors, or (``reduced``) of reduced vectors
    with their full vectors beside them, as the Ray engine's actors send them."""
    with IndexBuilder(folder) as b:
        b.open(IndexSpec(reducer="pca:8", store="hnsw", encoder=None, keep_full="float32"), 384,
               fit=lambda: np.nan_to_num(vecs))
        red = b.reducer.transform(np.nan_to_num(vecs)) if reduced else None  # finite: the full row is bad

        def batches():
            for lo in range(0, len(vecs), 32):
                hi = min(lo + 32, len(vecs))
                if reduced:
                    yield VectorBatch(np.arange(lo, hi), red[lo:hi], [{}] * (hi - lo), [], hi,
                                      reduced=True, full=None if full_missing else vecs[lo:hi])
                else:
                    yield VectorBatch(np.arange(lo, hi), vecs[lo:hi], [{}] * (hi - lo), [], hi)

        return b.run(batches())


def test_reduced_batches_with_full_vectors_build_the_same_keep_full_index(tmp_path, minilm_vectors):
    """What the Ray engine writes under --keep-full equals what one process writes; a full vector
    that is bad rejects its row in both."""
    vecs = minilm_vectors[:100].copy()
    vecs[[7, 64]] = np.nan
    one = _keep_full_index(tmp_path / "one", vecs, reduced=False)
    two = _keep_full_index(tmp_path / "two", vecs, reduced=True)
    assert (one.ingested, one.rejected) == (two.ingested, two.rejected) == (98, 2)
    side = [(tmp_path / name / "full").glob("*.f32") for name in ("one", "two")]
    assert [p.read_bytes() for p in sorted(side[0])] == [p.read_bytes() for p in sorted(side[1])]
    with open_index(tmp_path / "one") as a, open_index(tmp_path / "two") as c:
        ra, rc = a.search(minilm_vectors[:5], 10, rescore=4), c.search(minilm_vectors[:5], 10, rescore=4)
    np.testing.assert_array_equal(ra.ids, rc.ids)
    np.testing.assert_allclose(ra.scores, rc.scores, atol=1e-6)
    with pytest.raises(ConfigError, match="send their full vectors too"):
        _keep_full_index(tmp_path / "three", vecs, reduced=True, full_missing=True)


def test_committed_blocks_round_trip_and_are_validated(tmp_path, minilm_vectors):
    folder = tmp_path / "idx"
    with IndexBuilder(folder) as b:
        b.open(SPEC, 384, fit=lambda: minilm_vectors[:40])
        b.begin(progress=Progress(input="a, b", engine="ray", committed={"0": [0, 2], "1": [1]},
                                  inputs=[{"path": "/a", "fingerprint": {"size": 1}}]))
        b.commit()
    p = Manifest.read(folder).progress
    assert (p.engine, p.committed, p.inputs[0]["path"]) == ("ray", {"0": [0, 2], "1": [1]}, "/a")
    raw = json.loads((folder / "manifest.json").read_text())
    for bad, key in (({"0": ["x"]}, "progress.committed"), ({"a": [1]}, "progress.committed"),
                     ([1, 2], "progress.committed")):
        raw["progress"]["committed"] = bad
        (folder / "manifest.json").write_text(json.dumps(raw))
        with pytest.raises(PersistenceError, match=key.replace(".", r"\.")):
            Manifest.read(folder)
    # an unfinished ray run is not silently taken over by a single-process ingest
    raw["progress"]["committed"] = {"0": [0]}
    (folder / "manifest.json").write_text(json.dumps(raw))
    with IndexBuilder(folder) as b, pytest.raises(ConfigError, match="unfinished --engine ray"):
        b.plan(tmp_path / "x.jsonl", {"size": 1}, {})
