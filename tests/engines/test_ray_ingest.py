"""``--engine ray`` against the single-process ingest, on a real local Ray runtime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from slimvec.indexer.index import open_index
from slimvec.indexer.pipeline import IngestOptions, ingest
from tests.engines.conftest import write_jsonl

OPTS = dict(reducer="pca:32", store="qdrant-edge", fit_sample=200, batch_size=64, progress=False)
QUERIES = ["a man is playing a guitar", "a woman is slicing an onion", "the cat sat on the mat",
           "stocks fell sharply today"]


def _all_ids(folder: Path, n_docs: list[dict]) -> set[int]:
    from slimvec.ids import doc_id

    with open_index(folder) as idx:
        found = idx.payloads([doc_id(d["id"]) for d in n_docs])
    return {doc_id(d["id"]) for d, p in zip(n_docs, found) if p is not None}


def test_two_workers_match_single_process(ray_runtime, docs_600, tmp_path):
    from slimvec.engines.ray_ingest import RayOptions, ray_ingest

    src = write_jsonl(tmp_path / "docs.jsonl", docs_600)
    single = ingest(src, tmp_path / "single", IngestOptions(**OPTS))
    dist = ray_ingest(str(src), tmp_path / "ray", IngestOptions(**OPTS), RayOptions(workers=2))
    assert dist.ingested == single.ingested == 600
    assert dist.count == single.count == 600
    # same reducer artifact: fitted once on the same sample, encoded the same way
    a = (tmp_path / "single" / "reducer" / "state.safetensors").read_bytes()
    b = (tmp_path / "ray" / "reducer" / "state.safetensors").read_bytes()
    assert a == b
    assert _all_ids(tmp_path / "single", docs_600) == _all_ids(tmp_path / "ray", docs_600)
    with open_index(tmp_path / "single") as s, open_index(tmp_path / "ray") as r:
        rs, rr = s.search(QUERIES, 10), r.search(QUERIES, 10)
    np.testing.assert_array_equal(rs.ids, rr.ids)
    np.testing.assert_allclose(rs.scores, rr.scores, atol=1e-5)
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    assert manifest["progress"]["state"] == "done"
    assert manifest["progress"]["engine"] == "ray"
    assert sum(map(len, manifest["progress"]["committed"].values())) == 10  # ceil(600 / 64)


def test_bad_rows_of_several_files_land_in_one_rejects_file(ray_runtime, docs_600, tmp_path):
    from slimvec.engines.ray_ingest import RayOptions, ray_ingest

    folder = tmp_path / "in"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", docs_600[:150] + ["{not json", {"id": "x1", "text": ""}])
    write_jsonl(folder / "b.jsonl", docs_600[150:300] + [{"id": "x2"}, "[1, 2]"])
    (folder / "c.csv").write_text("id,text\n" + "".join(f"c{i},{d['text'].replace(',', ' ')}\n"
                                                       for i, d in enumerate(docs_600[300:400]))
                                  + "c-bad,one,too many\n", encoding="utf-8")
    summary = ray_ingest(str(folder), tmp_path / "idx", IngestOptions(**OPTS), RayOptions(workers=2))
    lines = [json.loads(x) for x in (tmp_path / "idx" / "rejects.jsonl").read_text().splitlines()]
    assert summary.ingested == 400 and summary.count == 400
    assert summary.rejected == len(lines) == 5
    assert len({(r["source"], r["row"]) for r in lines}) == 5  # each bad row once
    by_file = {Path(r["source"]).name for r in lines}
    assert by_file == {"a.jsonl", "b.jsonl", "c.csv"}
    reasons = sorted(r["reason"] for r in lines)
    assert any(x.startswith("malformed JSON") for x in reasons)
    assert any(x.startswith("ragged row") for x in reasons)
    assert "missing text" in reasons and "empty or whitespace-only text" in reasons
