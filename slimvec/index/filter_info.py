"""What an index's ``info()`` says of its filters (:func:`filter_info`)."""

from __future__ import annotations

from typing import Any

from slimvec.index.lifecycle import PAYLOAD_INDEX_KEY, scan_limit
from slimvec.index.search_costs import planner_info

__all__ = ["filter_info"]


def filter_info(index: Any) -> dict[str, Any]:
    """What ``info()`` shows of an index's filters: the declared payload indexes (and their RAM
    by the planner's model), the fields held in memory, the fields filters read without an index
    (slow: declare them with ``--payload-index``), the planner's recorded costs and the last
    filtered search's plan."""
    from slimvec.planner.payload_sizing import payload_index_bytes

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
