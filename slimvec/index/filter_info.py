"""What an index's ``info()`` says of its filters (:func:`filter_info`), and its payload indexes'
size model, which ``slimvec plan`` predicts with too (:func:`payload_index_bytes`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slimvec.errors import ConfigError
from slimvec.index.lifecycle import PAYLOAD_INDEX_KEY, scan_limit
from slimvec.index.search_costs import planner_info

__all__ = ["PAYLOAD_INDEX_BYTES", "filter_info", "payload_index_bytes"]

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
            "payload_indexes_ram_predicted": None if table is None or not declared else
            int(payload_index_bytes(declared, int(index.store.count()))["ram"]),
            "filter_planner": planner_info(index.manifest.search_costs, scan_limit(index, 10, depth)),
            "payload_indexes_in_memory": table.indexed_fields() if table is not None else [],
            "filter_fields_unindexed": sorted(table.unindexed) if table is not None else [],
            "last_filter_plan": index.last_filter_plan}


def payload_index_bytes(fields: Mapping[str, str], docs: int,
                        measured: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Predicted RAM and disk of the payload indexes of ``fields`` (field -> kind) at ``docs``.

    ``measured`` (:func:`~slimvec.planner.payload_sizing.fit_on_payloads`: all the fields
    together, on the user's rows) replaces the sum of the shipped per-kind constants. Returns
    ``{"ram", "disk", "source", "ram_per_point"}``.
    """
    for field, kind in fields.items():
        if kind not in PAYLOAD_INDEX_BYTES:
            raise ConfigError(f"Payload index {field}:{kind}: expected KIND one of {', '.join(PAYLOAD_INDEX_BYTES)}.")
    if measured is not None:
        c, source = dict(measured), "measured on --corpus rows"
    else:
        c = {k: sum(PAYLOAD_INDEX_BYTES[kind][k] for kind in fields.values())
             for k in ("ram_fixed", "ram_per_point", "disk_per_point")}
        source = "shipped per-kind constants (synthetic values; --corpus measures yours)"
    ram = (c["ram_fixed"] + c["ram_per_point"] * docs) if fields else 0.0
    return {"ram": ram, "disk": c["disk_per_point"] * docs, "source": source,
            "ram_per_point": c["ram_per_point"] if fields else 0.0}
