"""A bulk load builds an HNSW graph over float16 codes and writes the recipe's codes (issue 36).

An ``HNSW16,SQ4`` graph spends most of an insertion decoding 4-bit codes for its ``efc``
candidate distances. While a bulk load writes (``slimvec ingest``), :class:`Float16Build` swaps
the graph's storage for float16 codes (about 1.6x cheaper an insertion on MiniLM vectors, and the
graph is built on more exact distances); every index file written still holds the recipe's own
codes, encoded from the float16 ones at the write (:meth:`Float16Build.coded`), so readers, a
resumed load and the served index see the same file as before. The float16 codes cost four times
a 4-bit code's RAM while the load runs, so only the ingest turns it on
(:attr:`slimvec.connectors.faiss_store.FaissStore.fp16_build`), never a long-lived service writer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Float16Build", "add_with_threads", "coded_storage"]

#: vectors re-encoded per step when the recipe's codes are written (bounds the float32 copy)
ENCODE_CHUNK = 65_536


def add_with_threads(index: Any, vecs: Any, threads: int) -> None:
    """``index.add(vecs)`` with ``threads`` OpenMP threads, for the graph thread that inserts
    beside the writer (:meth:`~slimvec.connectors.faiss_store.FaissStore._insert_queued`): an
    OpenMP thread count is per thread and a new thread starts at every core, so the writer's own
    count is passed along (under one core's affinity the ingest's graph ran two threads, issue 36)."""
    import faiss

    faiss.omp_set_num_threads(int(threads))
    index.add(vecs)


def coded_storage(index: Any) -> Any | None:
    """The scalar-quantizer storage of an ``IndexHNSWSQ`` coded below float16 (SQ4, SQ6, SQ8),
    else None (nothing to gain)."""
    import faiss

    hnsw = faiss.downcast_index(index)
    if not isinstance(hnsw, faiss.IndexHNSWSQ):
        return None
    storage = faiss.downcast_index(hnsw.storage)
    sq = faiss.ScalarQuantizer
    if not isinstance(storage, faiss.IndexScalarQuantizer) or storage.sq.qtype in (
            sq.QT_fp16, sq.QT_bf16, sq.QT_8bit_direct, sq.QT_8bit_direct_signed):
        return None
    return storage


class Float16Build:
    """The graph of ``index`` (trained, an ``IndexHNSWSQ`` with :func:`coded_storage`) over
    float16 codes from now on; its own coded storage is kept, empty, to encode the writes.

    Parameters
    ----------
    index : faiss.Index
        Changed in place (its storage pointer); the vectors it holds are carried over.
    """

    def __init__(self, index: Any) -> None:
        import faiss

        self.hnsw = faiss.downcast_index(index)
        coded = coded_storage(index)
        assert coded is not None and coded.is_trained
        fp16 = faiss.IndexScalarQuantizer(coded.d, faiss.ScalarQuantizer.QT_fp16, coded.metric_type)
        _copy_vectors(coded, fp16)
        fp16.this.disown()    # the graph index owns and frees it, as it did its first storage
        coded.this.acquire()  # ... and this one is Python's now
        self.hnsw.storage = fp16
        coded.reset()
        self.coded_codes = coded

    @contextmanager
    def coded(self) -> Iterator[Any]:
        """The graph with the recipe's codes of every vector, for the length of a write."""
        fp16 = self.hnsw.storage
        _copy_vectors(fp16, self.coded_codes)
        self.hnsw.storage = self.coded_codes
        try:
            yield self.hnsw
        finally:
            self.hnsw.storage = fp16
            self.coded_codes.reset()


    def finish(self) -> None:
        """End the build: the graph keeps the recipe's codes of every vector from now on (what a
        calibration must search), and the float16 codes are freed."""
        fp16 = self.hnsw.storage
        _copy_vectors(fp16, self.coded_codes)
        self.coded_codes.this.disown()
        self.hnsw.storage = self.coded_codes
        fp16.this.acquire()  # freed with this last reference


def _copy_vectors(src: Any, dst: Any) -> None:
    """Append every vector of ``src`` to ``dst`` (encoded by ``dst``), a chunk at a time."""
    for lo in range(0, int(src.ntotal), ENCODE_CHUNK):
        dst.add(src.reconstruct_n(lo, min(ENCODE_CHUNK, int(src.ntotal) - lo)))
