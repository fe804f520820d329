"""Vector stores behind one contract (:class:`~slimvec.connectors.base.VectorStore`).

=============================  ==========================================================
spec                           store
=============================  ==========================================================
``qdrant-edge[:PATH]``         Qdrant Edge in-process (the default)
``qdrant[:URL|PATH|:memory:]`` qdrant-client: server/cluster (``QDRANT_API_KEY``) or local
``faiss[:FACTORY]``            FAISS ``index_factory`` (default ``HNSW32``)
``hnsw[:M=16,...]``            hnswlib
=============================  ==========================================================

A spec without a location keeps the data in the folder given to :func:`make_store` (an index's
``store/`` folder).

What differs between stores (snapshot files to checksum, reader locking, full vectors kept in
the store, size components...) is declared on the store classes: ask
``store_class(spec).snapshot_files`` and the like instead of comparing store names (see
:class:`~slimvec.connectors.base.VectorStore`).
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

from slimvec.connectors.base import SearchResult, VectorStore
from slimvec.errors import ConfigError
from slimvec.specs import Spec, format_spec, parse_spec

if TYPE_CHECKING:
    from slimvec.connectors.reading import VectorSource

__all__ = ["make_store", "store_names", "store_class", "store_reader", "canonical_store_spec", "parse_store_spec",
           "store_dim_problem", "store_min_train_vectors",
           "SearchResult", "VectorStore"]

STORES: dict[str, str] = {
    "qdrant-edge": "slimvec.connectors.qdrant_edge:QdrantEdgeStore",
    "qdrant": "slimvec.connectors.qdrant:QdrantStore",
    "faiss": "slimvec.connectors.faiss_store:FaissStore",
    "hnsw": "slimvec.connectors.hnsw_store:HnswStore",
}


def store_names() -> list[str]:
    """Spec names of the stores."""
    return list(STORES)


def store_class(spec: str | Spec) -> type[VectorStore]:
    """The store class of a spec (``"faiss:IVF256,PQ16"``, ``"hnsw"``, a parsed :class:`Spec`).

    Its class attributes say what the store can do (see
    :class:`~slimvec.connectors.base.VectorStore`); nothing is opened or validated beyond the name.

    Raises
    ------
    ConfigError
        Unknown store.
    """
    text = spec.name if isinstance(spec, Spec) else str(spec)
    name = text.partition(":")[0].strip().lower()
    target = STORES.get(name)
    if target is None:
        raise ConfigError(f"Unknown store {name!r} in {str(spec)!r}. Known: {', '.join(STORES)}.")
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)


def store_reader(spec: str | Spec) -> type[VectorSource]:
    """The source class that reads an existing folder or file of a store (``slimvec migrate
    --from NAME:...``), the store's ``reader`` capability (:attr:`VectorStore.reader`).

    Raises
    ------
    ConfigError
        Unknown store, or a store that declares no reader.
    """
    klass = store_class(spec)
    if not klass.reader:
        raise ConfigError(f"The {klass.name} store declares no reader: its folders cannot be read "
                          "by slimvec migrate. Export its vectors to .npy or Parquet instead.")
    module, _, name = klass.reader.partition(":")
    return getattr(importlib.import_module(module), name)


def parse_store_spec(spec: str | Spec) -> Spec:
    """Parse a store spec; FAISS factory strings may contain commas (``faiss:IVF256,PQ16``)."""
    if isinstance(spec, Spec):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        return parse_spec(spec)  # raises its "Empty spec" error
    text = spec.strip()
    return parse_spec(text, arg_may_contain_commas=store_class(text).spec_arg_has_commas)


def make_store(spec: str | Spec, default_location: str | os.PathLike[str]) -> VectorStore:
    """Build an unopened store from its spec; call ``.create(dim, metric)`` or ``.open()`` next.

    Parameters
    ----------
    spec : str or Spec
        ``qdrant-edge``, ``qdrant:http://host:6333``, ``faiss:IVF256,PQ16,nprobe=8``, ``hnsw:M=32`` ...
    default_location : path
        Where the data goes when the spec names no location (FAISS and hnswlib always use it).

    Raises
    ------
    ConfigError
        Unknown store or option.
    """
    parsed = parse_store_spec(spec)
    klass = store_class(parsed)
    options: dict[str, Any] = dict(parsed.options)
    location: Any = default_location
    if parsed.arg:
        if klass.spec_arg is None:
            raise ConfigError(f"Store spec {str(parsed)!r}: {parsed.name} keeps its data in the index "
                              f"folder and takes options only, e.g. {parsed.name}:ef=64.")
        if klass.spec_arg == "location":
            location = parsed.arg
        else:
            options[klass.spec_arg] = parsed.arg
    return klass(str(location), **options)


def canonical_store_spec(spec: str | Spec) -> str:
    """The spec as recorded in manifests and results: lower-case name, options sorted.

    Validates the options (unknown ones raise :class:`ConfigError`) without touching any data.
    """
    parsed = parse_store_spec(spec)
    make_store(parsed, ".")  # validates the options
    arg = parsed.arg or store_class(parsed).default_arg
    return format_spec(parsed.name, arg, parsed.options)


def store_min_train_vectors(spec: str | Spec) -> int:
    """Fewest vectors a store of ``spec`` can be built from; see
    :meth:`VectorStore.min_train_vectors`."""
    parsed = parse_store_spec(spec)
    return store_class(parsed).min_train_vectors(parsed.arg, parsed.options)


def store_dim_problem(spec: str | Spec, dim: int) -> str | None:
    """Why a store of ``spec`` cannot hold ``dim``-dimensional vectors (None: it can); see
    :meth:`VectorStore.dim_problem`."""
    parsed = parse_store_spec(spec)
    return store_class(parsed).dim_problem(parsed.arg, parsed.options, int(dim))
