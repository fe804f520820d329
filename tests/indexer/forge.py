"""Forging snapshot archives as an attacker would (issue 39 F3): change member bytes, then
recompute every checksum an archive carries (SNAPSHOT.json's member list, the manifest's store
checksums and its own ``manifest_sha256``). Only the signature, which needs the key, cannot be
recomputed."""
from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path

from slimvec.index.manifest import Manifest

Members = list[tuple[tarfile.TarInfo, bytes | None]]


def read_members(archive: Path) -> Members:
    out = []
    with tarfile.open(archive) as tar:
        for ti in tar.getmembers():
            out.append((ti, tar.extractfile(ti).read() if ti.isfile() else None))
    return out


def write_members(members: Members, dest: Path) -> Path:
    mode = "w:xz" if dest.name.endswith(".tar.xz") else "w:gz" if dest.name.endswith(".gz") else "w"
    with tarfile.open(dest, mode) as tar:
        for ti, data in members:
            tar.addfile(ti, io.BytesIO(data) if data is not None else None)
    return dest


def recompute(members: Members, keep_signature: bool = False) -> Members:
    """Every checksum recomputed from the members' bytes (the signature dropped unless kept)."""
    data = {ti.name: body for ti, body in members if body is not None}
    out: Members = []
    for ti, body in members:
        if ti.name == "manifest.json":
            m = Manifest.from_json(json.loads(body), Path("manifest.json"))
            for rel in m.store_sha256:
                m.store_sha256[rel] = hashlib.sha256(data[rel]).hexdigest()
            body = data["manifest.json"] = json.dumps(m.to_json()).encode()
            ti.size = len(body)
        out.append((ti, body))
    ti0, body0 = out[0]
    meta = json.loads(body0)
    if not keep_signature:
        meta.pop("signature", None)
    for entry in meta["members"]:
        if entry["type"] == "file":
            entry["size"] = len(data[entry["name"]])
            entry["sha256"] = hashlib.sha256(data[entry["name"]]).hexdigest()
    body0 = json.dumps(meta).encode()
    ti0.size = len(body0)
    return [(ti0, body0)] + out[1:]


def corrupt(members: Members, name: str, offset: int, noise: bytes) -> Members:
    """``noise`` written over member ``name`` at ``offset`` (its length unchanged)."""
    out: Members = []
    for ti, body in members:
        if ti.name == name and body is not None:
            b = bytearray(body)
            b[offset:offset + len(noise)] = noise
            body = bytes(b[:len(body)])
        out.append((ti, body))
    return out


def forge(good: Path, dest: Path, edit: Callable[[Members], Members],
          keep_signature: bool = False) -> Path:
    """``good`` with ``edit`` applied to its members and every checksum recomputed."""
    return write_members(recompute(edit(read_members(good)), keep_signature), dest)
