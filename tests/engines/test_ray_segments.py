"""``--engine ray`` into a FAISS store: Ray tasks write and build segments on the workers and the
driver adopts them whole (slimvec.indexer.segments); against the single-process ingest, on a real
local Ray runtime."""

from __future__ import annotations

import json

import numpy as np

from slimvec.index.folder import open_index
from slimvec.indexer.pipeline import IngestOptions, ingest
from tests.engines.conftest import write_jsonl

OPTS = dict(reducer="pca:32", store="faiss:Flat", keep_full="float16", fit_sample=100,
            batch_size=32, progress=False)
QUERIES = ["a man is playing a guitar", "a woman is slicing an onion", "the cat sat on the mat",
           "stocks fell sharply today"]


def test_segments_built_on_workers_give_the_single_process_index(ray_runtime, docs_200, tmp_path):
    from slimvec.engines.ray_ingest import RayOptions, ray_ingest
    from slimvec.index.manifest import Manifest

    rows = docs_200 + ["{not json", {"id": "x1", "text": ""}]
    src = write_jsonl(tmp_path / "docs.jsonl", rows)
    single = ingest(src, tmp_path / "single", IngestOptions(**OPTS))
    dist = ray_ingest(str(src), tmp_path / "ray", IngestOptions(**OPTS),
                      RayOptions(workers=2, segment_docs=64))  # 2 blocks a segment: 4 segments
    assert dist.ingested == single.ingested == 200 and dist.count == 200
    assert dist.rejected == single.rejected == 2 and dist.rows_read == single.rows_read
    store = tmp_path / "ray" / "store"
    graphs = sorted(p.name for p in store.glob("*.faiss"))
    assert len(graphs) == 4 and graphs[-1] == "index.faiss"  # the first graph and three adopted
    assert not any((tmp_path / "ray" / "segments").iterdir())  # every segment adopted
    lines = [json.loads(x) for x in (tmp_path / "ray" / "rejects.jsonl").read_text().splitlines()]
    assert sorted(r["row"] for r in lines) == [200, 201]
    # the write ran on the worker side: its seconds are reported beside the encoders'
    assert sum(n["documents"] for n in dist.nodes.values()) == 200
    assert sum(n["write_seconds"] for n in dist.nodes.values()) > 0
    manifest = Manifest.read(tmp_path / "ray")
    assert sum(map(len, manifest.progress.committed.values())) == 7  # ceil(202 / 32)
    with open_index(tmp_path / "single") as s, open_index(tmp_path / "ray") as r:
        rs, rr = s.search(QUERIES, 10), r.search(QUERIES, 10)
        assert r.payloads([int(i) for i in rr.ids[:, 0]]) == s.payloads([int(i) for i in rs.ids[:, 0]])
    np.testing.assert_array_equal(rs.ids, rr.ids)
    np.testing.assert_allclose(rs.scores, rr.scores, atol=1e-5)
    again = ray_ingest(str(src), tmp_path / "ray", IngestOptions(**OPTS), RayOptions(workers=2))
    assert again.already_done and again.count == 200
