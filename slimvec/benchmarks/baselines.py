"""Peer baselines measured in the same run as the reducers: what users would do instead.

- FAISS scalar and product quantization (``SQ8``, ``PQmnp``, ``OPQm,PQmnp`` with m = dim / 8, and
  ``HNSW32,SQ8``) — built through slimvec's FAISS store like any other store spec. ``np`` turns
  off polysemous training, which only serves Hamming pre-filtering (not used here) and took a
  minute to train PQ48 on 538 vectors on this machine; the codes and the search are plain PQ;
- FAISS RaBitQ (``RaBitQ``: 1 bit per coordinate plus two float factors, 56 B at 384-d, and
  ``IVF256,RaBitQ`` probing 32 lists), the quantizer FAISS 1.15 added (issue 28);
- Qdrant Edge quantization (scalar int8, binary 1 and 2 bits, TurboQuant) searched without and
  with Qdrant's own rescoring (oversampling 2, and, when the run re-ranks, oversampling R at each
  of its depths R) on the same built store;
- sentence-transformers ``quantize_embeddings``: int8 (calibrated on the corpus) and binary
  (Hamming search with FAISS ``IndexBinaryFlat``), the binary one also with the library's
  recommended rescoring (4x candidates re-scored with the float query against int8 vectors).

Every FAISS peer is ``rescorable``: with the run's depths it is also measured with ``k × R``
candidates re-ranked from the same full vectors on disk as the reducer rows (fair peers: a
re-ranked recipe is compared with re-ranked peers only).

The sentence-transformers rows are brute-force searches over the quantized arrays saved as
``.npy`` / a FAISS binary index file; their bytes are those files' allocated bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["StoreVariant", "peer_store_variants", "RABITQ_PEERS", "STQuantIndex", "ST_VARIANTS"]

#: Qdrant Edge quantizations measured as peers
EDGE_QUANTS = ("sq8", "bq1", "bq2", "tq2")

#: sentence-transformers variants: (label, precision, rescore multiplier or None)
ST_VARIANTS = (("st:int8", "int8", None), ("st:binary", "ubinary", None), ("st:binary", "ubinary", 4))


@dataclass
class StoreVariant:
    """One store to build and the search settings to measure on it.

    Attributes
    ----------
    spec : str
        Store spec built with :func:`slimvec.connectors.make_store`.
    searches : list of (label, params)
        Row label (the store column of the results) and search parameters, one row each.
    rescorable : bool
        The peer may also be measured with its candidates re-ranked by the full vectors on disk
        (FAISS "refine" from disk); False for peers that rescore on their own (Qdrant Edge).
    """

    spec: str
    searches: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    rescorable: bool = False

    def __post_init__(self) -> None:
        if not self.searches:
            self.searches = [(self.spec, {})]


#: FAISS RaBitQ peers (the IVF one probes 1/8 of its lists)
RABITQ_PEERS = ("faiss:RaBitQ", "faiss:IVF256,RaBitQ,nprobe=32")


def peer_store_variants(dim: int, depths: Sequence[int] = ()) -> list[StoreVariant]:
    """FAISS and Qdrant Edge quantization baselines for full-dimension vectors of ``dim``.

    Parameters
    ----------
    dim : int
    depths : sequence of int
        Re-ranking depths R of the run: each Qdrant Edge peer is also searched with its own
        rescoring at ``oversampling=R`` (the FAISS peers are re-ranked from the full vectors by
        the runner).
    """
    m = _pq_subquantizers(dim)
    out = [StoreVariant(spec, rescorable=True) for spec in
           ("faiss:HNSW32,SQ8", "faiss:SQ8", f"faiss:PQ{m}np", f"faiss:OPQ{m},PQ{m}np", *RABITQ_PEERS)]
    for quant in EDGE_QUANTS:
        spec = f"qdrant-edge:quant={quant}"
        searches: list[tuple[str, dict[str, Any]]] = [(f"{spec},rescore=false", {"rescore": False}),
                                                      (f"{spec},rescore=true", {"rescore": True})]
        searches += [(f"{spec},rescore=true,oversampling={int(r)}", {"rescore": True, "oversampling": float(r)})
                     for r in sorted(set(int(d) for d in depths)) if int(r) != 2]
        out.append(StoreVariant(spec, searches))
    return out


def _pq_subquantizers(dim: int) -> int:
    """Largest divisor of ``dim`` not above dim / 8 (8-bit codes: dim / 8 bytes per vector)."""
    target = max(1, dim // 8)
    for m in range(target, 0, -1):
        if dim % m == 0:
            return m
    return 1


def _st_quantize() -> Any:
    """sentence-transformers' ``quantize_embeddings`` (moved to ``util.quantization`` in v5)."""
    try:
        from sentence_transformers.util.quantization import quantize_embeddings
    except ImportError:  # older sentence-transformers
        from sentence_transformers.quantization import quantize_embeddings
    return quantize_embeddings


class STQuantIndex:
    """sentence-transformers ``quantize_embeddings`` arrays searched by brute force.

    Parameters
    ----------
    precision : {"int8", "ubinary"}
    corpus : ndarray float32 (n, d)
        Normalised corpus vectors (also the int8 calibration set).
    folder : Path
        Where the quantized arrays are written (their allocated bytes are the index bytes).
    """

    def __init__(self, precision: str, corpus: np.ndarray, folder: Path) -> None:
        quantize_embeddings = _st_quantize()
        self.precision = precision
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        # int8 ranges from the corpus once (passing calibration_embeddings per query call would
        # rescan the whole corpus for every query)
        self._ranges = np.vstack([corpus.min(axis=0), corpus.max(axis=0)]).astype(np.float32)
        self.int8 = quantize_embeddings(corpus, precision="int8", ranges=self._ranges)
        np.save(self.folder / "int8.npy", self.int8)  # ST's rescoring recipe keeps these on disk
        self.int8 = np.load(self.folder / "int8.npy", mmap_mode="r")
        # int8 x int8 dot products are exact in float32 (|sum| <= 384 * 127 * 127 < 2**24); kept
        # in RAM once instead of widened on every query
        self._int8_f32 = np.asarray(self.int8, dtype=np.float32) if precision == "int8" else None
        if precision == "ubinary":
            import faiss

            packed = quantize_embeddings(corpus, precision="ubinary")
            self.binary = faiss.IndexBinaryFlat(corpus.shape[1])
            self.binary.add(np.ascontiguousarray(packed))
            faiss.write_index_binary(self.binary, str(self.folder / "binary.index"))
        elif precision != "int8":
            raise ValueError(f"unsupported precision {precision!r}")

    def searchable_files(self) -> list[Path]:
        """Files the first search stage reads (the rescoring arrays excluded)."""
        return [self.folder / ("binary.index" if self.precision == "ubinary" else "int8.npy")]

    def _quantize_queries(self, queries: np.ndarray) -> np.ndarray:
        quantize_embeddings = _st_quantize()
        if self.precision == "int8":
            return quantize_embeddings(queries, precision="int8", ranges=self._ranges)
        return quantize_embeddings(queries, precision=self.precision)

    def search(self, queries: np.ndarray, k: int, rescore: int | None = None) -> np.ndarray:
        """Corpus rows (n, k) of each query; ``rescore`` re-scores ``k * rescore`` candidates."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        first = k * rescore if rescore else k
        if self.precision == "ubinary":
            _, rows = self.binary.search(np.ascontiguousarray(self._quantize_queries(queries)), first)
        else:
            sims = self._quantize_queries(queries).astype(np.float32) @ self._int8_f32.T
            part = np.argpartition(-sims, first - 1, axis=1)[:, :first]
            order = np.argsort(-np.take_along_axis(sims, part, axis=1), axis=1, kind="stable")
            rows = np.take_along_axis(part, order, axis=1)
        if not rescore:
            return rows.astype(np.int64)
        out = np.empty((len(queries), k), dtype=np.int64)
        for i, (q, cand) in enumerate(zip(queries, rows)):
            cand = cand[cand >= 0]
            scores = np.asarray(self.int8[cand], dtype=np.float32) @ q
            out[i] = cand[np.argsort(-scores, kind="stable")[:k]]
        return out
