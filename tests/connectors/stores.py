"""The store contract fixtures, one entry per registered store (issue 24 item 6).

The store tests take their store lists from here and from the registry
(:func:`slimvec.connectors.store_names`), as the reducer tests take theirs from the reducer
registry: a new store is tested by adding its specs below, and
``tests/connectors/test_registry_driven.py`` fails while a registered store has none.
"""

from __future__ import annotations

from slimvec.connectors import store_class, store_names

#: store name -> the specs its contract tests run on; the first is the store's plain spec, the
#: others variants whose code paths differ (FAISS: exact, trained).
CONTRACT_SPECS: dict[str, tuple[str, ...]] = {
    "qdrant-edge": ("qdrant-edge",),
    "qdrant": ("qdrant",),
    "faiss": ("faiss", "faiss:Flat", "faiss:IVF8,Flat,train_size=400"),
    "hnsw": ("hnsw",),
}
#: stores whose build is slow on a loaded machine (qdrant-client local mode: ~20 s for 600
#: points); tests that build many small stores leave them out with :func:`fast_specs`
SLOW = frozenset({"qdrant"})


def store_specs() -> list[str]:
    """The plain spec of every registered store (its name when it has no contract entry, so the
    store is still run and the coverage test names what is missing)."""
    return [CONTRACT_SPECS.get(name, (name,))[0] for name in store_names()]


def variant_specs() -> list[str]:
    """Every contract spec of every registered store, variants included."""
    return [spec for name in store_names() for spec in CONTRACT_SPECS.get(name, (name,))]


def fast_specs() -> list[str]:
    """The plain spec of every registered store that builds in a fraction of a second."""
    return [spec for spec in store_specs() if spec.partition(":")[0] not in SLOW]


def snapshot_specs() -> list[str]:
    """Plain specs of the stores whose files are replaced whole at each flush (FAISS, hnswlib)."""
    return [spec for spec in store_specs() if store_class(spec).snapshot_files]


def payload_table_specs() -> list[str]:
    """Plain specs of the stores whose payloads live in the SQLite payload table (filters run
    as SQL there: FAISS, hnswlib)."""
    from slimvec.connectors.payloads import PayloadTableStore

    return [spec for spec in store_specs() if issubclass(store_class(spec), PayloadTableStore)]


def with_option(spec: str, option: str) -> str:
    """``spec`` with one more ``key=value`` option (``hnsw`` -> ``hnsw:ef=128``)."""
    return f"{spec},{option}" if ":" in spec else f"{spec}:{option}"


def tuned_specs(**options: object) -> list[str]:
    """:func:`fast_specs` with each of ``options`` set where the store has that option
    (``tuned_specs(ef=128)``: a wider search beam on every store that has one)."""
    out = []
    for spec in fast_specs():
        known = store_class(spec).option_defaults
        for key, value in options.items():
            if key in known:
                spec = with_option(spec, f"{key}={value}")
        out.append(spec)
    return out


def full_vector_placements() -> list[str]:
    """One fast store of each place full vectors are kept: the side file (``keeps_full_vectors``
    False) and the store itself (True)."""
    return [next(s for s in fast_specs() if store_class(s).keeps_full_vectors is placement)
            for placement in (False, True)]
