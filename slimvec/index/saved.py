"""What an index saved, in the terms a user weighs it by (``slimvec info``, issue 27 item 4).

Bytes per vector against the full encoder vector (float32), the RAM the store needs while serving,
the full-vector side file kept for rescoring (by name), and the rescoring depth as ``×R``. RAM is
not a new formula: it is the allocated bytes of the store files in the components its class holds
in memory (``resident_components`` / ``file_component``, the same split the size models of
:mod:`slimvec.planner.sizing` are fitted on), plus the id lookup rescoring keeps in RAM
(:func:`slimvec.connectors.fullvectors.rescore_bytes_per_vector`); the full vectors themselves are
memory-mapped from disk.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from slimvec.persistence import allocated_bytes

__all__ = ["saved_summary", "saved_lines"]


def _resident_bytes(store: Any, spec: str) -> int | None:
    from slimvec.connectors import store_class

    klass = store_class(spec)
    if not klass.resident_components or not getattr(store, "local", True):
        return None
    root = Path(str(store.location))
    if not root.is_dir():
        return None
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            if klass.file_component(os.path.relpath(path, root)) in klass.resident_components:
                total += allocated_bytes(path)
    return total


def _code_bytes(store_spec: str, dim: int) -> int:
    """Bytes of one vector's code in the store (issue 40 item 9: FAISS quantizers code it; hnswlib
    and Qdrant keep float32 vectors, Qdrant's ``quant`` codes beside them)."""
    from slimvec.connectors import parse_store_spec, store_class
    from slimvec.connectors.faiss_store import FaissStore, code_bytes  # (faiss itself not imported)

    parsed = parse_store_spec(store_spec)
    if store_class(parsed) is FaissStore:
        return code_bytes(str(parsed.arg or FaissStore.default_arg), dim) or dim * 4
    return dim * 4


def saved_summary(idx: Any, count: int, store_bytes: int) -> dict[str, Any]:
    """The ``saved`` fields of :meth:`slimvec.index.folder.Index.info`.

    Parameters
    ----------
    idx : Index
        The open index.
    count : int
        Vectors in the store.
    store_bytes : int
        Allocated bytes of the store.

    Returns
    -------
    dict
        ``full_vector_bytes`` (one ``dim_in`` float32 vector), ``reduced_vector_bytes`` (the
        code one vector takes in the store: 192 B for 384-d 4-bit SQ4 codes; graph and ids apart),
        ``store_bytes_per_vector`` (allocated store bytes / count: codes, graph, ids, WAL),
        ``ram_bytes`` and ``ram_bytes_per_vector`` (store files held in memory plus the full-vector
        id lookup), ``full_file`` / ``full_dtype`` / ``full_bytes`` (the side file rescoring reads,
        or ``in store`` for a Qdrant named vector), ``rescore`` (``"x8"``: k × 8 candidates
        re-ranked by default; None: no re-ranking).
    """
    from slimvec.connectors.fullvectors import rescore_bytes_per_vector, vectors_file_name

    m = idx.manifest
    n = max(int(count), 0)
    out: dict[str, Any] = {
        "full_vector_bytes": int(m.dim_in) * 4,
        "reduced_vector_bytes": _code_bytes(m.store, int(m.dim_out)),
        "store_bytes_per_vector": round(store_bytes / n, 1) if n else None,
    }
    ram = _resident_bytes(idx.store, m.store)
    full = m.full
    if full is not None:
        id_ram, disk_per_vector = rescore_bytes_per_vector(m.dim_in, full.dtype)
        if ram is not None:
            ram += id_ram * n if not full.in_store else 0
        if full.in_store:
            out.update(full_file="in store (named vector)", full_dtype=full.dtype, full_bytes=None)
        else:
            path = idx.folder / (full.dir or "full") / vectors_file_name(full.dtype)
            out.update(full_file=str(path.relative_to(idx.folder)), full_dtype=full.dtype,
                       full_bytes=allocated_bytes(path),
                       full_bytes_per_vector=disk_per_vector)
    else:
        out.update(full_file=None, full_dtype=None, full_bytes=None)
    out["ram_bytes"] = ram
    out["ram_bytes_per_vector"] = round(ram / n, 1) if ram is not None and n else None
    depth = m.rescore.depth if m.rescore is not None else None
    out["rescore"] = f"x{depth}" if depth else None
    return out


def _b(value: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} GiB"


def saved_lines(info: dict[str, Any]) -> list[str]:
    """Plain sentences for ``slimvec info`` from :meth:`Index.info` (with the saved fields)."""
    lines = []
    full = info["full_vector_bytes"]
    dim_in, dim_out = info["dim_in"], info["dim_out"]
    per = info.get("store_bytes_per_vector")
    if per:
        code = info.get("reduced_vector_bytes") or dim_out * 4
        lines.append(f"store: {per:,.0f} B/vector on disk ({code:,} B codes of {dim_out}-d vectors, "
                     "graph, ids, WAL) "
                     f"against {full:,} B for one full {dim_in}-d float32 vector "
                     f"({per / full:.2f}x)")
    if info.get("ram_bytes") is not None:
        rpv = info.get("ram_bytes_per_vector")
        lines.append(f"RAM while serving: {_b(info['ram_bytes'])}"
                     + (f" ({rpv:,.0f} B/vector: store files held in memory"
                        + (" + 16 B/vector full-vector id lookup" if info.get("full_file") and
                           not str(info["full_file"]).startswith("in store") else "")
                        + ")" if rpv else ""))
    if info.get("full_file"):
        size = info.get("full_bytes")
        lines.append(f"full vectors for rescoring: {info['full_file']} ({info['full_dtype']}"
                     + (f", {_b(size)}, {info.get('full_bytes_per_vector', 0):,} B/vector with id, "
                        "read from disk" if size is not None else "") + ")")
    else:
        lines.append("full vectors: not kept (searches cannot rescore)")
    depth = info.get("rescore")
    lines.append(f"rescoring: {depth} by default (k x {depth[1:]} candidates re-ranked with the "
                 "full vectors; search --rescore 0 turns it off)" if depth else
                 "rescoring: none by default (scores are cosine in the stored space)")
    return lines
