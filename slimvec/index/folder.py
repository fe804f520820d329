"""An index is a folder: ``manifest.json``, the fitted ``reducer/`` artifact and the store data.

``manifest.json`` records the encoder, reducer and store specs, the dimensions, library versions,
the document count and ingestion progress. :func:`open_index` (exported as ``slimvec.open``)
loads an index for searching with vectors or texts.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from slimvec.buildspec import BuildSpec
from slimvec.connectors import store_class
from slimvec.connectors.base import SearchResult, VectorStore
from slimvec.errors import ConfigError, DimensionMismatchError, IndexBusyError, PersistenceError
from slimvec.index.folder_checks import (
    UntrustedStoreError,
    check_store_dim,
    check_store_trusted,
    external_store,
    read_manifest,
    refuse_links_inside,
    verify_index_files,
    write_manifest,
)
from slimvec.index.layout import REDUCER_DIR, STORE_DIR, reducer_checksum, store_checksums, store_folder
from slimvec.index.manifest import INDEX_FORMAT, INDEX_FORMAT_VERSION, MANIFEST, Manifest
from slimvec.measure import reduce_queries, rescored_search
from slimvec.persistence import allocated_bytes, check_artifact

if TYPE_CHECKING:  # scikit-learn: imported when a search first needs the reducer, not by info/get
    from slimvec.reducers import Reducer

log = logging.getLogger(__name__)

__all__ = ["Index", "open_index", "MANIFEST", "INDEX_FORMAT", "INDEX_FORMAT_VERSION", "Manifest",
           "verify_index_files", "reducer_checksum", "store_checksums", "check_store_dim",
           "read_manifest", "write_manifest", "external_store", "UntrustedStoreError",
           "check_store_trusted", "refuse_links_inside", "store_folder", "REDUCER_DIR",
           "STORE_DIR"]



class Index:
    """A searchable slimvec index folder.

    Use :func:`open_index` (``slimvec.open(DIR)``) rather than the constructor.

    Attributes
    ----------
    folder : Path
    manifest : Manifest
    reducer : Reducer
    store : VectorStore
    """

    def __init__(self, folder: Path, manifest: Manifest, reducer: Reducer | None,
                 store: VectorStore) -> None:
        self.folder = folder
        self.manifest = manifest
        self._reducer = reducer  # None: loaded from the folder on first use (see reducer)
        self.store = store
        self._encoder: Any = None
        self._lock: Any = None
        self._full: Any = None
        #: how the last filtered search was run (path, matches, threshold, why; issue 37)
        self.last_filter_plan: dict[str, Any] | None = None

    @property
    def reducer(self) -> Reducer:
        """The fitted reducer, loaded (and checked against the manifest) on first use."""
        if self._reducer is None:
            from slimvec.reducers import load_reducer

            reducer = load_reducer(self.folder / REDUCER_DIR)
            _check_reducer(self.folder, self.manifest, reducer.spec, reducer.n_features_in_,
                           reducer.n_components_)
            self._reducer = reducer
        return self._reducer

    # ----------------------------------------------------------------- encoder
    @property
    def encoder(self) -> Any:
        """The index's encoder, loaded on first use (``None`` for vector-only indexes)."""
        if self._encoder is None and self.manifest.encoder:
            self._encoder = BuildSpec.reopen(self.manifest).load_encoder()
            if self._encoder.dim != self.dim_in:
                raise DimensionMismatchError(
                    f"encoder {self.manifest.encoder} output vs reducer input of {self.folder}",
                    self.dim_in, self._encoder.dim)
        return self._encoder

    @property
    def dim_in(self) -> int:
        """Input (encoder) dimension."""
        return self.manifest.dim_in

    @property
    def dim_out(self) -> int:
        """Stored (reduced) dimension."""
        return self.manifest.dim_out

    # ------------------------------------------------------------------ search
    def embed(self, queries: str | Sequence[str] | np.ndarray) -> np.ndarray:
        """Full-dimension query vectors from texts (encoded) or vectors (checked)."""
        if isinstance(queries, str):
            queries = [queries]
        if isinstance(queries, np.ndarray) or (
            isinstance(queries, (list, tuple)) and queries and not isinstance(queries[0], str)
        ):
            vecs = np.asarray(queries, dtype=np.float32)
            if vecs.ndim == 1:
                vecs = vecs[None, :]
            if vecs.shape[1] != self.dim_in:
                raise DimensionMismatchError("query vectors", self.dim_in, vecs.shape[1],
                                             "Queries must come from the index's original encoder.")
            return vecs
        if self.encoder is None:
            raise PersistenceError(f"{self.folder} was built from vectors and has no encoder: "
                                   "pass query vectors instead of texts.")
        return self.encoder.encode_queries(list(queries))

    @property
    def full_vectors(self) -> Any:
        """The on-disk full vectors (``--keep-full``), opened on first use; ``None`` without."""
        if self._full is None and self.manifest.full is not None and self.manifest.full.dir:
            from slimvec.connectors.fullvectors import FullVectors

            self._full = FullVectors.open(self.folder / self.manifest.full.dir)
        return self._full

    def recipe_depth(self, recipe: Any) -> int:
        """The rescoring depth a search with ``recipe`` uses on this index (``search(rescore=...)``).

        ``recipe`` (a :class:`~slimvec.recipe.Recipe`, a recipe string or a ``tuned.json`` path)
        must name this index's reducer and store: a recipe is how an index was built, so a search
        cannot change either. Its depth wins over the recorded one (``rescore=R``: R; no rescoring:
        0); ``rescore=auto`` uses the depth this index calibrated.

        Raises
        ------
        ConfigError
            The recipe names another reducer or store, rescores an index that keeps no full
            vectors, or is ``auto`` on an index that has not been calibrated.
        """
        from slimvec.recipe import Recipe, resolve_recipe

        if isinstance(recipe, str) and recipe.strip().lower() == "none":
            return 0  # no recipe stage: no re-ranking (``--recipe none``)
        rec = recipe if isinstance(recipe, Recipe) else resolve_recipe(recipe)
        m = self.manifest
        built = m.reducer if m.reducer else "none"
        clashes = [f"{what} {want!r} (the index has {have!r})"
                   for what, want, have in (("reducer", rec.reducer, built), ("store", rec.store, m.store))
                   if want != have]
        if clashes:
            raise ConfigError(f"Recipe {rec} does not describe {self.folder}: {'; '.join(clashes)}. A "
                              f"search cannot change how an index was built; give the index's own "
                              f"recipe ({m.recipe or 'slimvec info shows its reducer and store'}), or "
                              "--rescore R alone.")
        if rec.rescore is None:
            return 0
        if m.full is None:
            raise ConfigError(f"Recipe {rec} rescores, but {self.folder} keeps no full vectors. Rebuild "
                              "it with the recipe (slimvec ingest --recipe ...), or search without rescoring.")
        if rec.auto_rescore:
            if m.rescore is None or not m.rescore.calibrated:
                raise ConfigError(f"Recipe {rec}: {self.folder} has no calibrated rescoring depth (it "
                                  "was not built with rescore=auto, or its build did not finish). Give "
                                  "a fixed depth (rescore=8), or finish the build.")
            return int(m.rescore.depth)
        return int(rec.rescore)

    def search(self, queries: str | Sequence[str] | np.ndarray, k: int = 10,
               rescore: int | None = None, filter: Any = None, **params: Any) -> SearchResult:
        """Search with texts or full-dimension vectors; the reducer is applied here.

        Parameters
        ----------
        queries : str, sequence of str, or array of shape (dim_in,) or (n, dim_in)
        k : int
            Results per query.
        rescore : int, optional
            Two-stage search: fetch ``k * rescore`` candidates from the reduced index and re-rank
            them with the full vectors kept on disk (index built with ``--keep-full``). ``None``:
            the depth recorded by the index's recipe (``rescore=R`` or calibrated ``auto``), else
            no rescoring; ``0``: no rescoring (:meth:`recipe_depth` of a recipe without one).
        filter : dict, str or Filter, optional
            Qdrant filter JSON on the payloads (:mod:`slimvec.filters`); ``has_id`` takes the ids
            given at ingest. Few matches are scanned exactly over the kept full vectors, many go
            through the store's filtered search (:func:`slimvec.index.lifecycle.filtered_search`).
        **params
            Store search parameters (e.g. ``ef``).

        Returns
        -------
        SearchResult
            ``ids`` (n, k) int64 store ids padded with -1, ``scores`` (n, k), higher is closer
            (full-space similarities when rescoring), ``source_ids`` the ids given at ingest
            (read from the payloads when asked, while the index is open).
        """
        res = self._search(queries, k, rescore, filter, params)
        res.lookup = self._user_ids
        return res

    def _user_ids(self, sids: list[int]) -> list[Any]:
        """The user's ids of store ids (:func:`slimvec.ids.user_id`, the mapping ``get`` uses)."""
        from slimvec.ids import user_id

        return [user_id(s, p) for s, p in zip(sids, self.store.get_payloads(sids))]

    def _search(self, queries: Any, k: int, rescore: int | None, filter: Any,
                params: dict[str, Any]) -> SearchResult:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or int(k) < 1:
            raise ConfigError(f"k must be a positive integer (results per query), got {k!r}.")
        if rescore is None and self.manifest.rescore is not None:
            rescore = self.manifest.rescore.depth
        elif rescore is not None and (isinstance(rescore, bool) or not isinstance(rescore, (int, np.integer))
                                      or int(rescore) < 0):
            raise ConfigError(f"rescore must be a positive integer (candidates per result) or 0 (no "
                              f"re-ranking), got {rescore!r}; pass rescore=None for the index's default.")
        if rescore is not None and int(rescore) == 0:
            rescore = None
        vectors = self.embed(queries)
        reduced = reduce_queries(self.reducer, vectors)  # leanvec: query side
        if filter is not None:
            from slimvec.index.lifecycle import filtered_search, resolve_filter

            flt = resolve_filter(self, filter)
            if flt is not None:
                return filtered_search(self, vectors, reduced, k, rescore, flt, params)
        if rescore is None:
            return rescored_search(self.store, reduced, vectors, k, **params)
        in_store = self.manifest.full is not None and self.manifest.full.in_store  # Qdrant Edge named vectors
        if not in_store and self.full_vectors is None:
            raise ConfigError(f"{self.folder} keeps no full vectors, so it cannot rescore. Rebuild it "
                              "with --keep-full (slimvec migrate / ingest), or search without rescore.")
        # the one rescored search the harness and calibration also run (slimvec.measure)
        return rescored_search(self.store, reduced, vectors, k, k * int(rescore),
                               None if in_store else self.full_vectors, **params)

    def payloads(self, ids: Sequence[int]) -> list[dict[str, Any] | None]:
        """Stored payloads (text and source fields) of ids."""
        return self.store.get_payloads([int(i) for i in ids])

    # ------------------------------------------- delete / update / get / scroll (issue 25)
    def delete(self, ids: Sequence[Any] | None = None, filter: Any = None, *,
               user_ids: bool = True) -> int:
        """Delete documents by their ids or by a payload filter; returns how many were removed.

        Parameters
        ----------
        ids : sequence, optional
            The ids given at ingest (the ``id`` column; mapped to store ids with
            :func:`slimvec.ids.doc_id` under the index's id rule, so ``17`` and ``"17"`` are one
            document). Unknown ids are ignored.
        filter : dict, str or Filter, optional
            Qdrant filter JSON (:mod:`slimvec.filters`). Give exactly one of ``ids`` / ``filter``.
        user_ids : bool
            ``False``: ``ids`` (and ``has_id``) are store ids (the ids searches return).

        Raises
        ------
        IndexBusyError
            Another process writes (or, for Qdrant Edge, reads) the index.
        """
        from slimvec.index.lifecycle import Mutation, target_ids

        with Mutation(self):
            sids = target_ids(self, ids, filter, user_ids)
            removed = self.store.delete(sids) if len(sids) else 0
            if self.full_vectors is not None and len(sids):
                self.full_vectors.delete(sids)
        return int(removed)

    def set_payload(self, fields: Mapping[str, Any], ids: Sequence[Any] | None = None,
                    filter: Any = None, overwrite: bool = False, *, user_ids: bool = True) -> int:
        """Merge ``fields`` into the payloads of documents by ids or filter (``overwrite``: replace
        them whole), without re-encoding; ``ids``, ``filter``, ``user_ids`` as in :meth:`delete`.
        Returns the documents updated."""
        from slimvec.index.lifecycle import Mutation, set_fields_check, target_ids

        fields = set_fields_check(fields)
        with Mutation(self):
            sids = target_ids(self, ids, filter, user_ids)
            return int(self.store.set_payload(sids, fields, overwrite=overwrite)) if len(sids) else 0

    def delete_payload_keys(self, keys: Sequence[str], ids: Sequence[Any] | None = None,
                            filter: Any = None, *, user_ids: bool = True) -> int:
        """Remove top-level payload ``keys`` of documents by ids or filter (as :meth:`delete`);
        returns the documents updated."""
        from slimvec.index.lifecycle import Mutation, target_ids

        with Mutation(self):
            sids = target_ids(self, ids, filter, user_ids)
            return int(self.store.delete_payload_keys(sids, list(keys))) if len(sids) else 0

    def get(self, ids: Sequence[Any], *, user_ids: bool = True) -> list[dict[str, Any] | None]:
        """Records ``{"id", "store_id", "payload"}`` of documents by id (``None`` when absent).

        ``id`` is the id given at ingest when the payload recorded it (``source_id``: text
        ingests do), else the store id (a migrated collection's payloads keep no source id).
        """
        from slimvec.index.lifecycle import records, store_ids

        return records(self, store_ids(self, ids, user_ids).tolist())

    def scroll(self, limit: int = 100, offset: int | None = None, filter: Any = None, *,
               user_ids: bool = True) -> tuple[list[dict[str, Any]], int | None]:
        """One page of records (as :meth:`get`) in store-id order, optionally filtered.

        Parameters
        ----------
        limit : int
            Records per page.
        offset : int, optional
            The ``next_offset`` of the previous page (``None``: the first page).

        Returns
        -------
        (records, next_offset)
            ``next_offset`` is ``None`` on the last page.
        """
        from slimvec.index.lifecycle import resolve_filter, scroll_page

        return scroll_page(self, limit, offset, resolve_filter(self, filter, user_ids))

    def create_payload_index(self, field: str, kind: str) -> bool:
        """Declare payload ``field`` indexed as ``kind`` (keyword, integer, float, bool, datetime): recorded
        in the manifest (``payload_index``) and built where the store has payload indexes
        (Qdrant: its planner and filtered search use it); returns whether the store built one."""
        from slimvec.index.lifecycle import Mutation, declare_payload_index

        with Mutation(self):
            return declare_payload_index(self, field, kind)

    def count(self, filter: Any = None) -> int:
        """Live documents (matching ``filter`` when given)."""
        from slimvec.index.lifecycle import resolve_filter

        flt = resolve_filter(self, filter)
        return int(self.store.count() if flt is None else len(self.store.filter_ids(flt)))

    # -------------------------------------------------------------------- info
    def info(self) -> dict[str, Any]:
        """Count, dims, specs, bytes on disk, the recipe and the default rescoring depth
        (``rescore_recall``: neighbour recall@10 measured at that depth when ``auto`` calibrated it)."""
        from slimvec.index.filter_info import filter_info
        from slimvec.index.saved import saved_summary

        rescore = self.manifest.rescore
        count, store_bytes = int(self.store.count()), int(self.store.size_bytes())
        return {
            "index": str(self.folder),
            "count": count,
            "dim_in": self.dim_in,
            "dim_out": self.dim_out,
            "encoder": self.manifest.encoder,
            "reducer": self.manifest.reducer,
            "store": self.manifest.store,
            "metric": self.manifest.metric,
            **self.manifest.encoding,
            "bytes": allocated_bytes(self.folder) + (0 if self.store.local else 0),
            "store_bytes": store_bytes,
            "reducer_bytes": allocated_bytes(self.folder / REDUCER_DIR),
            "recipe": self.manifest.recipe,
            "rescore_depth": rescore.depth if rescore else None,
            "rescore_calibrated": rescore.calibrated if rescore else None,
            "rescore_recall": rescore.recall if rescore else None,
            "rescore_target": rescore.target if rescore else None,
            "rescore_status": rescore.status if rescore else None,
            "rescore_calibrated_on": (None if rescore is None or not rescore.calibrated
                                      else f"{rescore.n_queries} given queries" if rescore.queries
                                      else f"{rescore.n_queries} corpus vectors"),
            **saved_summary(self, count, store_bytes),  # issue 27 item 4: what was saved
            **filter_info(self),
        }

    def close(self) -> None:
        """Release the store (and the reader lock of a Qdrant Edge / local Qdrant index)."""
        try:
            self.store.close()
            if self._full is not None:
                self._full.close()
                self._full = None
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def open_index(folder: str | os.PathLike[str], *, trust_store: str | bool | None = None,
               cls: type[Index] | None = None) -> Index:
    """Open an index folder for searching (``slimvec.open`` opens a
    :class:`~slimvec.ops.local.LocalIndex`, ``cls``, which also writes).

    Parameters
    ----------
    folder : path
    trust_store : str or bool, optional
        An index whose store lies outside its folder (``qdrant:URL``, ``qdrant-edge:PATH``) is
        only opened when the user names that store: its spec or location, or ``True``. The
        manifest alone never makes slimvec connect (or send ``$QDRANT_API_KEY``) anywhere.

    Raises
    ------
    UntrustedStoreError
        The manifest names an external store and ``trust_store`` does not name it.
    PersistenceError
        Not an index, or a corrupted / newer-format manifest, reducer or store file (SHA-256).
    DimensionMismatchError
        The reducer and the stored vectors disagree on dimensions.
    IndexBusyError
        Another process is writing an index whose store cannot be read meanwhile (Qdrant Edge,
        qdrant-client local mode), or is creating the index.
    """
    from slimvec.index.locking import IndexLock, is_being_written

    folder = Path(folder)
    lock: IndexLock | None = None
    try:
        manifest = read_manifest(folder)
        check_store_trusted(folder, manifest, trust_store)
        if store_class(manifest.store).needs_reader_lock(manifest.store):  # engine owns its files
            lock = IndexLock(folder, exclusive=False).acquire()
        index = _open_unlocked(folder, manifest, cls or Index)
    except IndexBusyError:
        raise
    except Exception as exc:
        if lock is not None:
            lock.release()
        if is_being_written(folder):
            raise IndexBusyError(
                f"{folder}: the index is being written by another process and could not be read "
                f"meanwhile ({exc}); retry when the ingest finishes."
            ) from exc
        raise
    index._lock = lock
    if manifest.calibration_missing:  # a run stopped before calibrating (or is still running)
        log.warning("%s: the recipe %s calibrates its rescoring depth when the run finishes, but no "
                    "depth is recorded, so searches do not rescore; rerun the same ingest / migrate "
                    "command to finish it (it adds nothing and calibrates).", folder, manifest.recipe)
    return index


def _open_unlocked(folder: Path, manifest: Manifest, cls: type[Index]) -> Index:
    from slimvec.connectors import make_store

    refuse_links_inside(folder)
    verify_index_files(folder, manifest)
    # the reducer's saved config, checked without loading it (scikit-learn): info, get, delete,
    # update and scroll never transform a vector (issue 40 item 2)
    config = check_artifact(folder / REDUCER_DIR, kind="slimvec-reducer")
    fitted = config.get("fitted") or {}
    _check_reducer(folder, manifest, config.get("spec"), fitted.get("n_features_in_", config.get("dim_in")),
                   fitted.get("n_components_", config.get("dim_out")))
    store = make_store(manifest.store, store_folder(folder)).open()
    check_store_dim(folder, store, int(manifest.dim_out))
    return cls(folder, manifest, None, store)


def _check_reducer(folder: Path, manifest: Manifest, spec: Any, dim_in: Any, dim_out: Any) -> None:
    """Refuse a saved reducer that is not the one the manifest records."""
    if dim_in != manifest.dim_in:
        raise DimensionMismatchError(f"reducer input of {folder}", manifest.dim_in, dim_in)
    if spec != manifest.reducer:  # a hand edit: info and searches would disagree
        raise PersistenceError(
            f"{folder}: the manifest says reducer {manifest.reducer!r:.80} but the saved reducer "
            f"is {spec!r}. The manifest was edited or mixed with another index's files; "
            "restore it from a backup or rebuild the index.")
    if dim_out != manifest.dim_out:
        raise DimensionMismatchError(f"reducer output vs stored vectors of {folder}",
                                     manifest.dim_out, dim_out)
