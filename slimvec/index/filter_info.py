"""What an index's ``info()`` says of its filters (:func:`filter_info`), and its payload indexes'
size model, which ``slimvec plan`` predicts with too (:func:`payload_index_bytes`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slimvec.errors import ConfigError
from slimvec.index.lifecycle import PAYLOAD_INDEX_KEY, scan_limit
from slimvec.index.search_costs import planner_info

__all__ = ["PAYLOAD_INDEX_BYTES", "QDRANT_PAYLOAD_INDEX_BYTES", "filter_info", "payload_index_bytes"]

#: kind -> fitted constants (bytes): RAM (``ram_fixed`` + n · ``ram_per_point``, VmRSS growth at
#: the first filtered search) and disk (``disk_per_point``, the SQLite expression index).
#: Measured by ``python -m slimvec.planner.payload_sizing`` (20,000 and 100,000 rows of its
#: ``sample_values``, one field each; loaded 2-core machine, 2026-12-02; RSS constants are
#: medians of 3 runs).
PAYLOAD_INDEX_BYTES: dict[str, dict[str, float]] = {
    "keyword": {"ram_fixed": 1181696.0, "ram_per_point": 203.9, "disk_per_point": 19.8},
    "integer": {"ram_fixed": 1769472.0, "ram_per_point": 184.5, "disk_per_point": 9.5},
    "float": {"ram_fixed": 1104896.0, "ram_per_point": 213.2, "disk_per_point": 16.8},
    "bool": {"ram_fixed": 869376.0, "ram_per_point": 142.7, "disk_per_point": 8.7},
    "datetime": {"ram_fixed": 0.0, "ram_per_point": 800.9, "disk_per_point": 29.0},
}
#: the same for a Qdrant store's own payload indexes (``create_field_index``): the VmRSS of a
#: process that opens a Qdrant Edge shard with the index less one that opens it without (Qdrant
#: loads the index as it opens; a bool index is a bitmap below RSS's resolution), and the
#: allocated bytes the index adds (``python -m slimvec.planner.payload_sizing --qdrant``,
#: 20,000 and 100,000 rows of ``sample_values``, 2-core machine at load 1-3, 2026-12-02)
QDRANT_PAYLOAD_INDEX_BYTES: dict[str, dict[str, float]] = {
    "keyword": {"ram_fixed": 4359168.0, "ram_per_point": 105.6, "disk_per_point": 35.7},
    "integer": {"ram_fixed": 4797440.0, "ram_per_point": 165.6, "disk_per_point": 69.1},
    "float": {"ram_fixed": 2032640.0, "ram_per_point": 108.7, "disk_per_point": 40.8},
    "bool": {"ram_fixed": 0.0, "ram_per_point": 0.0, "disk_per_point": 0.8},
    "datetime": {"ram_fixed": 2038784.0, "ram_per_point": 109.4, "disk_per_point": 40.8},
}
#: the sum of per-kind constants over-predicts several fields held together: keyword + datetime +
#: integer over the same 100,000 rows measured 102.1 MB together against 120.8 MB apart
#: (``measure_fields`` on ``sample_values(kind, 100000, seed)``, seeds 1, 2, 3: one field's
#: transient build memory is reused by the next); ``--corpus`` measures them together


def filter_info(index: Any) -> dict[str, Any]:
    """What ``info()`` shows of an index's filters: the declared payload indexes (and their RAM
    by :func:`payload_index_bytes`), the fields held in memory, the fields filters read without an index
    (slow: declare them with ``--payload-index``), the planner's recorded costs and the last
    filtered search's plan."""
    table = getattr(index.store, "_payloads", None)  # FAISS / hnswlib: the payload table's
    depth = index.manifest.rescore.depth if index.manifest.rescore is not None else None
    declared = dict(index.manifest.extra.get(PAYLOAD_INDEX_KEY) or {})
    return {"payload_indexes": declared,  # their RAM from the first filtered search on: plan's model
            "payload_indexes_ram_predicted": None if not declared else int(payload_index_bytes(
                declared, int(index.store.count()), store=index.manifest.store)["ram"]),
            "filter_planner": planner_info(index.manifest.search_costs, scan_limit(index, 10, depth)),
            "payload_indexes_in_memory": table.indexed_fields() if table is not None else [],
            "filter_fields_unindexed": sorted(table.unindexed) if table is not None else [],
            "last_filter_plan": index.last_filter_plan}


def payload_index_bytes(fields: Mapping[str, str], docs: int,
                        measured: Mapping[str, float] | None = None,
                        store: str | None = None) -> dict[str, Any]:
    """Predicted RAM and disk of the payload indexes of ``fields`` (field -> kind) at ``docs``
    behind ``store`` (a store spec; default: a payload-table store, FAISS or hnswlib).

    ``measured`` (:func:`~slimvec.planner.payload_sizing.fit_on_payloads`: all the fields
    together, on the user's rows, in the payload table) replaces the sum of the shipped per-kind
    constants of a payload-table store. A Qdrant store keeps its own payload indexes: its shipped
    constants are :data:`QDRANT_PAYLOAD_INDEX_BYTES`. Returns ``{"ram", "disk", "source",
    "ram_per_point"}``.
    """
    for field, kind in fields.items():
        if kind not in PAYLOAD_INDEX_BYTES:
            raise ConfigError(f"Payload index {field}:{kind}: expected KIND one of {', '.join(PAYLOAD_INDEX_BYTES)}.")
    own = store is not None and not _payload_table_store(store)
    if measured is not None and not own:
        c, source = dict(measured), "measured on --corpus rows"
    else:
        table = QDRANT_PAYLOAD_INDEX_BYTES if own else PAYLOAD_INDEX_BYTES
        c = {k: sum(table[kind][k] for kind in fields.values())
             for k in ("ram_fixed", "ram_per_point", "disk_per_point")}
        source = ("Qdrant's payload index, shipped per-kind constants (synthetic values)" if own else
                  "shipped per-kind constants (synthetic values; --corpus measures yours)")
    ram = (c["ram_fixed"] + c["ram_per_point"] * docs) if fields else 0.0
    return {"ram": ram, "disk": c["disk_per_point"] * docs, "source": source,
            "ram_per_point": c["ram_per_point"] if fields else 0.0}


def _payload_table_store(store: str) -> bool:
    """Whether ``store`` (a spec) keeps payloads in slimvec's payload table (FAISS, hnswlib) rather
    than payload indexes of its own (Qdrant)."""
    from slimvec.connectors import store_class
    from slimvec.connectors.payloads import PayloadTableStore

    return issubclass(store_class(store), PayloadTableStore)
