"""Issue 12 A1-A3, B7-B8, C13, D17 (manifest): nothing outside the index is touched or trusted.

Real files, real stores (hnsw, Qdrant Edge), real MiniLM vectors; migrate from ``.npy`` keeps
these fast (no encoder).
"""
import json
import shutil
import socket
import threading

import numpy as np
import pytest

from slimvec.errors import ConfigError, PersistenceError
from slimvec.index.folder import open_index
from slimvec.indexer.pipeline import IngestOptions, ingest
from slimvec.migrate.run import MigrateOptions, migrate


def _mopts(**kw):
    base = dict(reducer="pca:8", store="hnsw", fit_sample=100, batch_size=64, progress=False)
    base.update(kw)
    return MigrateOptions(**base)


@pytest.fixture(scope="module")
def vectors_file(tmp_path_factory, minilm_vectors):
    path = tmp_path_factory.mktemp("vec") / "v.npy"
    np.save(path, minilm_vectors[:150])
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory, vectors_file):
    index = tmp_path_factory.mktemp("built") / "idx"
    migrate(str(vectors_file), index, _mopts())
    return index


@pytest.fixture
def index(built, tmp_path):
    dst = tmp_path / "idx"
    shutil.copytree(built, dst, symlinks=True)
    return dst


def _tamper(index, **changes):
    """Rewrite the manifest as an attacker would: an old (version 1) manifest has no self-check."""
    raw = json.loads((index / "manifest.json").read_text())
    raw.pop("manifest_sha256", None)
    raw["format_version"] = 1
    for key, value in changes.items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    (index / "manifest.json").write_text(json.dumps(raw))
    return raw


# ------------------------------------------------------------------------------------------ A1
def test_a_folder_holding_only_dot_entries_is_refused_not_cleaned(tmp_path, vectors_file):
    folder = tmp_path / "repo"
    (folder / ".git").mkdir(parents=True)
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / ".env").write_text("SECRET=1\n")
    with pytest.raises(ConfigError, match=r"not a slimvec index.*\.env.*nothing was deleted"):
        migrate(str(vectors_file), folder, _mopts())
    assert (folder / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert (folder / ".env").read_text() == "SECRET=1\n"
    assert sorted(p.name for p in folder.iterdir()) == [".env", ".git"]  # not even a .lock


def test_rebuild_keeps_user_folders_the_manifest_does_not_account_for(index, vectors_file):
    (index / "full").mkdir()  # this index keeps no full vectors: full/ is the user's
    (index / "full" / "mine.txt").write_text("keep me")
    with pytest.raises(ConfigError, match=r"does not account for.*full.*nothing was deleted"):
        migrate(str(vectors_file), index, _mopts(rebuild=True))
    assert (index / "full" / "mine.txt").read_text() == "keep me"
    assert (index / "manifest.json").is_file() and (index / "reducer").is_dir()
    with open_index(index) as idx:
        assert idx.info()["count"] == 150


def test_rebuild_still_replaces_slimvec_own_files(index, vectors_file):
    summary = migrate(str(vectors_file), index, _mopts(rebuild=True, reducer="pca:4"))
    assert summary.created and summary.ingested == 150
    with open_index(index) as idx:
        assert idx.dim_out == 4


# ------------------------------------------------------------------------------------------ A2
def test_a_lock_link_is_refused_and_its_target_untouched(index, tmp_path, vectors_file):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (index / ".lock").unlink(missing_ok=True)
    (index / ".lock").symlink_to(victim)
    with pytest.raises(PersistenceError, match=r"\.lock is a symbolic link"):
        migrate(str(vectors_file), index, _mopts())
    assert victim.read_text() == "precious\n"


def test_a_rejects_link_is_refused_and_its_target_untouched(index, tmp_path, vectors_file):
    victim = tmp_path / "victim.jsonl"
    victim.write_text("precious\n")
    (index / "rejects.jsonl").unlink(missing_ok=True)
    (index / "rejects.jsonl").symlink_to(victim)
    np.save(tmp_path / "w.npy", np.load(vectors_file)[:50] * 2)  # another input: a new run
    with pytest.raises(PersistenceError, match=r"rejects\.jsonl is a symbolic link"):
        migrate(str(tmp_path / "w.npy"), index, _mopts())
    assert victim.read_text() == "precious\n"


def test_a_manifest_link_is_refused(index, tmp_path):
    real = tmp_path / "elsewhere.json"
    shutil.move(index / "manifest.json", real)
    (index / "manifest.json").symlink_to(real)
    with pytest.raises(PersistenceError, match=r"manifest\.json is a symbolic link"):
        open_index(index)


def test_a_link_inside_the_store_is_refused(index, tmp_path):
    target = next(f for f in sorted((index / "store").iterdir()) if f.is_file())
    outside = tmp_path / "outside.bin"
    shutil.move(target, outside)
    target.symlink_to(outside)
    with pytest.raises(PersistenceError, match="symbolic link"):
        open_index(index)


# ------------------------------------------------------------------------------------------ A3
def test_rebuild_with_an_external_store_checks_before_deleting(tmp_path, vectors_file):
    ext = tmp_path / "edge"
    index = tmp_path / "idx"
    spec = f"qdrant-edge:{ext}"
    migrate(str(vectors_file), index, _mopts(store=spec))
    with pytest.raises(ConfigError, match=r"already holds data.*nothing was changed"):
        migrate(str(vectors_file), index, _mopts(store=spec, rebuild=True))
    assert (index / "manifest.json").is_file() and (index / "reducer" / "config.json").is_file()
    with open_index(index, trust_store=spec) as idx:
        assert idx.info()["count"] == 150


# ------------------------------------------------------------------------------------------ B7
def test_a_store_url_from_the_manifest_is_never_contacted(index, monkeypatch):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(1.5)
    port = server.getsockname()[1]
    got: list[bytes] = []

    def listen():
        try:
            conn, _ = server.accept()
            got.append(conn.recv(4096))
            conn.close()
        except OSError:
            pass

    thread = threading.Thread(target=listen)
    thread.start()
    monkeypatch.setenv("QDRANT_API_KEY", "sekrit-key")
    _tamper(index, store=f"qdrant:http://127.0.0.1:{port}")
    try:
        with pytest.raises(ConfigError, match=r"external store.*--trust-store"):
            open_index(index)
    finally:
        thread.join()
        server.close()
    assert got == []


# ------------------------------------------------------------------------------------------ B8
def test_store_checksums_are_checked_even_when_the_manifest_says_running(index):
    raw = json.loads((index / "manifest.json").read_text())
    assert raw["store_sha256"]
    raw["progress"]["state"] = "running"
    _tamper(index, progress=raw["progress"])
    target = index / next(iter(raw["store_sha256"]))
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    with pytest.raises(PersistenceError, match="SHA-256 differs"):
        open_index(index)


def test_checksum_keys_outside_the_folder_are_refused_without_their_hash(index, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("not slimvec's")
    import hashlib

    digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    raw = json.loads((index / "manifest.json").read_text())
    raw["sha256"]["../secret.txt"] = "0" * 64
    _tamper(index, sha256=raw["sha256"])
    with pytest.raises(PersistenceError, match="not a plain relative name") as err:
        open_index(index)
    assert digest[:8] not in str(err.value)


# ------------------------------------------------------------------------------------------ C13
def test_text_is_not_ingested_into_a_migrated_index(index, tmp_path, sentences):
    corpus = tmp_path / "docs.txt"
    corpus.write_text("\n".join(sentences[:10]) + "\n", encoding="utf-8")
    before = (index / "manifest.json").read_bytes()
    with pytest.raises(ConfigError, match=r"slimvec migrate.*two vector spaces"):
        ingest(corpus, index, IngestOptions(progress=False))
    assert (index / "manifest.json").read_bytes() == before


# ------------------------------------------------------------------------------------ D17 / typed
@pytest.mark.parametrize("change, match", [
    ({"dim_in": None}, r"key 'dim_in' is missing"),
    ({"dim_out": "8"}, r"key 'dim_out' should be int, got str"),
    ({"progress": {"next_row": "x"}}, r"'progress.next_row' should be int, got str"),
])
def test_missing_or_ill_typed_manifest_keys_are_named(index, change, match):
    _tamper(index, **change)
    with pytest.raises(PersistenceError, match=match + r".*--rebuild"):
        open_index(index)


def test_an_edited_manifest_is_reported_by_its_own_checksum(index, caplog):
    raw = json.loads((index / "manifest.json").read_text())
    assert raw["format_version"] == 2 and raw["manifest_sha256"]
    raw["count"] = 7
    (index / "manifest.json").write_text(json.dumps(raw))
    with caplog.at_level("WARNING"), open_index(index):
        pass
    assert "manifest_sha256" in caplog.text and "edited by hand" in caplog.text


def test_an_old_manifest_is_read_and_upgraded_by_the_next_writer(index, tmp_path, vectors_file):
    _tamper(index)  # today's main wrote version 1 without a self-checksum
    with open_index(index) as idx:
        assert idx.info()["count"] == 150
    np.save(tmp_path / "w.npy", np.load(vectors_file)[:20] * 3)
    migrate(str(tmp_path / "w.npy"), index, _mopts())
    from slimvec.index.manifest import Manifest

    assert Manifest.read(index).format_version == 2
    assert json.loads((index / "manifest.json").read_text())["format_version"] == 2


def test_builder_serves_a_long_lived_writer_without_a_progress_record(tmp_path, minilm_vectors):
    from slimvec.index.manifest import Manifest
    from slimvec.indexer.builder import IndexBuilder, IndexSpec
    from slimvec.indexer.writer import VectorBatch

    folder = tmp_path / "svc"
    vecs = minilm_vectors[:120]
    with IndexBuilder(folder) as b:
        b.open(IndexSpec(reducer="pca:8", store="hnsw", encoder=None), 384, fit=lambda: vecs)
        for lo in range(0, 120, 40):
            ids = np.arange(lo, lo + 40, dtype=np.int64)
            b.write(VectorBatch(ids, vecs[lo:lo + 40], [{"i": int(i)} for i in ids], [], lo + 40))
            b.commit()
            assert Manifest.read(folder).count == lo + 40
        b.finish()
    with open_index(folder) as idx:
        assert idx.info()["count"] == 120
        res = idx.search(vecs[:5], k=1)
        assert (res.ids[:, 0] == np.arange(5)).mean() >= 0.8
    with IndexBuilder(folder) as b:  # the lock was released; the specs are checked on reopen
        with pytest.raises(ConfigError, match=r"reducer 'pca:8' \(asked 'pca:4'\)"):
            b.open(IndexSpec(reducer="pca:4"), 384)
