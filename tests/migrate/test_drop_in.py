"""Issue 27 item 7: drop-in round trips of a migrated index (search it from the CLI with query
vectors from a file, ...). Random vectors, a few hundred rows, FAISS Flat: no model loaded."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from slimvec.migrate import MigrateOptions, migrate

DIM = 32


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dropin")
    x = np.random.default_rng(3).normal(size=(300, DIM)).astype(np.float32)
    np.save(tmp / "v.npy", x)
    migrate(str(tmp / "v.npy"), tmp / "idx", MigrateOptions(reducer="pca:16", store="faiss:Flat",
                                                            progress=False))
    return tmp, x


def _slimvec(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "slimvec", *args], capture_output=True, text=True,
                          timeout=120)


def test_cli_searches_a_migrated_index_with_query_vectors_from_npy_and_jsonl(migrated):
    tmp, x = migrated
    np.save(tmp / "q.npy", x[[5, 17]])
    (tmp / "q.jsonl").write_text(json.dumps(x[5].tolist()) + "\n"
                                 + json.dumps({"vector": x[17].tolist()}) + "\n")
    for qfile in ("q.npy", "q.jsonl"):
        proc = _slimvec("search", "--index", str(tmp / "idx"), "--vectors", str(tmp / qfile),
                        "-k", "3", "--json")
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert [o["hits"][0]["id"] for o in out] == [5, 17]
        assert out[0]["query"] == f"{tmp / qfile} row 0"


def test_cli_search_refuses_bad_query_vectors_in_one_line(migrated):
    tmp, x = migrated
    np.save(tmp / "wrong.npy", x[:2, :10])
    (tmp / "bad.jsonl").write_text(json.dumps(x[0].tolist()) + "\n" + '["a", "b"]\n')
    np.save(tmp / "c.npy", x[:2] + 1j)
    for qfile, expected in (("wrong.npy", "expected dimension 32, got 10"),
                            ("bad.jsonl", "bad.jsonl line 2"),
                            ("c.npy", "dtype complex")):
        proc = _slimvec("search", "--index", str(tmp / "idx"), "--vectors", str(tmp / qfile))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert expected in proc.stderr, proc.stderr
    proc = _slimvec("search", "--index", str(tmp / "idx"), "some text")
    assert proc.returncode == 2 and "--vectors" in proc.stderr, proc.stderr


def test_migrate_records_an_encoder_checked_against_the_vector_dimension(tmp_path, encoder,
                                                                          minilm_vectors, sentences):
    """--encoder SPEC at migrate: the index is then searched with texts; an encoder of another
    dimension than the source's vectors is refused before anything is written."""
    import slimvec
    from slimvec.errors import DimensionMismatchError

    np.save(tmp_path / "v.npy", minilm_vectors[:300])
    opts = MigrateOptions(reducer="pca:32", store="faiss:Flat", progress=False, encoder=encoder.spec)
    migrate(str(tmp_path / "v.npy"), tmp_path / "idx", opts)
    with slimvec.open(tmp_path / "idx") as idx:
        assert idx.manifest.encoder == encoder.spec
        res = idx.search([sentences[7], sentences[250]], 1)
        assert res.ids[:, 0].tolist() == [7, 250]
    resumed = migrate(str(tmp_path / "v.npy"), tmp_path / "idx",  # rerun without --encoder: done
                      MigrateOptions(progress=False))
    assert resumed.already_done
    np.save(tmp_path / "w.npy", minilm_vectors[:50, :100])
    with pytest.raises(DimensionMismatchError) as err:
        migrate(str(tmp_path / "w.npy"), tmp_path / "idx2", opts)
    assert "expected dimension 100, got 384" in str(err.value) and "--encoder" in str(err.value)
    assert not (tmp_path / "idx2").exists()


def test_migrating_a_qdrant_collection_into_qdrant_keeps_its_name(tmp_path):
    """qdrant:SRC/docs -> qdrant:DST made a collection named 'slimvec' (the store default)."""
    from qdrant_client import QdrantClient
    from qdrant_client import models as m

    import slimvec

    x = np.random.default_rng(4).normal(size=(120, DIM)).astype(np.float32)
    client = QdrantClient(path=str(tmp_path / "src"))
    client.create_collection("docs", vectors_config=m.VectorParams(size=DIM, distance=m.Distance.COSINE))
    client.upsert("docs", [m.PointStruct(id=i, vector=x[i].tolist(), payload={"n": i}) for i in range(120)])
    client.close()
    migrate(f"qdrant:{tmp_path / 'src'}/docs", tmp_path / "idx",
            MigrateOptions(reducer="pca:8", store=f"qdrant:{tmp_path / 'dst'}", progress=False))
    with slimvec.open(tmp_path / "idx", trust_store=f"qdrant:{tmp_path / 'dst'},collection=docs") as idx:
        assert "collection=docs" in idx.manifest.store
        assert idx.search(x[9], 1).ids[0, 0] == 9
    dst = QdrantClient(path=str(tmp_path / "dst"))
    try:
        assert [c.name for c in dst.get_collections().collections] == ["docs"]
    finally:
        dst.close()


def test_export_faiss_writes_a_complete_index_with_the_vectors_and_ids(migrated, tmp_path):
    """--format faiss wrote the reducer alone (ntotal=0); it is now the reducer in front of the
    index's reduced vectors under their ids, searched with full-size queries."""
    import faiss

    import slimvec
    from slimvec.migrate.export import export_reducer

    tmp, x = migrated
    path = export_reducer(tmp / "idx", "faiss", tmp_path / "all.faiss")
    index = faiss.read_index(str(path))
    assert index.ntotal == 300
    _, ids = index.search(x[[3, 99, 250]], 1)
    with slimvec.open(tmp / "idx") as idx:
        assert ids[:, 0].tolist() == idx.search(x[[3, 99, 250]], 1).ids[:, 0].tolist() == [3, 99, 250]
    empty = faiss.read_index(str(export_reducer(tmp / "idx", "faiss-transform", tmp_path / "t.faiss")))
    assert empty.ntotal == 0 and empty.d == DIM
