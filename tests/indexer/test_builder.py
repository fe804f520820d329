"""IndexBuilder: count reconciliation of every run (issue 12 'indexed + rejected = N')."""
import json

import numpy as np

from slimvec.indexer.builder import IndexBuilder, IndexSpec
from slimvec.indexer.pipeline import IngestOptions, ingest
from slimvec.indexer.writer import VectorBatch
from slimvec.migrate.run import MigrateOptions, migrate


def test_migrate_accounts_for_every_vector(tmp_path, minilm_vectors):
    vecs = minilm_vectors[:200].copy()
    vecs[[3, 50, 199]] = np.nan
    np.save(tmp_path / "v.npy", vecs)
    s = migrate(str(tmp_path / "v.npy"), tmp_path / "idx",
                MigrateOptions(reducer="pca:8", store="hnsw", batch_size=64, fit_sample=100,
                               progress=False))
    assert (s.rows_read, s.ingested, s.rejected, s.unaccounted) == (200, 197, 3, 0)


def test_ingest_accounts_for_every_row(tmp_path, sentences):
    lines = [json.dumps({"id": i, "text": t}) for i, t in enumerate(sentences[:60])]
    lines[10] = "{not json"
    lines[20] = json.dumps({"id": 20, "text": ""})
    (tmp_path / "d.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    s = ingest(tmp_path / "d.jsonl", tmp_path / "idx",
               IngestOptions(reducer="pca:8", store="hnsw", batch_size=16, fit_sample=50,
                             progress=False))
    assert s.rows_read == 60 and s.ingested + s.rejected == 60 and s.unaccounted == 0


def test_a_source_that_skips_rows_is_reported(tmp_path, minilm_vectors, caplog):
    vecs = minilm_vectors[:40]

    def batches():
        yield VectorBatch(np.arange(20), vecs[:20], [{}] * 20, [], 20)
        yield VectorBatch(np.arange(20, 30), vecs[20:30], [{}] * 10, [], 40)  # 10 rows vanished

    with IndexBuilder(tmp_path / "idx") as b:
        b.open(IndexSpec(reducer="pca:8", store="hnsw", encoder=None), 384, fit=lambda: vecs)
        s = b.run(batches())
    assert (s.rows_read, s.rows, s.unaccounted) == (40, 30, 10)
    assert "10 unaccounted" in caplog.text and "rows 20-40" in caplog.text
