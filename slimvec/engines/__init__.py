"""Distributed execution engines for ``slimvec ingest`` and parallel index builds.

- :mod:`slimvec.engines.ray_ingest` — ``slimvec ingest --engine ray``: Ray Data reads the input
  files, an actor pool encodes and reduces, one writer on the driver commits (single-writer stores).
- :mod:`slimvec.engines.blocks` — input files split into deterministic blocks of rows, read with
  :mod:`slimvec.sources.readers` (the bad-row rules of the single-process ingest).
- :mod:`slimvec.engines.faiss_ivf` — FAISS IVF built the FAISS way: train once, add shards in
  parallel to copies of the trained empty index, merge the inverted lists.
- :mod:`slimvec.engines.plan` — the engine side of ``slimvec plan``: workers, hours, shards, nodes.

Ray is an optional dependency (``pip install 'slimvec[ray]'``); nothing here imports it at module
load time.
"""

ENGINES = ("local", "ray")

__all__ = ["ENGINES"]
