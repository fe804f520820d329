"""Shared helpers of the on-disk stores: a store metadata file and a durable file write."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slimvec.connectors.base import META_FILE
from slimvec.errors import PersistenceError, StoreError
from slimvec.persistence import read_json, write_json_atomic

__all__ = ["META_FILE", "write_meta", "read_meta", "write_file_atomic"]


def write_meta(folder: Path, name: str, dim: int, metric: str, options: dict[str, Any]) -> None:
    """Record what is needed to reopen the store at ``folder``."""
    write_json_atomic(folder / META_FILE, {"store": name, "dim": int(dim), "metric": metric,
                                           "options": options})


def read_meta(folder: Path, name: str) -> dict[str, Any]:
    """Read the metadata written by :func:`write_meta`, checking the store type.

    Raises
    ------
    StoreError
        No store at ``folder``, or a store of another type.
    """
    path = folder / META_FILE
    if not path.exists():
        raise StoreError(f"No {name} store at {folder} (missing {META_FILE}). "
                         "Create it first (slimvec ingest) or check the path.")
    meta = read_json(path)
    if meta.get("store") != name:
        raise StoreError(f"{folder} holds a {meta.get('store')!r} store, not {name!r}.")
    return meta


def write_file_atomic(path: Path, writer: Callable[[str], None]) -> None:
    """Call ``writer(tmp_path)``, fsync the result and rename it over ``path``.

    A crash mid-write leaves the previous file intact, never a truncated one.
    """
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # never another process's temp file
    try:
        writer(str(tmp))
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise PersistenceError(f"Could not write {path}: {exc}. Check free disk space and permissions.") from exc
