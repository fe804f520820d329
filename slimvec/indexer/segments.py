"""Segments: batches written apart from an index's writer, then adopted by it whole.

A writer on another process or node (a Ray worker) writes the batches it is given into a folder
inside the index folder, ``segments/<name>/``: a store of the index's own spec (``store/``, its
graph built there in bulk with that worker's cores), the kept full vectors (``full/``), the rows it
rejected (``rejects.jsonl``) and, written last, ``segment.json`` with its counts. The index's
writer adopts a finished segment in one step (a :class:`~slimvec.indexer.writer.VectorBatch`
naming it): the full vectors are appended to the side file, the store takes the graph file and
the ids (:meth:`~slimvec.connectors.faiss_store.FaissStore.adopt`), the rejects join the index's,
and the commit that follows records the segment's blocks. No vector passes through that writer.
A segment no commit adopted (its worker killed mid-write, the driver killed before its commit)
is written again by the resumed run; :func:`clear_segments` removes the leftovers.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from slimvec.connectors import make_store, store_class
from slimvec.connectors.fullvectors import FULL_DIR, FullVectors
from slimvec.errors import ConfigError
from slimvec.index.manifest import Manifest
from slimvec.indexer.writer import REJECTS, IngestSummary, Prereduced, VectorBatch, with_bad_full_rows_marked, write_batch
from slimvec.persistence import read_json, write_json_atomic

__all__ = ["SEGMENTS_DIR", "adopts_segments", "write_segment", "adopt_segment", "clear_segments"]

log = logging.getLogger(__name__)

SEGMENTS_DIR = "segments"
SEGMENT_FILE = "segment.json"
#: the summary counts a segment carries to the writer that adopts it
COUNTS = ("ingested", "rejected", "truncated", "duplicates", "warnings")


def adopts_segments(store_spec: str) -> bool:
    """A store of ``store_spec`` takes segments whole (FAISS); others are written by one writer."""
    return hasattr(store_class(store_spec), "adopt")


def write_segment(index_folder: Path, manifest: Manifest, name: str,
                  batches: Iterable[VectorBatch]) -> dict[str, Any]:
    """Write ``batches`` (reduced by the index's reducer, full vectors beside them when the index
    keeps them) into the new segment ``segments/<name>`` of ``index_folder`` and finalize it
    there (its graph built here); returns what ``segment.json`` records.

    A folder of that name left by an earlier attempt is replaced.
    """
    from slimvec.indexer.keepfull import KeepFullStore

    folder = Path(index_folder) / SEGMENTS_DIR / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    store = make_store(manifest.store, folder / "store").create(int(manifest.dim_out), manifest.metric)
    if hasattr(store, "fp16_build"):
        store.fp16_build = True  # a bulk build, as the index's own writer's
    full_info = manifest.full
    full = (FullVectors.create(folder / FULL_DIR, int(manifest.dim_in), full_info.dtype, manifest.metric)
            if full_info is not None and full_info.dir else None)
    target: Any = KeepFullStore(store, full, int(manifest.dim_in), name) if full is not None else store
    summary, accounted = IngestSummary(index=str(folder)), 0
    try:
        with open(folder / REJECTS, "w", encoding="utf-8") as rejects:
            for batch in batches:
                if full is not None:
                    if batch.full is None:
                        raise ConfigError(f"{index_folder} keeps full vectors but a batch for "
                                          f"segment {name} came without them.")
                    batch = with_bad_full_rows_marked(batch, int(manifest.dim_in))
                    target.stage(batch.ids, batch.full, batch.check_norms)
                write_batch(batch, target, Prereduced(), int(manifest.dim_out), rejects, summary, False)
                accounted += len(batch.ids) + sum(not r.kept for r in batch.rejects)
        target.finalize()
        target.flush()
    finally:
        target.close()
    record: dict[str, Any] = {c: int(getattr(summary, c)) for c in COUNTS}
    record["accounted"] = accounted
    record["reject_reasons"] = summary.reject_reasons
    write_json_atomic(folder / SEGMENT_FILE, record)
    return record


def adopt_segment(target: Any, folder: Path, rejects_fh: Any, summary: IngestSummary) -> int:
    """Adopt the finished segment in ``folder`` into an index writer's open ``target`` (its store,
    or the :class:`~slimvec.indexer.keepfull.KeepFullStore` around it), append its rejects to
    ``rejects_fh`` and add its counts to ``summary``; returns the source rows it accounts for
    (as :meth:`~slimvec.indexer.commit_loop.CommitLoop.write` counts a batch's). The segment folder is removed.

    Raises
    ------
    ConfigError
        ``folder`` is no finished segment (no ``segment.json``).
    """
    folder = Path(folder)
    if not (folder / SEGMENT_FILE).is_file():
        raise ConfigError(f"{folder} is not a finished segment (no {SEGMENT_FILE}); its writer "
                          "did not finish. Run the ingest again to write it anew.")
    record = read_json(folder / SEGMENT_FILE)
    full = getattr(target, "full", None)
    if full is not None:
        full.adopt(folder / FULL_DIR)
    store = getattr(target, "store", target)
    store.adopt(folder / "store")
    with open(folder / REJECTS, encoding="utf-8") as fh:
        shutil.copyfileobj(fh, rejects_fh)
    for c in COUNTS:
        setattr(summary, c, getattr(summary, c) + int(record.get(c, 0)))
    for reason, n in dict(record.get("reject_reasons") or {}).items():
        summary.reject_reasons[reason] = summary.reject_reasons.get(reason, 0) + int(n)
    shutil.rmtree(folder, ignore_errors=True)
    return int(record["accounted"])


def clear_segments(index_folder: Path) -> int:
    """Remove the segment folders no commit adopted; returns how many."""
    root = Path(index_folder) / SEGMENTS_DIR
    if not root.is_dir():
        return 0
    gone = [p for p in root.iterdir() if p.is_dir()]
    for p in gone:
        shutil.rmtree(p, ignore_errors=True)
    if gone:
        log.info("%s: %d segment folder(s) no commit adopted were removed", index_folder, len(gone))
    return len(gone)
