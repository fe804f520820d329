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
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from slimvec.connectors.base import SearchResult, VectorStore
from slimvec.errors import ConfigError
from slimvec.specs import Spec, format_spec, parse_spec

__all__ = ["make_store", "store_names", "canonical_store_spec", "parse_store_spec",
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


def _store_class(name: str) -> type[VectorStore]:
    target = STORES.get(name)
    if target is None:
        raise ConfigError(f"Unknown store {name!r}. Known: {', '.join(STORES)}.")
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)


def parse_store_spec(spec: str | Spec) -> Spec:
    """Parse a store spec; FAISS factory strings may contain commas (``faiss:IVF256,PQ16``)."""
    if isinstance(spec, Spec):
        return spec
    text = spec.strip()
    parsed = parse_spec(text, arg_may_contain_commas=text.lower().startswith("faiss"))
    if parsed.name not in STORES:
        raise ConfigError(f"Unknown store {parsed.name!r} in {text!r}. Known: {', '.join(STORES)}.")
    return parsed


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
    klass = _store_class(parsed.name)
    options: dict[str, Any] = dict(parsed.options)
    location: Any = default_location
    if parsed.name == "faiss":
        if parsed.arg:
            options["factory"] = parsed.arg
    elif parsed.arg:
        if parsed.name == "hnsw":
            raise ConfigError(f"Store spec {str(parsed)!r}: hnsw takes options only, e.g. hnsw:M=16,ef=64.")
        location = parsed.arg
    return klass(str(location), **options)


def canonical_store_spec(spec: str | Spec) -> str:
    """The spec as recorded in manifests and results: lower-case name, options sorted.

    Validates the options (unknown ones raise :class:`ConfigError`) without touching any data.
    """
    parsed = parse_store_spec(spec)
    make_store(parsed, ".")  # validates the options
    arg = parsed.arg or ("HNSW32" if parsed.name == "faiss" else None)
    return format_spec(parsed.name, arg, parsed.options)
