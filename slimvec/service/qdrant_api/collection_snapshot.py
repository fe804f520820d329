"""A Qdrant collection's snapshot holds the whole collection, and its restore brings back exactly
that.

A collection is its home index plus what lives beside it: the settings (vector names, sizes and
distances, metadata, payload schema), one index per further named vector and the side shard of
its sparse and multivectors. The native snapshot of the home (``POST /indexes/NAME/snapshot``)
stages them into the same archive under :data:`COMPANION` (``settings.json``, ``vectors/NAME/``,
``side/``), so they are listed, checksummed and signed with the home's files; it is taken under
the collection's write lock once every write under way is committed, so all of its stores are
copied at one point of the collection's journal. A restore (under any name) verifies the whole
archive, opens and searches every index of it in a child process, then moves the companion parts
to their places: the collection comes back with its distance, its named and sparse vectors and
only the points it had.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from slimvec.persistence import sha256_file, write_json_atomic
from slimvec.service.qdrant_api.models import QdrantError
from slimvec.service.qdrant_api.named import SEP, exposed, vector_configs

__all__ = ["COMPANION", "NESTED", "snapshot_parts", "unpack"]

#: the folder of a home snapshot that holds the rest of its collection
COMPANION = ".collection"
#: where the named vectors' index folders lie in it (each opened in a child process at restore)
NESTED = f"{COMPANION}/vectors"

Sums = dict[str, tuple[int, str]]


def _sums(folder: Path, prefix: str) -> Sums:
    return {f"{prefix}/{p.relative_to(folder).as_posix()}": (p.stat().st_size, sha256_file(p))
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


@contextmanager
def snapshot_parts(cols: Any, name: str) -> Iterator[Callable[[Path], Sums] | None]:
    """Hold collection ``name`` still (its write lock, every write under way committed) and give
    the stager of its other parts for :func:`slimvec.ops.snapshot.snapshot`'s ``extra``; ``None``
    for an index that is no Qdrant collection."""
    from slimvec.ops.snapshot import stage_index

    if not cols.has_settings(name):
        yield None
        return

    def extra(stage: Path) -> Sums:
        s = cols.settings(name)
        base = stage / COMPANION
        base.mkdir()
        write_json_atomic(base / "settings.json", s)
        sums = _sums(base, COMPANION)
        for vname in list(vector_configs(s))[1:]:
            served = cols.vindex(name, vname)[0]
            served.ready_index()  # 409 while that vector's index collects its fit sample
            sub = base / "vectors" / vname
            sub.mkdir(parents=True)
            got, _m = stage_index(served.folder, sub, hold=served.writer.lock if served.writer else None)
            sums.update({f"{NESTED}/{vname}/{rel}": v for rel, v in got.items()})
        if exposed(s)[1]:
            cols.sparse.copy(name, base / "side")
            sums.update(_sums(base / "side", f"{COMPANION}/side"))
        return sums

    with cols.journal.locked(name):
        cols.journal.drain(name)
        yield extra


def unpack(cols: Any, name: str, target: Path) -> None:
    """Move the companion parts of a home restored into ``target`` to their places as collection
    ``name`` (its named vectors' indexes, side shard, settings); the collection's parts the
    snapshot lacks go. Call while the home is suspended."""
    from slimvec.service.indexes.names import check_name, index_folder

    comp = target / COMPANION
    if not comp.is_dir():
        return
    try:
        s = json.loads((comp / "settings.json").read_text("utf-8"))
        cfg = vector_configs(s)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise QdrantError(422, f"Unprocessable: the snapshot's collection settings are "
                               f"unreadable ({type(exc).__name__}); restore another snapshot.") from None
    reg = cols.st.registry
    old = cols.settings(name) if cols.has_settings(name) else {}
    keep = {f"{name}{SEP}{v}" for v in list(cfg)[1:]}
    gone = {f"{name}{SEP}{v}" for v in list(vector_configs(old))[1:]} - keep if old else set()
    for iname in sorted(gone):
        if iname in reg.names():
            reg.delete(iname)
    for vname in list(cfg)[1:]:
        iname = check_name(f"{name}{SEP}{vname}")
        src, dst = comp / "vectors" / vname, index_folder(cols.root, iname)
        reg.suspend(iname, "a restore")
        try:
            shutil.rmtree(dst, ignore_errors=True)
            src.rename(dst)
        finally:
            reg.resume(iname)
    cols.journal.forget(name)
    cols.sparse.drop(name)
    if (comp / "side").is_dir():
        cols.sparse.place(name, comp / "side")
    cols._save(name, s)
    shutil.rmtree(comp, ignore_errors=True)
