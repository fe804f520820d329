"""Snapshot and restore (issue 25 item 6): round trips on every store, hostile archives refused
with nothing written, a snapshot taken at a commit."""
from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest

import slimvec
from slimvec.errors import ConfigError, IndexBusyError, PersistenceError
from slimvec.indexer.builder import IndexBuilder, IndexSpec
from slimvec.indexer.writer import VectorBatch
from slimvec.ops.snapshot import SNAPSHOT_FILE, restore, snapshot, verify_archive

STORES = ["qdrant-edge", "qdrant", "faiss", "hnsw"]
DIM = 32


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, DIM)).astype(np.float32)


def build(folder: Path, store: str, n: int = 120, keep_full: str | None = "float32",
          finish: bool = True) -> np.ndarray:
    """A small vector index of ``n`` documents with payloads, committed (finished when asked)."""
    vecs = _vectors(n)
    with IndexBuilder(folder) as b:
        b.open(IndexSpec(reducer="pca:8", store=store, encoder=None, keep_full=keep_full), DIM,
               fit=lambda: vecs)
        for lo in range(0, n, 40):
            ids = np.arange(lo, min(n, lo + 40))
            b.write(VectorBatch(ids, vecs[ids], [{"text": f"doc {i}", "lang": ["en", "fr"][i % 2]}
                                                 for i in ids], [], int(ids[-1]) + 1))
            b.commit()
        if finish:
            b.finish()
    return vecs


def _answers(folder: Path, queries: np.ndarray) -> tuple[int, list, list, list]:
    with slimvec.open(folder) as index:
        plain = index.search(queries, k=5, rescore=0)
        rescored = index.search(queries, k=5, rescore=4)
        payloads = index.payloads(list(range(0, 120, 7)))
        return (int(index.store.count()), plain.ids.tolist(), rescored.ids.tolist(), payloads)


@pytest.mark.parametrize("store", STORES)
def test_round_trip_keeps_results_count_and_payloads(tmp_path, store):
    src = tmp_path / "src"
    build(src, store)
    queries = _vectors(6, seed=9)
    before = _answers(src, queries)
    info = snapshot(src, tmp_path / "snap.tar.gz")
    assert info.count == 120 and info.files >= 4 and info.archive_bytes > 0
    assert info.sha256 == __import__("hashlib").sha256((tmp_path / "snap.tar.gz").read_bytes()).hexdigest()
    meta = verify_archive(tmp_path / "snap.tar.gz")
    assert meta["count"] == 120 and meta["manifest"]["store"].startswith(store)
    assert restore(tmp_path / "snap.tar.gz", tmp_path / "dst") == tmp_path / "dst"
    assert _answers(tmp_path / "dst", queries) == before
    assert before[0] == 120
    from slimvec.persistence import allocated_bytes

    # Qdrant Edge preallocates sparse 32 MiB files: the copy keeps their holes (written byte for
    # byte, the restored 120-document index allocated 133 MB instead of the source's 296 KB)
    assert allocated_bytes(tmp_path / "dst") <= 2 * allocated_bytes(src) + (1 << 20)
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert leftovers == []  # no staging folder, temp archive or restore folder left


@pytest.mark.parametrize("store", ["faiss", "hnsw"])
def test_a_snapshot_of_a_running_index_is_its_last_commit(tmp_path, store):
    """Rows written after the last commit (not durable yet) are not in the snapshot, and the
    full-vector side file carries only its committed rows."""
    src = tmp_path / "src"
    vecs = build(src, store, n=80, finish=False)
    with IndexBuilder(src) as b:
        b.open(IndexSpec(encoder=None), DIM)
        b.write(VectorBatch(np.arange(80, 100), _vectors(20, 3), [{"text": "late"}] * 20, [], 100))
        b.commit()
        b.write(VectorBatch(np.arange(100, 130), _vectors(30, 4), [{"text": "uncommitted"}] * 30,
                            [], 130))
        info = snapshot(src, tmp_path / "s.tar")
    assert info.count == 100
    restore(tmp_path / "s.tar", tmp_path / "dst")
    with slimvec.open(tmp_path / "dst") as index:
        assert index.store.count() == 100 and index.full_vectors.rows == 100
        assert index.payloads([99, 100]) == [{"text": "late"}, None]
    assert vecs.shape == (80, DIM)


def test_qdrant_edge_being_written_by_another_process_is_refused(tmp_path):
    src = tmp_path / "src"
    build(src, "qdrant-edge", n=40)
    import subprocess
    import sys

    code = ("import sys,time; from slimvec.index.locking import IndexLock; "
            "l=IndexLock(sys.argv[1], exclusive=True).acquire(); print('held', flush=True); "
            "time.sleep(30)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(src)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(IndexBusyError, match="between runs"):
            snapshot(src, tmp_path / "s.tar")
    finally:
        proc.kill()
        proc.wait(10)
    assert not (tmp_path / "s.tar").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["src"]


def test_existing_out_and_non_empty_target_are_refused(tmp_path):
    src = tmp_path / "src"
    build(src, "hnsw", n=40, keep_full=None)
    snapshot(src, tmp_path / "s.tar")
    with pytest.raises(ConfigError, match="exists"):
        snapshot(src, tmp_path / "s.tar")
    with pytest.raises(ConfigError, match="not empty.*--force"):
        restore(tmp_path / "s.tar", src)
    (tmp_path / "empty").mkdir()
    restore(tmp_path / "s.tar", tmp_path / "empty")
    with slimvec.open(tmp_path / "empty") as index:
        assert index.store.count() == 40


def test_force_replaces_an_index(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    build(a, "faiss", n=40)
    build(b, "faiss", n=80)
    snapshot(a, tmp_path / "a.tar.xz")
    restore(tmp_path / "a.tar.xz", b, force=True)
    with slimvec.open(b) as index:
        assert index.store.count() == 40
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "a.tar.xz", "b"]


# ---------------------------------------------------------------------- hostile archives
@pytest.fixture(scope="module")
def good_archive(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("snap")
    build(base / "src", "hnsw", n=40, keep_full=None)
    return snapshot(base / "src", base / "good.tar").path


def _members(archive: Path) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    out = []
    with tarfile.open(archive) as tar:
        for ti in tar.getmembers():
            out.append((ti, tar.extractfile(ti).read() if ti.isfile() else None))
    return out


def _rewrite(archive: Path, dest: Path, edit) -> Path:
    members = edit(_members(archive))
    with tarfile.open(dest, "w") as tar:
        for ti, data in members:
            tar.addfile(ti, io.BytesIO(data) if data is not None else None)
    return dest


def _listed(members, name: str, data: bytes = b"x"):
    """Add ``name`` to SNAPSHOT.json's list, as a forger would, so only its type is wrong."""
    import hashlib

    ti0, body = members[0]
    meta = json.loads(body)
    meta["members"].append({"name": name, "type": "file", "size": len(data),
                            "sha256": hashlib.sha256(data).hexdigest()})
    body = json.dumps(meta).encode()
    ti0.size = len(body)
    return [(ti0, body)] + members[1:]


def _link(name: str, target: str, kind: bytes) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname = kind, target
    return ti


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    return ti, data


def _tamper(members):
    out = []
    for ti, data in members:
        if ti.name.endswith("payloads.sqlite"):
            data = data[:-1] + bytes([data[-1] ^ 1])
        out.append((ti, data))
    return out


def _device(members):
    ti = tarfile.TarInfo("store/dev")
    ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
    return _listed(members, "store/dev") + [(ti, None)]


HOSTILE = {
    "symlink": (lambda m: _listed(m, "store/evil") + [(_link("store/evil", "/etc/passwd",
                                                             tarfile.SYMTYPE), None)],
                "store/evil.*symbolic link"),
    "hardlink": (lambda m: _listed(m, "store/hard") + [(_link("store/hard", "manifest.json",
                                                              tarfile.LNKTYPE), None)],
                 "store/hard.*hard link"),
    "dotdot": (lambda m: _listed(m, "x") + [_file("../x")], r"'\.\./x'.*plain relative"),
    "absolute": (lambda m: _listed(m, "x") + [_file("/tmp/abs-x")], "'/tmp/abs-x'.*plain relative"),
    "dotdot_inside": (lambda m: m + [_file("store/../../y")], "plain relative"),
    "device": (_device, "store/dev.*device"),
    "checksum": (_tamper, "payloads.sqlite.*SHA-256 differs"),
    "unlisted": (lambda m: m + [_file("store/extra")], "store/extra.*not listed"),
    "missing": (lambda m: [x for x in m if not x[0].name.endswith("config.json")],
                "config.json.*missing"),
    "not_first": (lambda m: m[1:] + m[:1], "first member"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_archives_are_refused_with_nothing_written(tmp_path, good_archive, case):
    edit, message = HOSTILE[case]
    bad = _rewrite(good_archive, tmp_path / "bad.tar", edit)
    target = tmp_path / "out" / "idx"
    target.parent.mkdir()
    with pytest.raises(PersistenceError, match=message):
        restore(bad, target, trust_unsigned=True)
    assert list(target.parent.iterdir()) == []  # nothing, not even a temporary folder
    assert not Path("/tmp/abs-x").exists()


@pytest.mark.parametrize("cut", [0.3, 0.7, "last"])
def test_a_truncated_archive_names_the_member_and_writes_nothing(tmp_path, good_archive, cut):
    data = good_archive.read_bytes()
    if cut == "last":  # inside the last file's data (a cut in the zero padding loses nothing)
        with tarfile.open(good_archive) as tar:
            last = [ti for ti in tar.getmembers() if ti.isfile()][-1]
        end = last.offset_data + last.size // 2
    else:
        end = int(len(data) * cut)
    bad = tmp_path / "cut.tar"
    bad.write_bytes(data[:end])
    (tmp_path / "out").mkdir()
    with pytest.raises(PersistenceError, match="truncated|missing") as err:
        restore(bad, tmp_path / "out" / "idx")
    assert "member" in str(err.value)
    assert list((tmp_path / "out").iterdir()) == []


def test_a_truncated_gzip_archive_is_refused(tmp_path):
    build(tmp_path / "src", "faiss", n=40)
    good = snapshot(tmp_path / "src", tmp_path / "s.tar.gz").path
    bad = tmp_path / "cut.tar.gz"
    bad.write_bytes(good.read_bytes()[:-200])
    with pytest.raises(PersistenceError, match="truncated or damaged"):
        restore(bad, tmp_path / "idx")
    assert not (tmp_path / "idx").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.tar.gz", "s.tar.gz", "src"]


def test_snapshot_json_lists_every_member_with_size_and_sha(good_archive):
    members = _members(good_archive)
    assert members[0][0].name == SNAPSHOT_FILE
    meta = json.loads(members[0][1])
    assert meta["format"] == "slimvec-snapshot" and meta["format_version"] == 1
    assert meta["slimvec_version"] == slimvec.__version__
    listed = {m["name"]: m for m in meta["members"]}
    import hashlib

    for ti, data in members[1:]:
        entry = listed.pop(ti.name)
        if ti.isfile():
            assert entry["size"] == len(data)
            assert entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert listed == {}
    assert os.path.basename(good_archive) == "good.tar"


def test_cli_snapshot_and_restore_print_a_summary(tmp_path):
    from typer.testing import CliRunner

    from slimvec.cli import app

    build(tmp_path / "src", "hnsw", n=40)
    runner = CliRunner()
    out = runner.invoke(app, ["snapshot", "--index", str(tmp_path / "src"), "--out",
                              str(tmp_path / "s.tgz"), "--no-progress"])
    assert out.exit_code == 0, out.output
    digest = __import__("hashlib").sha256((tmp_path / "s.tgz").read_bytes()).hexdigest()
    assert f"sha256 {digest}" in out.output and "40 documents" in out.output
    again = runner.invoke(app, ["restore", str(tmp_path / "s.tgz"), "--index",
                                str(tmp_path / "dst"), "--no-progress"])
    assert again.exit_code == 0 and "40 documents, checksums verified" in again.output
    refused = runner.invoke(app, ["restore", str(tmp_path / "s.tgz"), "--index",
                                  str(tmp_path / "dst"), "--no-progress"])
    assert refused.exit_code != 0 and "--force" in str(refused.exception or refused.output)


def test_restore_removes_what_a_killed_restore_left_and_keeps_a_running_ones(tmp_path, good_archive):
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    killed = tmp_path / f".idx.restore-{dead.pid}"
    (killed / "store").mkdir(parents=True)
    running = tmp_path / f".idx.restore-{os.getppid()}"  # a live process (pytest's parent)
    running.mkdir()
    restore(good_archive, tmp_path / "idx")
    assert not killed.exists() and running.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["idx", running.name])


def test_a_link_inside_the_index_is_refused_and_no_archive_written(tmp_path):
    src = tmp_path / "src"
    build(src, "faiss", n=40)
    secret = tmp_path / "secret.json"
    secret.write_text('{"rows": 0, "dim": 32, "dtype": "float32", "metric": "cosine"}')
    (src / "full" / "state.json").unlink()
    (src / "full" / "state.json").symlink_to(secret)
    with pytest.raises(PersistenceError, match="symbolic link"):
        snapshot(src, tmp_path / "s.tar")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.json", "src"]
