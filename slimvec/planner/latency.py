"""Search latency at a corpus size other than the one it was measured at (issue 27 item 2).

A p50 measured on 2,910 vectors says little about 10M: a flat scan grows linearly with N, an IVF
index scans nprobe / nlist of N (linear at a fixed nlist), a proximity graph grows sub-linearly
along a curve that has to be measured. So::

    latency_at("faiss:SQ8", 0.069, 2910, 10_000_000)   # (237.1, "scaled linearly from n = 2,910 (scan)")
    latency_at("hnsw", 0.05, 2910, 10_000_000)          # (None, "measured at n = 2,910; ... not extrapolated")

Every answer says where it was measured. The growth of a store is its class's
:meth:`~slimvec.connectors.base.VectorStore.search_growth`.
"""

from __future__ import annotations

from slimvec.errors import SlimvecError

__all__ = ["latency_at", "GRAPH_SLACK"]

#: a graph's latency is quoted as measured up to this many times the measured size, refused beyond
GRAPH_SLACK = 2.0


def latency_at(store: str, p50_ms: float | None, n_measured: int | None, docs: int) -> tuple[float | None, str]:
    """p50 latency at ``docs`` vectors from one measured at ``n_measured``, and how it was had.

    Returns
    -------
    p50 : float or None
        Linear stores: ``p50_ms × docs / n_measured`` (never below the measurement). Graphs: the
        measurement itself up to :data:`GRAPH_SLACK` × ``n_measured``, ``None`` beyond (refused).
        ``None`` when nothing was measured.
    note : str
        ``measured at n = ...`` and what was done with it.
    """
    if p50_ms is None:
        return None, "not measured"
    if not n_measured:
        return None, "measured at an unknown n: not carried to another size"
    at = f"measured at n = {int(n_measured):,}"
    try:
        from slimvec.connectors import parse_store_spec, store_class

        parsed = parse_store_spec(store)
        growth = store_class(parsed).search_growth(parsed.arg, dict(parsed.options or {}))
    except SlimvecError:
        growth = "graph"
    if growth == "linear":
        if docs <= n_measured:
            return float(p50_ms), at
        return float(p50_ms) * docs / n_measured, f"{at}, scaled linearly to {docs:,} (a scan grows with N)"
    if docs <= GRAPH_SLACK * n_measured:
        return float(p50_ms), at
    return None, (f"{at}; a graph's latency grows along a curve that was not measured this far: "
                  f"not extrapolated to {docs:,} (bench at a larger size)")
