"""The README's lifecycle section on a default index, end to end (issue 40 items 1, 4, 6, 7 and
issue 39 F5): 400 documents of slimvec/data/sentences.jsonl ingested with the packaged MiniLM
through the CLI (in-process, typer's runner), 25 % deleted, compacted, rebuilt into another store
and searched; the user's ids from Python, the CLI and a real ``slimvec serve`` agree; the kept
full vectors exported with those ids."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import slimvec
from slimvec.cli import app
from slimvec.errors import MissingDependencyError
from slimvec.recipe import DEFAULT_RECIPE

N = 400
DATA = Path(slimvec.__file__).parent / "data" / "sentences.jsonl"


def _run(*args: object) -> str:
    """stdout of ``slimvec ARGS`` run in-process; the exit code must be 0."""
    res = CliRunner().invoke(app, [str(a) for a in args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    assert res.exit_code == 0, res.output
    return res.stdout


def _json(*args: object) -> Any:
    return json.loads(_run(*args))


def _write(path: Path, docs: list[dict]) -> Path:
    """A JSONL file of ``docs``."""
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    with open(DATA, encoding="utf-8") as fh:
        rows = [json.loads(next(fh)) for _ in range(N)]
    texts = [r["text"] for r in rows]
    return [r for r in rows if texts.count(r["text"]) == 1]  # a text finds its own document


@pytest.fixture(scope="module")
def built(docs, tmp_path_factory) -> Path:
    """``slimvec ingest docs.jsonl --index IDX``: the default recipe."""
    tmp = tmp_path_factory.mktemp("built")
    _run("ingest", _write(tmp / "docs.jsonl", docs), "--index", tmp / "idx")
    return tmp / "idx"


@pytest.fixture
def index(built, tmp_path) -> Path:
    shutil.copytree(built, tmp_path / "idx")
    return tmp_path / "idx"


def _info(folder: Path) -> dict:
    return _json("info", "--index", folder, "--json")


def test_readme_lifecycle_on_the_default_index(index, docs, tmp_path):
    """ingest, delete 25 %, compact (it exited 2 on the default recipe), rebuild into another
    store, search: bytes per vector after compact within 5 % of a fresh build of the kept
    documents, and no deleted document ever comes back."""
    before = _info(index)
    assert before["recipe"].startswith(DEFAULT_RECIPE.split("|rescore")[0]), before
    gone = [d["id"] for d in docs[::4]]
    kept = [d for d in docs if d["id"] not in set(gone)]
    assert json.loads(_run("delete", "--index", index, "--ids", _write_ids(tmp_path, gone))) == {
        "deleted": len(gone), "count": len(kept)}
    out = json.loads(_run("compact", "--index", index))
    assert out["store_rebuilt"] and out["store_dead_positions"] == len(gone), out
    after = _info(index)
    _run("ingest", _write(tmp_path / "kept.jsonl", kept), "--index", tmp_path / "fresh")
    fresh = _info(tmp_path / "fresh")
    assert after["count"] == fresh["count"] == len(kept)
    assert abs(after["store_bytes_per_vector"] - fresh["store_bytes_per_vector"]) <= \
        0.05 * fresh["store_bytes_per_vector"], (before, after, fresh)
    assert after["store_bytes_per_vector"] < before["store_bytes_per_vector"] * len(docs) / len(kept)

    _run("rebuild", "--index", index, "--recipe", "pca:64|hnsw|rescore=auto")
    rebuilt = _info(index)
    assert rebuilt["store"] == "hnsw" and rebuilt["count"] == len(kept)
    assert rebuilt["full_dtype"] == "float16"  # kept, not grown to float32
    queries = [kept[0]["text"], docs[0]["text"]]  # a kept document and a deleted one
    hits = _json("search", "--index", index, *queries, "-k", "5", "--json")
    assert hits[0]["hits"][0]["id"] == kept[0]["id"]
    found = {h["id"] for q in hits for h in q["hits"]}
    assert not found & set(gone), found & set(gone)


def _write_ids(tmp_path: Path, ids: list[str]) -> Path:
    path = tmp_path / "ids.json"
    path.write_text(json.dumps(ids), encoding="utf-8")
    return path


def test_search_result_carries_the_users_ids_as_the_cli_and_the_service_do(built, docs, tmp_path):
    """Issue 40 item 4: Index.search gave store ids only (6323500108826371382 for D00940)."""
    from slimvec.client import Client
    from tests.service.server import Server

    queries = [docs[3]["text"], docs[7]["text"]]
    with slimvec.open(built) as idx:
        res = idx.search(queries, k=5)
        ours = res.source_ids
        assert [row[0] for row in ours] == [docs[3]["id"], docs[7]["id"]]
        assert res.store_ids is res.ids
        assert [r["id"] for r in idx.get(ours[0])] == ours[0]
        assert [r["store_id"] for r in idx.get(ours[0])] == res.ids[0].tolist()
    cli = _json("search", "--index", built, *queries, "-k", "5", "--json")
    assert [[h["id"] for h in q["hits"]] for q in cli] == ours  # as idx.get names them
    assert [[h["store_id"] for h in q["hits"]] for q in cli] == res.ids.tolist()
    root = tmp_path / "root"
    root.mkdir()
    shutil.copytree(built, root / "docs")
    with Server(root, ready_timeout=400) as srv, Client(srv.url) as client:  # MiniLM loads
        remote = client.index("docs")
        got = remote.search(queries, k=5)
        assert got.ids.tolist() == res.ids.tolist() and got.source_ids == ours
        assert [[h["source_id"] for h in q] for q in remote.hits(queries, k=5)] == ours


def test_export_vectors_writes_the_kept_vectors_with_the_users_ids(index, docs, tmp_path,
                                                                   monkeypatch):
    """Issue 40 item 7: ``export --format npy|parquet --vectors``, deleted documents left out
    (three deletes: their tombstones are still in the kept vectors' file)."""
    import pyarrow.parquet as pq

    gone = [d["id"] for d in docs[:3]]
    _run("delete", "--index", index, "--ids", _write_ids(tmp_path, gone))
    _run("export", "--index", index, "--format", "npy", "--vectors", "--out", tmp_path / "npy")
    ids = json.loads((tmp_path / "npy" / "ids.json").read_text(encoding="utf-8"))
    vectors = np.load(tmp_path / "npy" / "vectors.npy")
    assert sorted(ids) == sorted(d["id"] for d in docs[3:]) and vectors.shape == (len(ids), 384)
    with slimvec.open(index) as idx:
        sids = [r["store_id"] for r in idx.get(ids)]
        assert np.array_equal(vectors, idx.full_vectors.get(sids)[0])
        q = idx.search(vectors[:5], k=1)
        assert [row[0] for row in q.source_ids] == ids[:5]
    _run("export", "--index", index, "--format", "parquet", "--vectors", "--out",
         tmp_path / "v.parquet")
    table = pq.read_table(tmp_path / "v.parquet")
    assert table.column("id").to_pylist() == ids
    assert np.array_equal(np.asarray(table.column("vector").to_pylist(), np.float32), vectors)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if pyarrow were not installed
    with pytest.raises(MissingDependencyError, match="pip install pyarrow"):
        _run("export", "--index", index, "--format", "parquet", "--vectors", "--out",
             tmp_path / "w.parquet")
    assert not (tmp_path / "w.parquet").exists()
