"""Issue 39 F3 and F7: a restore verifies where an archive comes from (a signature with this
installation's snapshot key, or an explicit trust flag), opens and searches the restored index in a
child process (a store file that segfaults the engine refuses the restore instead of killing the
caller), caps sizes and the compression ratio while it reads, and refuses every malformed archive
with a message naming the member, never a traceback."""
from __future__ import annotations

import hashlib
import io
import json
import lzma
import os
import re
import stat
import tarfile
from pathlib import Path

import numpy as np
import pytest

from slimvec.errors import PersistenceError
from slimvec.ops.restore import IndexProbeError, RestoreLimits, UnsignedArchiveError
from slimvec.ops.snapshot import restore, snapshot, verify_archive
from slimvec.ops.snapshot_pin import KEY_ENV, key_file, sign_meta
from tests.indexer.forge import corrupt, forge, read_members, write_members
from tests.indexer.test_snapshot import build


@pytest.fixture(autouse=True)
def own_installation(tmp_path, monkeypatch):
    """Each test its own snapshot key file (no $SLIMVEC_SNAPSHOT_KEY)."""
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("untrusted") / "src"
    build(folder, "hnsw", n=120, keep_full=None)
    return folder


def _cli(capsys, *args: str) -> tuple[int, str]:
    """``slimvec ARGS`` in this process as the console script runs it: (exit code, output)."""
    from slimvec.cli import main

    with pytest.raises(SystemExit) as done:
        main(list(args))
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out + out.err


def test_a_snapshot_is_signed_with_a_0600_key_that_never_enters_the_archive(tmp_path, src,
                                                                            monkeypatch):
    info = snapshot(src, tmp_path / "s.tar")
    assert info.signed
    key = key_file()
    assert key.is_relative_to(tmp_path / "config") and stat.S_IMODE(key.stat().st_mode) == 0o600
    data = (tmp_path / "s.tar").read_bytes()
    assert key.read_text().strip().encode() not in data
    assert verify_archive(tmp_path / "s.tar")["signature"]["alg"] == "hmac-sha256"
    restore(tmp_path / "s.tar", tmp_path / "dst")  # this installation's own: no flag
    # a key from the environment signs instead; the key file's installation calls it foreign
    monkeypatch.setenv(KEY_ENV, "an environment key of 32 chars!!")
    snapshot(src, tmp_path / "e.tar")
    assert b"an environment key" not in (tmp_path / "e.tar").read_bytes()
    restore(tmp_path / "e.tar", tmp_path / "dst-env")
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(UnsignedArchiveError, match="signed with another key"):
        restore(tmp_path / "e.tar", tmp_path / "dst-other")
    assert not (tmp_path / "dst-other").exists()


def test_an_unsigned_archive_is_refused_and_the_trust_flag_restores_it(tmp_path, src, capsys):
    good = snapshot(src, tmp_path / "s.tar").path
    unsigned = forge(good, tmp_path / "unsigned.tar", lambda m: m)
    assert "signature" not in verify_archive(unsigned, trust_unsigned=True)
    code, out = _cli(capsys, "restore", str(unsigned), "--index", str(tmp_path / "dst"),
                     "--no-progress")
    assert code == 2 and "unsigned" in out and "--trust-unsigned" in out, out
    assert "Traceback" not in out and not (tmp_path / "dst").exists()
    code, out = _cli(capsys, "restore", str(unsigned), "--index", str(tmp_path / "dst"),
                     "--no-progress", "--trust-unsigned")
    assert code == 0 and "120 documents" in out, out


def _foreign_signature(members):
    ti0, body = members[0]
    meta = json.loads(body)
    sign_meta(meta, b"another installation's key!")
    body = json.dumps(meta).encode()
    ti0.size = len(body)
    return [(ti0, body)] + members[1:]


def _forged_mac(members):
    ti0, body = members[0]
    meta = json.loads(body)
    meta["signature"]["mac"] = "0" * 64  # this installation's key id, a made-up MAC
    body = json.dumps(meta).encode()
    ti0.size = len(body)
    return [(ti0, body)] + members[1:]


@pytest.mark.parametrize("case, message", [
    ("recomputed", "does not verify"), ("foreign", "another key"), ("made_up", "does not verify")])
def test_hostile_signatures_are_refused_with_nothing_written(tmp_path, src, case, message):
    good = snapshot(src, tmp_path / "s.tar").path
    noise = np.random.default_rng(1).integers(0, 256, 200, dtype=np.uint8).tobytes()
    if case == "recomputed":  # the store changed, every checksum recomputed, signature kept
        bad = forge(good, tmp_path / "bad.tar", lambda m: corrupt(m, "store/index.hnsw", 60,
                                                                  noise), keep_signature=True)
    else:
        edit = _foreign_signature if case == "foreign" else _forged_mac
        bad = write_members(edit(read_members(good)), tmp_path / "bad.tar")
    (tmp_path / "out").mkdir()
    with pytest.raises(UnsignedArchiveError, match=message) as err:
        restore(bad, tmp_path / "out" / "idx")
    assert "--trust-unsigned" in str(err.value)
    assert list((tmp_path / "out").iterdir()) == []


def test_a_store_file_that_segfaults_the_engine_is_refused_in_a_child_process(tmp_path, src):
    """The finding: 200 random bytes at offset 60 of store/index.hnsw, checksums recomputed,
    restored and searched: exit 139. Now the child that searches it dies, not this process."""
    good = snapshot(src, tmp_path / "s.tar").path
    noise = np.random.default_rng(0).integers(0, 256, 200, dtype=np.uint8).tobytes()
    bad = forge(good, tmp_path / "bad.tar", lambda m: corrupt(m, "store/index.hnsw", 60, noise))
    (tmp_path / "out").mkdir()
    with pytest.raises(IndexProbeError, match="SIGSEGV, exit 139") as err:
        restore(bad, tmp_path / "out" / "idx", trust_unsigned=True)
    assert ".restore-" not in str(err.value)  # the target is named, not the temporary folder
    assert list((tmp_path / "out").iterdir()) == []


# ---------------------------------------------------------------------- F7: sizes, malformed
def _xz(data: bytes) -> bytes:
    return lzma.compress(data, format=lzma.FORMAT_XZ, preset=0)


def _bomb(path: Path, size: int = 1 << 30) -> Path:
    """A .tar.xz whose one store file is ``size`` bytes of b"A", listed with its true size and
    SHA-256 (as a forger would list it). Written as concatenated xz streams, one per MiB, so the
    test does not spend a minute compressing."""
    block = b"A" * (1 << 20)
    h = hashlib.sha256()
    for _ in range(size // len(block)):
        h.update(block)
    manifest = b'{"store": "hnsw"}'
    meta = {"format": "slimvec-snapshot", "format_version": 1, "members": [
        {"name": "manifest.json", "type": "file", "size": len(manifest),
         "sha256": hashlib.sha256(manifest).hexdigest()},
        {"name": "store", "type": "dir"},
        {"name": "store/index.hnsw", "type": "file", "size": size, "sha256": h.hexdigest()}]}
    head = io.BytesIO()
    for name, data in (("SNAPSHOT.json", json.dumps(meta).encode()), ("manifest.json", manifest),
                       ("store", None), ("store/index.hnsw", None)):
        ti = tarfile.TarInfo(name)
        ti.type = tarfile.DIRTYPE if name == "store" else tarfile.REGTYPE
        ti.size = size if name == "store/index.hnsw" else len(data or b"")
        head.write(ti.tobuf(tarfile.PAX_FORMAT))
        if data:
            head.write(data + bytes(-len(data) % 512))
    one = _xz(block)
    with open(path, "wb") as fh:
        fh.write(_xz(head.getvalue()))
        for _ in range(size // len(block)):
            fh.write(one)
        fh.write(_xz(bytes(1024)))
    return path


def test_a_decompression_bomb_is_stopped_before_anything_is_written(tmp_path):
    bomb = _bomb(tmp_path / "bomb.tar.xz")
    assert bomb.stat().st_size < 1 << 20  # 1 GiB of data in under 1 MiB
    (tmp_path / "out").mkdir()
    with pytest.raises(PersistenceError, match=r"'store/index.hnsw' expands more than 200 "
                       r"times.*--max-ratio"):
        restore(bomb, tmp_path / "out" / "idx", trust_unsigned=True)
    assert list((tmp_path / "out").iterdir()) == []


def test_member_and_total_caps_are_checked_before_any_data_is_read(tmp_path, src, monkeypatch):
    good = snapshot(src, tmp_path / "s.tar").path
    with pytest.raises(PersistenceError, match=r"member '[^']+' is listed at [0-9,]+ bytes, "
                       r"above the cap of 1,000 per file.*--max-member-size"):
        restore(good, tmp_path / "a", limits=RestoreLimits(max_member_bytes=1000))
    monkeypatch.setenv("SLIMVEC_RESTORE_MAX_TOTAL", "4K")
    with pytest.raises(PersistenceError, match="above the cap of 4,096.*--max-size"):
        restore(good, tmp_path / "b")
    restore(good, tmp_path / "c", limits=RestoreLimits())  # the defaults fit it
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def _listed(members, *entries):
    ti0, body = members[0]
    meta = json.loads(body)
    meta.pop("signature", None)
    for name, data in entries:
        meta["members"].append({"name": name, "type": "file", "size": len(data),
                                "sha256": hashlib.sha256(data).hexdigest()})
    body = json.dumps(meta).encode()
    ti0.size = len(body)
    return [(ti0, body)] + members[1:]


def _file(name: str, data: bytes = b"x"):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    return ti, data


def _special(name: str, kind: bytes, link: str = ""):
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname = kind, link
    return ti, None


MALFORMED = {
    "file_and_folder": (lambda m: _listed(m, ("x", b"1"), ("x/y", b"2")) + [_file("x", b"1"),
                                                                          _file("x/y", b"2")],
                        "'x/y' lies under 'x'"),
    "listed_twice": (lambda m: _listed(m, ("x", b"1"), ("x", b"1")) + [_file("x", b"1")],
                     "'x' is listed twice"),
    "in_tar_twice": (lambda m: _listed(m, ("x", b"1")) + [_file("x", b"1"), _file("x", b"1")],
                     "'x' appears twice"),
    "absolute": (lambda m: _listed(m, ("x", b"x")) + [_file("/tmp/abs-x")], "'/tmp/abs-x'"),
    "dotdot": (lambda m: _listed(m, ("x", b"x")) + [_file("../x")], r"'\.\./x'"),
    "symlink": (lambda m: _listed(m, ("store/l", b"")) + [_special("store/l", tarfile.SYMTYPE,
                                                                   "/etc/passwd")],
                "'store/l' is a symbolic link"),
    "hardlink": (lambda m: _listed(m, ("store/h", b"")) + [_special("store/h", tarfile.LNKTYPE,
                                                                    "manifest.json")],
                 "'store/h' is a hard link"),
    "device": (lambda m: _listed(m, ("store/d", b"")) + [_special("store/d", tarfile.CHRTYPE)],
               "'store/d' is a device file"),
    "fifo": (lambda m: _listed(m, ("store/f", b"")) + [_special("store/f", tarfile.FIFOTYPE)],
             "'store/f' is a FIFO"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_every_malformed_archive_is_a_message_naming_the_member_never_a_traceback(
        tmp_path, src, capsys, case):
    edit, message = MALFORMED[case]
    good = snapshot(src, tmp_path / "s.tar").path
    bad = write_members(edit(read_members(good)), tmp_path / "bad.tar")
    (tmp_path / "out").mkdir()
    code, out = _cli(capsys, "restore", str(bad), "--index", str(tmp_path / "out" / "idx"),
                     "--no-progress", "--trust-unsigned")
    flat = " ".join(out.split())
    assert code == 2 and "error:" in out and "Traceback" not in out, out
    assert re.search(message, flat) and "Nothing was restored" in flat, out
    assert list((tmp_path / "out").iterdir()) == [] and not os.path.lexists("/tmp/abs-x")
