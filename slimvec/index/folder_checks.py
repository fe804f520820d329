"""Checks an index folder must pass before anything in it is opened: recorded checksums, no
links, dimensions that agree, and no store location taken from the folder without the user's word.

An index folder is untrusted input (it may come from a download or a shared drive).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from slimvec.connectors.base import VectorStore
from slimvec.errors import ConfigError, DimensionMismatchError, PersistenceError
from slimvec.index.layout import store_folder
from slimvec.index.manifest import MANIFEST, Manifest
from slimvec.index.safefs import LinkError
from slimvec.persistence import sha256_file

if TYPE_CHECKING:  # the reducers import scikit-learn; slimvec info opens no reducer
    from slimvec.reducers import Reducer

__all__ = ["verify_index_files", "refuse_links_inside", "check_store_dim", "read_manifest",
           "write_manifest", "UntrustedStoreError", "external_store", "check_store_trusted"]


def verify_index_files(folder: str | os.PathLike[str], manifest: Manifest) -> None:
    """Check the SHA-256 recorded in the manifest for the reducer and the store files.

    Every recorded checksum is checked, whatever the progress state says (a run clears the store
    checksums when it starts, so only a tampered manifest still holds them while "running").
    Keys are plain relative names inside the folder (checked when the manifest is read); a link
    is refused; a mismatch names the file but prints no hash.

    Raises
    ------
    PersistenceError
        A file differs from what the manifest recorded; the message names it.
    """
    folder = Path(folder)
    recorded = dict(manifest.sha256)
    recorded.update(manifest.store_sha256)
    for rel, expected in recorded.items():
        path = folder / rel
        if any(os.path.islink(folder.joinpath(*Path(rel).parts[:i + 1]))
               for i in range(len(Path(rel).parts))):
            raise LinkError(f"{path} (recorded in {folder / MANIFEST}) is or lies under a symbolic "
                            "link; slimvec does not follow links inside an index folder. Restore "
                            "the file or rebuild the index.")
        if not path.is_file():
            raise PersistenceError(f"{path} is missing (recorded in {folder / MANIFEST}).")
        if sha256_file(path) != expected:
            raise PersistenceError(
                f"{path}: SHA-256 differs from the one recorded in {folder / MANIFEST}. The file "
                "was modified or corrupted; restore it or rebuild the index "
                "(slimvec ingest ... --rebuild)."
            )


def refuse_links_inside(folder: Path) -> None:
    """Refuse an index folder holding a symbolic link (the folder itself may be a link).

    The store engines, SQLite payload files and the full-vector file are opened by libraries that
    follow links; checking the whole tree (it holds tens of files) keeps them inside the folder.
    """
    if not folder.is_dir():
        return
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            if path.is_symlink():
                raise LinkError(
                    f"{path} is a symbolic link. slimvec never follows links inside an index "
                    "folder (it could read or write outside the index); replace it with the real "
                    "file, or rebuild the index.")


def check_store_dim(folder: Path, store: VectorStore, reducer: Reducer | int) -> None:
    """Refuse a store whose vectors do not have the reducer's output dimension (a reducer, or
    that dimension)."""
    dim_out = reducer if isinstance(reducer, int) else int(reducer.n_components_)
    if store.dim is not None and int(store.dim) != dim_out:
        store.close()
        raise DimensionMismatchError(f"stored vector dimension of {folder} vs reducer output",
                                     dim_out, store.dim,
                                     "The store and the reducer come from different indexes.")


def read_manifest(folder: str | os.PathLike[str]) -> Manifest:
    """Read and check an index manifest (:meth:`Manifest.read`)."""
    return Manifest.read(folder)


def write_manifest(folder: str | os.PathLike[str], manifest: Manifest) -> None:
    """Atomically write the manifest (:meth:`Manifest.write`)."""
    manifest.write(folder)


class UntrustedStoreError(ConfigError):
    """The manifest names a store outside the index folder that the user did not name."""


def external_store(folder: Path, manifest: Manifest) -> str | None:
    """The location of the index's store when it is not inside the index folder, else None."""
    from slimvec.connectors import make_store

    location = make_store(manifest.store, store_folder(folder)).location
    return None if Path(location) == store_folder(folder) else str(location)


def check_store_trusted(folder: Path, manifest: Manifest, trust_store: str | bool | None) -> None:
    """Refuse to open a store location that came from the index folder unless the user named it.

    ``trust_store`` is ``True`` (trust whatever the manifest says), or the store spec / location
    the user gave (it must equal the manifest's), or ``None`` / ``False``.
    """
    location = external_store(folder, manifest)
    if location is None or trust_store is True:
        return
    if isinstance(trust_store, str) and trust_store.strip() in (manifest.store, location):
        return
    raise UntrustedStoreError(
        f"{folder / MANIFEST} names an external store ({location}). slimvec does not connect to "
        "a location written in an index folder (it could send $QDRANT_API_KEY elsewhere) unless "
        f"you name it: pass --trust-store {manifest.store!r} (Python: trust_store=...), or the "
        "same --store spec.")
