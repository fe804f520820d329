"""slimvec: fitted dimension reducers in front of vector stores, measured honestly.

>>> import slimvec
>>> idx = slimvec.open("my-index")                 # doctest: +SKIP
>>> hits = idx.search("a man plays a guitar", k=10)  # doctest: +SKIP
"""

from __future__ import annotations

from slimvec._version import __version__
from slimvec.errors import ConfigError, DimensionMismatchError, MissingDependencyError, PersistenceError, SlimvecError, StoreError

__all__ = ["open", "Client", "ConfigError", "DimensionMismatchError", "MissingDependencyError",
           "PersistenceError", "SlimvecError", "StoreError", "__version__"]


def open(folder, *, trust_store=None):  # noqa: A001 - mirrors the familiar open(path)
    """Open an index folder to search it and add to it (:class:`slimvec.ops.local.LocalIndex`);
    see :func:`slimvec.index.folder.open_index`.

    ``trust_store``: the spec or location of an index's external store (``qdrant:URL``), which
    is never contacted just because the index folder names it.
    """
    from slimvec.ops.local import open_local

    return open_local(folder, trust_store=trust_store)


def __getattr__(name):  # lazy: the client needs httpx, the library does not
    if name == "Client":
        from slimvec.client import Client

        return Client
    raise AttributeError(f"module 'slimvec' has no attribute {name!r}")
