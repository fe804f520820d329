"""The store contract shared by Qdrant Edge, Qdrant (qdrant-client), FAISS and hnswlib.

Every store speaks the same conventions, whatever its backend returns:

- ids are stable non-negative 64-bit integers (see :func:`slimvec.ids.doc_id`);
- :meth:`VectorStore.search` returns a :class:`SearchResult` with ``ids`` (n, k) int64 padded with
  ``-1`` and ``scores`` (n, k) float32 where higher is always closer (cosine / inner product
  similarity; negated squared distance for ``l2``), padded with ``-inf``;
- :meth:`VectorStore.upsert` with an existing id overwrites (no duplicates);
- :meth:`VectorStore.size_bytes` is allocated bytes on disk (``st_blocks * 512``) once persisted;
- a ``k`` (or a number of rescoring candidates) above :data:`MAX_PADDED_K` is first capped at the
  store's size (``search(q, 10**9)`` on 500 vectors costs ``search(q, 500)``, allocating no
  gigabytes); ``k = 0`` gives an (n, 0) result, a negative ``k`` a ConfigError.

What differs between stores is declared on the class (like the reducers' ``has_inverse``): its
class attributes (``snapshot_files``, ``keeps_full_vectors``, ``spec_arg``, ``default_arg``...) and
class methods (``needs_reader_lock``, ``file_component``), so no code outside branches on a name.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from slimvec.connectors.options import check_options
from slimvec.errors import ConfigError, DimensionMismatchError, StoreError
from slimvec.ids import source_ids_of
from slimvec.specs import Spec, parse_spec

__all__ = ["SearchResult", "VectorStore", "METRICS", "META_FILE", "MAX_PADDED_K", "check_vectors", "check_k"]

METRICS = ("cosine", "ip", "l2")
#: dimension, metric and options of an on-disk store, next to its data
META_FILE = "slimvec_store.json"
#: results are padded to k columns up to this k; a larger k is capped at the store's size first
MAX_PADDED_K = 1024


@dataclass
class SearchResult:
    """Search output of every store.

    Attributes
    ----------
    ids : ndarray of int64, shape (n_queries, k)
        Store ids, ``-1`` where fewer than k results exist (``store_ids`` too).
    scores : ndarray of float32, shape (n_queries, k)
        Higher is closer; ``-inf`` in padded slots.
    source_ids : list of lists
        The user's ids (``Index.search``, ``slimvec.Client``): :func:`slimvec.ids.source_ids_of`.
    """

    ids: np.ndarray
    scores: np.ndarray
    lookup: Callable[[list[int]], list[Any]] | None = field(default=None, repr=False, compare=False)
    store_ids = property(lambda self: self.ids, doc="The store ids (``ids``).")
    source_ids = property(lambda self: source_ids_of(self.ids, self.lookup), doc="The user's ids.")

    @classmethod
    def empty(cls, n: int, k: int) -> SearchResult:
        """All-padding result."""
        return cls(np.full((n, k), -1, dtype=np.int64), np.full((n, k), -np.inf, dtype=np.float32))

    def __len__(self) -> int:
        return int(self.ids.shape[0])


def check_vectors(vectors: Any, dim: int, what: str = "vectors") -> np.ndarray:
    """Return ``vectors`` as float32 (n, dim), raising on a wrong dimension."""
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ConfigError(f"{what} must be 2-D (n, dim), got shape {arr.shape}.")
    if arr.shape[1] != dim:
        raise DimensionMismatchError(f"{what} for this store", dim, arr.shape[1])
    return np.ascontiguousarray(arr)


def check_k(k: Any, what: str = "k") -> int:
    """``k`` as a non-negative int, or a :class:`ConfigError` that says what was expected.

    Stores then cap it at their size (:meth:`VectorStore.count`) before allocating anything.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        try:
            as_float = float(k)
        except (TypeError, ValueError):
            as_float = float("nan")
        if not as_float.is_integer():
            raise ConfigError(f"{what} must be a whole number of results, got {k!r}.")
        k = int(as_float)
    if int(k) < 0:
        raise ConfigError(f"{what} must be 0 or more (results per query), got {int(k)}.")
    return int(k)


class VectorStore(abc.ABC):
    """Abstract vector store.

    Construction only records the location and options; :meth:`create` makes a new empty store
    and :meth:`open` opens an existing one. Stores are context managers.

    Parameters
    ----------
    location : str or path
        Folder (embedded stores) or URL (remote Qdrant).
    **options
        Store-specific options from the spec string.
    """

    #: spec name (``qdrant-edge``, ``qdrant``, ``faiss``, ``hnsw``)
    name: ClassVar[str] = ""
    #: True when the store keeps its data under ``location`` on local disk
    local: ClassVar[bool] = True
    #: what the bare argument of a spec (``name:ARG``) sets: ``"location"`` (a folder or URL),
    #: the name of an option (FAISS: ``"factory"``), or ``None`` when the store takes none
    spec_arg: ClassVar[str | None] = "location"
    #: the bare argument may contain commas (FAISS factory strings such as ``IVF256,PQ16``)
    spec_arg_has_commas: ClassVar[bool] = False
    #: the bare argument recorded in canonical specs when a spec gives none (FAISS: ``HNSW32``)
    default_arg: ClassVar[str | None] = None
    #: files of the store folder (glob patterns) that are replaced whole by an atomic rename at
    #: each flush and left untouched by readers, so a completed index can record and check their
    #: SHA-256 (FAISS, hnswlib). Empty for engines that rewrite their files in place (Qdrant).
    snapshot_files: ClassVar[tuple[str, ...]] = ()
    #: True when the store can keep float32 full vectors itself (a second, named vector per
    #: point) and answer :meth:`search_rescored` from them (Qdrant); otherwise full vectors go to
    #: the memory-mapped side file (:class:`slimvec.connectors.fullvectors.FullVectors`)
    keeps_full_vectors: ClassVar[bool] = False
    #: size components (see :meth:`file_component`) the engine holds in RAM while serving; empty
    #: when there is no local size model (a remote server)
    resident_components: ClassVar[frozenset[str]] = frozenset()
    #: True when a store opened for serving keeps a Python dict id -> position in RAM, counted by
    #: sizing (FAISS builds its map only when written to)
    python_id_map: ClassVar[bool] = False
    #: ``"module:Class"`` of the :class:`~slimvec.connectors.reading.VectorSource` that reads an
    #: existing folder or file of this store (``slimvec migrate --from NAME:...``); resolved by
    #: :func:`slimvec.connectors.store_reader` (a string, so the store module does not import it)
    reader: ClassVar[str | None] = None
    #: the store's options with their defaults, and their range rules (``connectors.options``):
    #: search parameters are checked against them before :meth:`_search`
    option_defaults: ClassVar[Mapping[str, Any]] = {}
    option_rules: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, location: str | os.PathLike[str], **options: Any) -> None:
        self.location = str(location)
        self.options = dict(options)
        self.dim: int | None = None
        self.metric: str = "cosine"

    # ---------------------------------------------------------- capabilities
    @classmethod
    def needs_reader_lock(cls, spec: str | Spec) -> bool:
        """True when a reader cannot open a store of ``spec`` while a writer has it: the engine takes
        its files (Qdrant Edge, qdrant-client local mode), so readers take the shared index lock."""
        return False

    @classmethod
    def file_component(cls, path: str | os.PathLike[str]) -> str:
        """The size component a file of the store folder belongs to (``path`` relative to it).

        ``meta`` and ``payloads`` for every store; then store-specific ones (``index``, ``ids``,
        ``vectors``, ``quantized``, ``links``, ``id_tracker``, ``payload``, ``wal``) or ``other``.
        Used by :mod:`slimvec.planner.sizing`.
        """
        name = Path(path).name
        if name == META_FILE:
            return "meta"
        if name.startswith("payloads.sqlite"):
            return "payloads"
        return cls._component(Path(path).as_posix())

    @classmethod
    def _component(cls, rel: str) -> str:
        """Store-specific part of :meth:`file_component` (``rel`` uses ``/``)."""
        return "other"

    @classmethod
    def quantization_label(cls, arg: str | None, options: Mapping[str, Any]) -> str:
        """What the store keeps of each vector, as a short label (``float32``, ``sq8``, ``pq``...).

        ``arg`` and ``options`` are a parsed spec's argument and options. The default reads a
        ``quant`` option (Qdrant's); stores whose quantization lives elsewhere override it.
        """
        return str(options.get("quant", "float32"))

    @classmethod
    def search_growth(cls, arg: str | None, options: Mapping[str, Any]) -> str:
        """How one query's latency grows with the number of vectors N: ``"linear"`` (a scan of
        every vector, or of a fixed share of them as IVF's nprobe / nlist) or ``"graph"`` (a
        proximity graph: sub-linear, a curve that must be measured; the default). Planners scale
        a linear latency with N and never extrapolate a graph's (benchmarks.latency)."""
        return "graph"

    @classmethod
    def min_train_vectors(cls, arg: str | None, options: Mapping[str, Any]) -> int:
        """Fewest vectors a store of this spec can be built from (trained quantizers need some;
        default 0). Size models (:mod:`slimvec.planner.sizing`) build above it."""
        return 0

    @classmethod
    def dim_problem(cls, arg: str | None, options: Mapping[str, Any], dim: int) -> str | None:
        """Why a store of this spec cannot hold ``dim``-dimensional vectors, or None if it can.

        ``arg`` and ``options`` are a parsed spec's. Lets a grid (``slimvec tune``) leave out
        combinations such as a FAISS ``PQ32`` after a 48-dimensional reducer before building
        anything. The default accepts every dimension.
        """
        return None

    @staticmethod
    def _spec_location(spec: str | Spec) -> str | None:
        return (spec if isinstance(spec, Spec) else parse_spec(spec)).arg

    # -------------------------------------------------------------- lifecycle
    @abc.abstractmethod
    def create(self, dim: int, metric: str = "cosine") -> VectorStore:
        """Create a new, empty store of vectors of ``dim`` dimensions; returns self."""

    @abc.abstractmethod
    def open(self) -> VectorStore:
        """Open an existing store at ``location``; returns self."""

    # ------------------------------------------------- template methods (issue 24 item 6)
    def upsert(self, ids: Sequence[int] | np.ndarray, vectors: np.ndarray,
               payloads: Sequence[Mapping[str, Any] | None] | None = None,
               full: np.ndarray | None = None) -> None:
        """Insert or overwrite vectors (and payloads) by id.

        The checks every store shares run here (the store is open, ids are non-negative
        integers, vectors are (n, dim), one payload per id and each a mapping or ``None``, full
        vectors of the right dimension when the store keeps them); then the store's
        :meth:`_upsert` writes. A refused batch writes nothing.

        Parameters
        ----------
        ids : sequence of int
            Store ids (non-negative 64-bit).
        vectors : ndarray (n, dim)
            Vectors of the store's dimension.
        payloads : sequence of dict or None, optional
            One per id (``None``: no payload).
        full : ndarray (n, full_dim), optional
            Full vectors, required when :attr:`keeps_full` (ignored otherwise).

        Raises
        ------
        StoreError
            Not open, ``ids`` / ``vectors`` / ``payloads`` of different lengths, a payload that
            is not a mapping, or full vectors missing.
        DimensionMismatchError
            Vectors (or full vectors) of another dimension.
        """
        self._writable()
        ids_arr = self._as_ids(ids)
        vecs = check_vectors(vectors, self.dim or 0)
        if len(ids_arr) != len(vecs):
            raise StoreError(f"upsert got {len(ids_arr)} ids for {len(vecs)} vectors.")
        pl = None if payloads is None else self._check_payloads(ids_arr, payloads)
        if self.keeps_full:
            if full is None:
                raise StoreError(f"The {self.name} store at {self.location} keeps full vectors: "
                                 "pass upsert(..., full=original_vectors).")
            full = check_vectors(full, int(self.options.get("full_dim") or 0), "full vectors")
            if len(full) != len(ids_arr):
                raise StoreError(f"upsert got {len(ids_arr)} ids for {len(full)} full vectors.")
        else:
            full = None
        self._upsert(ids_arr, vecs, pl, full)

    @staticmethod
    def _check_payloads(ids: np.ndarray, payloads: Sequence[Mapping[str, Any] | None]
                        ) -> list[dict[str, Any] | None]:
        """One payload per id, each a mapping (or ``None``), as a list of dicts."""
        pl = list(payloads)
        if len(pl) != len(ids):
            raise StoreError(f"upsert got {len(ids)} ids for {len(pl)} payloads: give one payload "
                             "per id (None for none), or no payloads at all.")
        for i, p in zip(ids.tolist(), pl):
            if p is not None and not isinstance(p, Mapping):
                raise StoreError(f"The payload of id {i} is a {type(p).__name__}, expected a JSON "
                                 "object (a dict of field -> value) or None; nothing of this batch "
                                 "was written. Wrap the value, e.g. {\"value\": ...}.")
        return [None if p is None else dict(p) for p in pl]

    @abc.abstractmethod
    def _upsert(self, ids: np.ndarray, vectors: np.ndarray,
                payloads: list[dict[str, Any] | None] | None, full: np.ndarray | None) -> None:
        """Write a checked batch (see :meth:`upsert`): ``ids`` int64 (n,), ``vectors`` float32
        (n, dim), ``payloads`` one per id or ``None``, ``full`` (n, full_dim) only when
        :attr:`keeps_full`."""

    def search(self, queries: np.ndarray, k: int, filter: Any = None, **params: Any) -> SearchResult:
        """k nearest stored vectors of each query (see module docstring for conventions).

        The checks every store shares run here (open, search parameters known and in range, queries of
        the store's dimension, ``k`` a count, capped above :data:`MAX_PADDED_K`; ``k = 0``: an empty (n, 0)), then :meth:`_search`.

        Parameters
        ----------
        queries : ndarray (n, dim)
        k : int
            Results per query.
        filter : Filter or array of ids, optional
            Only ids whose payload matches (a :class:`slimvec.filters.Filter`) or among the ids.
        **params
            Search-time options of the store (``ef``, ``nprobe``...).

        Raises
        ------
        ConfigError
            A negative or non-integer ``k``, an unknown or out-of-range parameter.
        """
        self._require()
        self._check_search_params(params)
        qs = check_vectors(queries, self.dim or 0, "queries")
        k = self._capped(k)
        if k == 0:
            return SearchResult.empty(len(qs), 0)
        return self._search(qs, k, filter, params)

    def _check_search_params(self, params: Mapping[str, Any]) -> None:
        """Refuse unknown or out-of-range search parameters (the store's option rules)."""
        if params:  # none given (most searches): nothing to check, no dictionaries built per query
            check_options(self.name, dict(params), dict(self.option_defaults), self.option_rules)

    @abc.abstractmethod
    def _search(self, queries: np.ndarray, k: int, filter: Any, params: dict[str, Any]) -> SearchResult:
        """Search checked ``queries`` (float32 (n, dim)) for ``k`` >= 1 results (see :meth:`search`)."""

    def _require(self) -> Any:
        """The open engine object; stores raise a :class:`StoreError` when not open."""
        raise StoreError(f"The {self.name} store at {self.location} is not open: call create() or open().")

    def _writable(self) -> Any:
        """:meth:`upsert`'s open check: :meth:`_require` (FAISS leaves its graph queue waiting)."""
        return self._require()

    @property
    def keeps_full(self) -> bool:
        """True when this open store holds full vectors for :meth:`search_rescored`."""
        return False

    def search_rescored(self, queries: np.ndarray, full_queries: np.ndarray, k: int,
                        candidates: int, **params: Any) -> SearchResult:
        """Two-stage search: ``candidates`` nearest by the stored vectors, re-ranked by the full
        vectors the store keeps (only when :attr:`keeps_full`; see ``keeps_full_vectors``).

        Parameters
        ----------
        queries : ndarray (n, dim)
            Reduced queries.
        full_queries : ndarray (n, full_dim)
            The same queries at full dimension.
        k, candidates : int
            Results per query, and candidates fetched before re-ranking (both capped at the
            number of stored vectors).

        Raises
        ------
        StoreError
            The store holds no full vectors.
        """
        raise StoreError(f"The {self.name} store at {self.location} holds no full vectors, so it "
                         "cannot rescore by itself; keep them in the side file (slimvec.connectors."
                         "fullvectors.FullVectors) or rebuild with --keep-full float32 on Qdrant.")

    @abc.abstractmethod
    def count(self) -> int:
        """Number of stored vectors."""

    @abc.abstractmethod
    def get_payloads(self, ids: Sequence[int]) -> list[dict[str, Any] | None]:
        """Payloads of ``ids`` in order (``None`` for unknown ids or ``-1``)."""

    # ---------------------------------------------- delete / filter / payload update (issue 25)
    def ids(self) -> np.ndarray:
        """Every live (not deleted) store id, sorted ascending (int64)."""
        raise StoreError(f"The {self.name} store cannot list its ids.")

    def filter_ids(self, flt: Any = None) -> np.ndarray:
        """Live ids whose payload matches ``flt`` (a :class:`slimvec.filters.Filter`), sorted.

        The default evaluates :meth:`~slimvec.filters.Filter.matches` over :meth:`ids` and
        :meth:`get_payloads`; stores with a native filter override it.
        """
        live = self.ids()
        if flt is None:
            return live
        keep: list[int] = []
        for start in range(0, len(live), 1000):
            chunk = live[start:start + 1000].tolist()
            keep.extend(i for i, p in zip(chunk, self.get_payloads(chunk)) if flt.matches(i, p))
        return np.asarray(keep, dtype=np.int64)

    def plan_filter(self, flt: Any) -> tuple[int, Any]:
        """(matches of ``flt``, the filter :meth:`search` takes): the ids, or a native count and ``flt``."""
        return len(allowed := self.filter_ids(flt)), allowed

    def delete(self, ids: Sequence[int] | np.ndarray) -> int:
        """Remove ``ids`` (vectors and payloads); unknown ids are ignored. Durable at :meth:`flush`.

        Returns
        -------
        int
            How many of ``ids`` were stored (and are now removed).
        """
        raise StoreError(f"The {self.name} store cannot delete.")

    def set_payload(self, ids: Sequence[int] | np.ndarray, fields: Mapping[str, Any],
                    overwrite: bool = False) -> int:
        """Merge ``fields`` into the payloads of the stored ``ids`` (``overwrite``: replace each
        payload by ``fields``). Unknown ids are ignored. Durable at :meth:`flush`.

        Returns
        -------
        int
            How many stored ids were updated.
        """
        raise StoreError(f"The {self.name} store cannot update payloads.")

    def delete_payload_keys(self, ids: Sequence[int] | np.ndarray, keys: Sequence[str]) -> int:
        """Remove top-level payload ``keys`` of the stored ``ids``; returns how many ids are stored."""
        raise StoreError(f"The {self.name} store cannot update payloads.")

    def create_payload_index(self, field: str, kind: str) -> bool:
        """Index payload ``field`` (``keyword``, ``integer``, ``float`` or ``bool``) where the
        store has payload indexes (Qdrant's, or an SQLite expression index in the payload table
        of FAISS and hnswlib); returns False where none is built (filters then scan)."""
        return False

    def _known(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The unique ``ids`` that are stored and live (sorted)."""
        wanted = np.unique(self._as_ids(ids))
        return wanted[np.isin(wanted, self.ids(), assume_unique=True)] if len(wanted) else wanted

    def dead_positions(self) -> int:
        """Positions the store keeps for deleted or replaced vectors that only a rebuild sheds
        (FAISS: tombstones excluded at search time); 0 for stores that reclaim space themselves."""
        return 0

    def finalize(self) -> None:
        """Build indexes after a bulk load (Qdrant Edge ``optimize()``); default no-op."""

    @abc.abstractmethod
    def flush(self) -> None:
        """Make everything upserted so far durable on disk (or acknowledged by the server)."""

    def size_bytes(self) -> int:
        """Allocated bytes on disk of the store's files (0 for remote stores)."""
        from slimvec.persistence import allocated_bytes

        return allocated_bytes(self.location) if self.local else 0

    @abc.abstractmethod
    def close(self) -> None:
        """Flush and release resources."""

    def describe(self) -> dict[str, Any]:
        """JSON-serialisable description recorded in the index manifest."""
        return {"name": self.name, "location": self.location, "options": self.options,
                "dim": self.dim, "metric": self.metric}

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------- helpers
    def _check_metric(self, metric: str) -> str:
        if metric not in METRICS:
            raise ConfigError(f"Unknown metric {metric!r}. Known: {', '.join(METRICS)}.")
        return metric

    def _capped(self, k: Any, what: str = "k") -> int:
        """``k`` checked (:func:`check_k`) and, above :data:`MAX_PADDED_K`, capped at :meth:`count`.

        Small ``k`` is left alone (results are padded to it) so a search costs no count request.
        """
        k = check_k(k, what)
        return min(k, self.count()) if k > MAX_PADDED_K else k

    @staticmethod
    def _as_ids(ids: Sequence[int] | np.ndarray) -> np.ndarray:
        arr = np.asarray(ids, dtype=np.int64).ravel()
        if (arr < 0).any():
            raise ConfigError("Store ids must be non-negative 64-bit integers (-1 means 'none').")
        return arr

    @staticmethod
    def _folder(location: str) -> Path:
        return Path(location).expanduser()
