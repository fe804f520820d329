"""``slimvec compact``: reclaim what deletes and replacements left behind, crash-safe.

Two things hold dead rows after :meth:`slimvec.Index.delete` or a re-upsert: the full-vector
side file (compacted in place by :func:`slimvec.index.lifecycle.compact_full`, which a delete
past a ratio also runs: a new folder, one manifest write) and a store that cannot remove vectors
(a FAISS index keeps tombstoned positions, excluded at search time; hnswlib keeps the slots of
deleted labels). Such a store is rebuilt from
the kept full vectors with the index's own recipe, its reducer ``none`` (the default recipe)
included and at the kept vectors' own precision (:func:`slimvec.ops.rebuild.rebuild`: built
beside, swapped atomically, journaled), so compacting never re-encodes a text. Above
:mod:`slimvec.index` and :mod:`.rebuild`, which do not import it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slimvec.index.folder import open_index

__all__ = ["compact_index"]


def _due(dead: int, live: int, max_tombstones: float | None) -> bool:
    """Dead rows past the ratio; ``None`` (compact on demand): any dead row."""
    return dead > 0 and (max_tombstones is None or dead > float(max_tombstones) * max(live, 1))


def compact_index(folder: str | Path, max_tombstones: float | None = None) -> dict[str, Any]:
    """Compact an index folder where its dead rows exceed ``max_tombstones`` x its live rows
    (``None``: whatever is dead).

    Returns
    -------
    dict
        ``dropped`` (full-vector rows dropped), ``compacted`` (the side file was rewritten),
        ``dead_rows`` (left in the side file), ``store_dead_positions`` (the store's dead
        positions before), ``store_rebuilt`` (the store was rebuilt from the kept full vectors)
        and, when a store holds dead positions it cannot shed, ``store_note`` saying why.
    """
    from slimvec.index.lifecycle import Mutation, compact_full

    out: dict[str, Any] = {"dropped": 0, "compacted": False, "store_rebuilt": False}
    with open_index(folder) as idx:
        full = idx.full_vectors
        live = int(idx.store.count())
        out["store_dead_positions"] = dead_store = int(idx.store.dead_positions())
        m = idx.manifest
        recipe = m.recipe or f"{m.reducer or 'none'}|{m.store}"
        keeps_full = m.full is not None and bool(m.full.dir)
        if full is not None:
            out["dead_rows"] = full.dead_rows()
            # on demand (None) the side file is rewritten whatever it holds, as before; a ratio
            # rewrites it only past that ratio
            if max_tombstones is None or _due(full.dead_rows(), len(full), max_tombstones):
                with Mutation(idx):
                    out["dropped"] = compact_full(idx)
                out.update(compacted=True, dead_rows=0)
    if _due(dead_store, live, max_tombstones):
        if not keeps_full:
            out["store_note"] = (f"the store keeps {dead_store:,} dead positions and only a rebuild "
                                 "sheds them, which needs kept full vectors: re-ingest with "
                                 "--keep-full (or a recipe with rescoring), then compact again")
            return out
        from slimvec.ops.rebuild import rebuild

        rebuild(folder, recipe)
        out["store_rebuilt"] = True
    return out
