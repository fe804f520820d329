"""``--keep-full`` for ingest and migrate: the full vectors of every upserted row, kept on disk.

:class:`KeepFullStore` is the store that :class:`~slimvec.indexer.builder.IndexBuilder` writes
to: it upserts the reduced vectors and writes the same rows' full vectors either into the store itself
(Qdrant Edge named vector ``full``) or into a memory-mapped
:class:`~slimvec.connectors.fullvectors.FullVectors` side file committed at every store flush
(every checkpoint), so the side file is never behind the progress record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from slimvec.connectors.fullvectors import FULL_DIR, FULL_DTYPES, FullVectors
from slimvec.errors import ConfigError
from slimvec.index.manifest import FullInfo, Manifest
from slimvec.sources.checks import split_bad_vectors

__all__ = ["KeepFullStore", "full_in_store", "prepare_full", "check_keep_full", "check_recipe"]


def check_keep_full(dtype: str | None) -> None:
    """Refuse an unknown ``keep_full`` precision."""
    if dtype is not None and dtype not in FULL_DTYPES:
        raise ConfigError(f"keep_full={dtype!r} unknown. Known: {', '.join(FULL_DTYPES)}.")


def full_in_store(store_spec: str, dtype: str | None) -> bool:
    """Qdrant (Edge or qdrant-client) keeps float32 full vectors as a named vector; FAISS and
    hnswlib (and float16) use the memory-mapped side file."""
    from slimvec.connectors import store_class

    return dtype == "float32" and store_class(store_spec).keeps_full_vectors


def check_recipe(spec: Any) -> None:
    """Refuse, before anything is written, a recipe the index spec cannot honour.

    ``rescore=auto`` is calibrated on the memory-mapped side file; a Qdrant store keeping float32
    full vectors as a named vector has none, so it is refused at the start, not after the run.
    """
    from slimvec.recipe import parse_recipe, recipe_rescore

    recipe = getattr(spec, "recipe", None)
    if recipe_rescore(recipe) != "auto":
        return

    rec = parse_recipe(str(recipe))
    store = spec.store or rec.store
    if full_in_store(store, rec.keep_full):
        raise ConfigError(
            f"Recipe {rec}: rescore=auto calibrates the depth on the full vectors kept beside the "
            f"index, but {store.partition(':')[0]} keeps float32 full vectors inside the store, "
            "where calibration is not supported. Give a fixed depth (rescore=4), or keep the "
            "full vectors as float16 (keep_full=float16), or use a FAISS / hnswlib store.")


def prepare_full(folder: Path, manifest: Manifest, store: Any, dtype: str | None,
                 dim: int, *, new: bool) -> FullVectors | None:
    """Set up full-vector keeping for a new index (before ``store.create``) or reopen it.

    For a new index this records ``manifest.full`` and, for Qdrant Edge, sets the store's
    ``full_dim`` option (call it before ``store.create``). Returns the side file, if any.
    """
    if dtype is None:
        return None
    if new:
        in_store = full_in_store(manifest.store, dtype)
        manifest.full = FullInfo(dtype=dtype, dir=None if in_store else FULL_DIR, in_store=in_store)
        if in_store:
            store.options["full_dim"] = int(dim)
            return None
        return FullVectors.create(folder / FULL_DIR, dim, dtype, manifest.metric)
    info = manifest.full
    return FullVectors.open(folder / info.dir) if info is not None and info.dir else None


class KeepFullStore:
    """Proxy of an opened store that also keeps the full vector of each upserted row.

    Parameters
    ----------
    store : VectorStore
    full : FullVectors or None
        Side file; ``None`` when the store keeps full vectors itself (``upsert(..., full=)``).
    dim : int
        Full dimension.
    source : str
        Source name (for the bad-row check that mirrors the commit loop's).
    """

    def __init__(self, store: Any, full: FullVectors | None, dim: int, source: str) -> None:
        self.store, self.full, self.dim, self.source = store, full, dim, source
        self._staged: dict[int, np.ndarray] = {}

    def stage(self, ids: np.ndarray, vectors: Any, norms: bool = True) -> None:
        """Remember the full vectors of the batch about to be written (bad rows are skipped, by
        the batch's own checks: ``norms`` as :attr:`VectorBatch.check_norms`)."""
        good, vecs, _ = split_bad_vectors(vectors, self.dim, None, self.source, norms=norms)
        self._staged = dict(zip(np.asarray(ids)[good].tolist(), vecs))

    def upsert(self, ids: Any, vectors: np.ndarray, payloads: Any = None) -> None:
        """Upsert reduced vectors and keep the staged full vectors of the same ids."""
        full = (np.stack([self._staged[int(i)] for i in ids]) if len(ids)
                else np.empty((0, self.dim), np.float32))
        if self.full is None:
            self.store.upsert(ids, vectors, payloads, full=full)
            return
        self.full.append(ids, full)
        self.store.upsert(ids, vectors, payloads)

    def flush(self) -> None:
        """Flush the store, then commit the side file (it is never ahead of a flushed store)."""
        self.store.flush()
        if self.full is not None:
            self.full.commit()

    def close(self) -> None:
        """Close the store and the side file."""
        try:
            self.store.close()
        finally:
            if self.full is not None:
                self.full.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)
