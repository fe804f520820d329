"""``slimvec compact``: rebuild what holds tombstones, beside the old files, then swap atomically.

Two things keep deleted or replaced rows after :meth:`slimvec.Index.delete`: the full-vector side
file (tombstone rows, old rows of re-upserted ids) and a FAISS index (tombstoned positions). The
side file is compacted into a new folder and the manifest is pointed at it (one atomic write: the
commit point), then the old folder is removed; a crash leaves either the old folder in use and a
stray new one, or the new one in use and a stray old one, which the next compaction removes.
FAISS indexes keep their tombstones excluded at search time by an ``IDSelectorBitmap``; their
positions are reclaimed by a rebuild from the kept full vectors, which ``slimvec compact`` runs
(:func:`slimvec.ops.compaction.compact_index`, on every recipe).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["compact_full"]

_PREFIX = "full-c"


def _stray(folder: Path, keep: str | None) -> list[Path]:
    return [p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()
            and (p.name.startswith(_PREFIX) or p.name == "full") and p.name != keep]


def compact_full(index: Any) -> int:
    """Rewrite the index's full-vector side file without dead rows; returns the rows dropped.

    The caller holds the exclusive index lock (:class:`slimvec.index.lifecycle.Mutation`).
    """
    full = index.full_vectors
    m = index.manifest
    if full is None or m.full is None or not m.full.dir:
        return 0
    full.commit()
    dropped = full.dead_rows()
    for p in _stray(index.folder, m.full.dir):  # leftovers of an interrupted compaction
        shutil.rmtree(p)
    n = 1 + max([int(p.name[len(_PREFIX):]) for p in index.folder.iterdir()
                 if p.name.startswith(_PREFIX) and p.name[len(_PREFIX):].isdigit()] or [0])
    new_dir = f"{_PREFIX}{n}"
    new = full.compact_into(index.folder / new_dir)
    new.close()
    old_dir = m.full.dir
    full.close()
    index._full = None
    m.full.dir = new_dir
    m.write(index.folder)  # the commit point
    shutil.rmtree(index.folder / old_dir, ignore_errors=True)
    log.info("%s: full vectors compacted (%d dead rows dropped) into %s", index.folder, dropped, new_dir)
    return dropped
