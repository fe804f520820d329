"""Where things live inside an index folder, and the store files' checksums.

Below :mod:`slimvec.index.folder` and the modules it delegates to (``lifecycle``, ``compact``), so
they can all name the folder's parts without importing each other.
"""

from __future__ import annotations

import os
from pathlib import Path

from slimvec.connectors import store_class
from slimvec.index.manifest import Manifest
from slimvec.persistence import sha256_file

__all__ = ["REDUCER_DIR", "STORE_DIR", "VOLATILE_SUFFIXES", "reducer_checksum", "store_checksums",
           "store_folder"]

REDUCER_DIR = "reducer"
STORE_DIR = "store"
#: files an engine rewrites or removes as it runs (never checksummed)
VOLATILE_SUFFIXES = ("-wal", "-shm", "-journal", ".lock", ".tmp")


def reducer_checksum(folder: str | os.PathLike[str]) -> str:
    """SHA-256 of the index's ``reducer/config.json`` (which records its state file's SHA-256)."""
    return sha256_file(Path(folder) / REDUCER_DIR / "config.json")


def store_checksums(folder: str | os.PathLike[str], manifest: Manifest) -> dict[str, str]:
    """SHA-256 of each file of a snapshot-style store (FAISS, hnswlib) in the index folder."""
    base = store_folder(Path(folder))
    # snapshot-style stores (files replaced whole by atomic rename at each flush) get a SHA-256 each
    if not store_class(manifest.store).snapshot_files or not base.is_dir():
        return {}
    out = {}
    for f in sorted(base.rglob("*")):
        if f.is_file() and not f.is_symlink() and not f.name.startswith(".") and not f.name.endswith(VOLATILE_SUFFIXES):
            out[f.relative_to(Path(folder)).as_posix()] = sha256_file(f)
    return out


def store_folder(index_dir: Path) -> Path:
    """Where store data lives when the store spec gives no location."""
    return index_dir / STORE_DIR
