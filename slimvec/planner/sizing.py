"""Size models of the stores: allocated disk bytes and resident RAM at N vectors of dimension d.

A store's files fall into components (hnswlib: the graph file with vectors and links; FAISS: the
index with codes / vectors / HNSW links / IVF lists, the id array; Qdrant Edge: vectors, quantized
codes, HNSW links, id tracker, payload storage, WAL). Each component's allocated bytes follow one
linear form in the corpus size ``n``, the stored dimension ``d`` and the mean payload size ``p``
(bytes of JSON per document)::

    bytes = fixed + fixed_per_dim·d + n·(per_vector + per_dim·d + per_payload_byte·p)

``fixed`` is the overhead of empty files, ``fixed_per_dim`` codebooks and centroids (PQ, IVF),
``per_dim`` the bytes of one coordinate (4 for float32, 1 for SQ8, ~5 in Qdrant's CBOR WAL),
``per_vector`` the links, ids and headers of one vector (hnswlib: ``8·M + 4`` bytes of level-0
links and more). The constants are not typed in: :func:`calibrate` builds the real store
(:func:`slimvec.connectors.make_store`) at a few small sizes, measures ``st_blocks × 512`` of every
file after ``finalize`` + ``flush``, and fits them by non-negative least squares; the prediction
at a size it was not fitted on is then compared with a fresh measurement (:func:`check_model`).

RAM is the sum of the components the engine holds in memory while serving (vectors, codes, links,
id maps), predicted by the same fitted constants; WAL and payload files are on disk only. For
FAISS the Python id map of :class:`~slimvec.connectors.faiss_store.FaissStore` is added, measured
with :mod:`tracemalloc`. It is a model of steady-state memory, not a measured RSS.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.connectors import parse_store_spec, store_class, store_min_train_vectors, store_names
from slimvec.connectors.fullvectors import FULL_ID_RAM, rescore_bytes_per_vector
from slimvec.errors import ConfigError
from slimvec.specs import format_spec

__all__ = [
    "RSS_CHILD_HELPERS", "RSS_FUNCTION", "FEATURES", "FULL_ID_RAM",
    "rescore_bytes_per_vector",
    "Measurement",
    "ComponentFit",
    "SizeModel",
    "SizeCheck",
    "sizing_spec",
    "sizing_sizes",
    "measure_store",
    "fit_model",
    "calibrate",
    "check_model",
    "python_id_map_bytes",
    "measure_resident",
    "measure_open_rss",
]

log = logging.getLogger(__name__)

#: the terms of the linear size form, in order
FEATURES = ("fixed", "fixed_per_dim", "per_vector", "per_dim", "per_payload_byte")

_BATCH = 1000


def _features(n: float, d: float, p: float) -> np.ndarray:
    return np.array([1.0, d, n, n * d, n * p], dtype=np.float64)


def sizing_spec(spec: str) -> str:
    """The store spec to build for sizing: the location of an embedded store is dropped.

    ``qdrant-edge:/data/idx,quant=sq8`` -> ``qdrant-edge:quant=sq8``; FAISS factory strings and
    options are kept.

    Raises
    ------
    ConfigError
        A remote ``qdrant`` store (its size lives on a server) or an unknown store.
    A recipe string (``none|faiss:HNSW16,SQ4,...|rescore=auto``, as recipe rows of ``slimvec
    bench`` name their store) is sized by its store stage.
    """
    if "|" in spec:  # a recipe: its store stage (option order does not matter either way)
        from slimvec.recipe import parse_recipe

        spec = parse_recipe(spec).store
    parsed = parse_store_spec(spec)
    klass = store_class(parsed)
    if not klass.resident_components:
        sized = [name for name in store_names() if store_class(name).resident_components]
        raise ConfigError(f"No size model for store {parsed.name!r}: sizing builds the store locally. "
                          f"Size one of {', '.join(sized)} (qdrant-edge matches a Qdrant server's "
                          "segment format).")
    # the location of an embedded store is dropped; an argument that is an option (FAISS) is kept
    arg = None if klass.spec_arg in ("location", None) else (parsed.arg or klass.default_arg)
    return format_spec(parsed.name, arg, parsed.options)


def sizing_sizes(spec: str, base: Sequence[int] = (1000, 2000)) -> tuple[int, ...]:
    """Corpus sizes to fit ``spec``'s size model on: ``base``, scaled up (×2 steps) until the
    smallest is at least twice what the store needs to train (FAISS ``IVF1024``: 2,048 and 4,096)."""
    need = store_min_train_vectors(spec)
    sizes = tuple(int(n) for n in sorted(set(base)))
    while sizes[0] < 2 * need:
        sizes = tuple(2 * n for n in sizes)
    return sizes


@dataclass
class Measurement:
    """Allocated bytes of one store built at ``n`` vectors of dimension ``dim``.

    Attributes
    ----------
    spec : str
    n, dim : int
    payload_bytes : int
        Mean JSON payload bytes per vector (0: no payloads).
    components : dict
        Component -> allocated bytes.
    content : dict
        Component -> bytes without block rounding (per file the smaller of its length and its
        allocated bytes, so sparse preallocated files still count what is allocated).
    total : int
        ``store.size_bytes()`` after finalize + flush.
    build_s : float
    """

    spec: str
    n: int
    dim: int
    payload_bytes: int
    components: dict[str, int]
    total: int
    build_s: float
    content: dict[str, int] = field(default_factory=dict)


def _unit_vectors(n: int, dim: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _text_stream() -> str:
    """Real English sentences (the bundled STS-B pairs), so payloads compress like real text."""
    path = Path(__file__).resolve().parents[1] / "data" / "stsb-train.tsv"
    with open(path, encoding="utf-8") as fh:
        next(fh)
        return " ".join(part for line in fh for part in line.split("\t")[:2])


def _payloads(n: int, payload_bytes: int, seed: int) -> list[dict[str, Any]] | None:
    if payload_bytes <= 0:
        return None
    text = _text_stream()
    width = max(payload_bytes - 12, 1)  # {"text": "..."} is 12 bytes of JSON around the text
    starts = np.random.default_rng(seed).integers(0, len(text) - width, size=n)
    return [{"text": text[s:s + width]} for s in starts.tolist()]


def measure_store(spec: str, n: int, dim: int, *, payload_bytes: int = 0, seed: int = 0,
                  vectors: np.ndarray | None = None, workdir: str | Path | None = None) -> Measurement:
    """Build ``spec`` with ``n`` vectors of ``dim`` dimensions and measure its allocated bytes.

    Parameters
    ----------
    spec : str
        A store spec (its location, if any, is ignored: see :func:`sizing_spec`).
    n, dim : int
        Corpus size and dimension.
    payload_bytes : int
        Mean JSON payload bytes per document (the ``text`` payload of ``slimvec ingest``).
    seed : int
        Seed of the random unit vectors (used when ``vectors`` is None).
    vectors : ndarray, optional
        Real vectors to store instead (their first ``n`` rows; their width must be ``dim``).
    workdir : path, optional
        Parent of the temporary store folder (default: the system temp dir).

    Returns
    -------
    Measurement
    """
    from slimvec.connectors import make_store
    from slimvec.persistence import allocated_bytes

    spec = sizing_spec(spec)
    klass = store_class(spec)
    if vectors is not None:
        vecs = np.asarray(vectors, dtype=np.float32)[:n]
        if vecs.shape != (n, dim):
            raise ConfigError(f"measure_store: expected {n} vectors of dimension {dim}, got {vecs.shape}.")
    else:
        vecs = _unit_vectors(n, dim, seed)
    payloads = _payloads(n, payload_bytes, seed)
    with tempfile.TemporaryDirectory(prefix="slimvec-size-", dir=workdir) as tmp:
        start = time.perf_counter()
        store = make_store(spec, tmp).create(dim)
        try:
            for lo in range(0, n, _BATCH):
                store.upsert(np.arange(lo + 1, min(lo + _BATCH, n) + 1), vecs[lo:lo + _BATCH],
                             None if payloads is None else payloads[lo:lo + _BATCH])
            store.finalize()
            store.flush()
            total = store.size_bytes()
            components: dict[str, int] = {}
            content: dict[str, int] = {}
            for root, _dirs, files in os.walk(tmp):
                for fname in files:
                    path = os.path.join(root, fname)
                    comp = klass.file_component(os.path.relpath(path, tmp))
                    alloc = allocated_bytes(path)
                    components[comp] = components.get(comp, 0) + alloc
                    content[comp] = content.get(comp, 0) + min(alloc, os.path.getsize(path))
        finally:
            store.close()
        build_s = time.perf_counter() - start
    log.debug("measured %s n=%d d=%d: %d bytes in %.2fs", spec, n, dim, total, build_s)
    return Measurement(spec, n, dim, payload_bytes, components, total, build_s, content)


@dataclass
class ComponentFit:
    """Fitted constants of one component (see the module docstring for the form)."""

    fixed: float
    fixed_per_dim: float
    per_vector: float
    per_dim: float
    per_payload_byte: float

    def predict(self, n: float, dim: float, payload_bytes: float = 0.0) -> float:
        """Allocated bytes at ``n`` vectors of ``dim`` dimensions with ``payload_bytes`` payloads."""
        coef = np.array([getattr(self, f) for f in FEATURES])
        return float(coef @ _features(n, dim, payload_bytes))


def python_id_map_bytes(n: int = 20000) -> float:
    """Measured bytes per entry of a Python ``dict[int, int]`` (FAISS's document id -> position)."""
    import tracemalloc

    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        table = {i + (1 << 40): i + 100000 for i in range(n)}  # large ints are not cached
        used = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    del table
    return used / n


@dataclass
class SizeModel:
    """Per-component fitted constants of one store spec.

    Attributes
    ----------
    spec : str
        The sizing spec (:func:`sizing_spec`).
    components : dict
        Component name -> :class:`ComponentFit`.
    resident : list of str
        Components counted in RAM.
    extra_ram_per_vector : float
        RAM per vector outside the files (FAISS's Python id map), measured.
    fitted_on : list of [n, dim, payload_bytes]
        The sizes measured for the fit.
    """

    spec: str
    components: dict[str, ComponentFit]
    resident: list[str]
    extra_ram_per_vector: float = 0.0
    fitted_on: list[list[int]] = field(default_factory=list)

    def disk_bytes(self, n: float, dim: float, payload_bytes: float = 0.0) -> float:
        """Predicted allocated bytes on disk."""
        return sum(max(c.predict(n, dim, payload_bytes), 0.0) for c in self.components.values())

    def ram_bytes(self, n: float, dim: float, payload_bytes: float = 0.0) -> float:
        """Predicted resident bytes while serving (resident components + id maps)."""
        files = sum(max(self.components[c].predict(n, dim, payload_bytes), 0.0)
                    for c in self.resident if c in self.components)
        return files + self.extra_ram_per_vector * n

    def breakdown(self, n: float, dim: float, payload_bytes: float = 0.0) -> dict[str, float]:
        """Predicted bytes per component."""
        return {k: max(c.predict(n, dim, payload_bytes), 0.0) for k, c in self.components.items()}

    def to_json(self) -> dict[str, Any]:
        """JSON-serialisable form (for ``--json`` and the calibration record)."""
        return {"spec": self.spec, "resident": self.resident,
                "extra_ram_per_vector": self.extra_ram_per_vector, "fitted_on": self.fitted_on,
                "components": {k: asdict(v) for k, v in self.components.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SizeModel:
        """Inverse of :meth:`to_json`."""
        return cls(spec=data["spec"], resident=list(data["resident"]),
                   extra_ram_per_vector=float(data.get("extra_ram_per_vector", 0.0)),
                   fitted_on=[list(x) for x in data.get("fitted_on", [])],
                   components={k: ComponentFit(**v) for k, v in data["components"].items()})


def fit_model(measurements: Sequence[Measurement]) -> SizeModel:
    """Fit every component's constants to ``measurements`` of one spec (non-negative least squares).

    Slopes are fitted on the bytes written (:attr:`Measurement.content`); the mean block-rounding
    slack is added to ``fixed``. Terms the measurements cannot separate are dropped: with one dimension only, ``per_dim`` and
    ``fixed_per_dim`` are zero (the model then holds at that dimension); with no payloads,
    ``per_payload_byte`` is zero.

    Raises
    ------
    ConfigError
        Fewer than two corpus sizes, or measurements of different specs.
    """
    from scipy.optimize import nnls

    specs = {m.spec for m in measurements}
    if len(specs) != 1:
        raise ConfigError(f"fit_model needs measurements of one store spec, got {sorted(specs)}.")
    if len({m.n for m in measurements}) < 2:
        raise ConfigError("fit_model needs measurements at two or more corpus sizes "
                          f"(got n={sorted({m.n for m in measurements})}).")
    spec = specs.pop()
    active = [True, len({m.dim for m in measurements}) > 1, True,
              len({m.dim for m in measurements}) > 1, len({m.payload_bytes for m in measurements}) > 1]
    X = np.array([_features(m.n, m.dim, m.payload_bytes) for m in measurements])[:, active]
    scale = np.abs(X).max(axis=0)
    names = sorted({c for m in measurements for c in m.components})
    fits: dict[str, ComponentFit] = {}
    for comp in names:
        # slopes from the bytes written (block rounding of small files would blur them), then the
        # mean rounding slack back into the fixed term so totals stay allocated bytes
        alloc = np.array([m.components.get(comp, 0) for m in measurements], dtype=np.float64)
        y = np.array([m.content.get(comp, m.components.get(comp, 0)) for m in measurements], dtype=np.float64)
        coef, _ = nnls(X / scale, y)
        full = np.zeros(len(FEATURES))
        full[np.array(active)] = coef / scale
        full[0] += float(np.mean(alloc - y))
        fits[comp] = ComponentFit(**dict(zip(FEATURES, full.tolist())))
    klass = store_class(spec)
    extra = python_id_map_bytes() + 8.0 if klass.python_id_map else 0.0  # dict entry + ids array slot
    return SizeModel(spec, fits, sorted(klass.resident_components), extra,
                     [[m.n, m.dim, m.payload_bytes] for m in measurements])


def calibrate(spec: str, sizes: Iterable[int] = (1000, 2000), dims: Iterable[int] = (32, 128),
              payload_bytes: Iterable[int] = (0,), *, workdir: str | Path | None = None,
              seed: int = 0) -> tuple[SizeModel, list[Measurement]]:
    """Measure ``spec`` on the grid sizes × dims (× payload sizes, at the largest size) and fit.

    Returns
    -------
    model : SizeModel
    measurements : list of Measurement
    """
    sizes, dims, pays = sorted(set(sizes)), sorted(set(dims)), sorted(set(payload_bytes))
    grid = [(n, d, pays[0]) for n in sizes for d in dims]
    grid += [(sizes[-1], d, p) for p in pays[1:] for d in dims]
    measured = [measure_store(spec, n, d, payload_bytes=p, seed=seed + i, workdir=workdir)
                for i, (n, d, p) in enumerate(grid)]
    return fit_model(measured), measured


@dataclass
class SizeCheck:
    """A prediction at a size the model was not fitted on, against a fresh measurement."""

    spec: str
    n: int
    dim: int
    payload_bytes: int
    predicted: float
    measured: int

    @property
    def error(self) -> float:
        """Relative error (predicted - measured) / measured."""
        return (self.predicted - self.measured) / max(self.measured, 1)


def check_model(model: SizeModel, n: int, dim: int, payload_bytes: int = 0, *,
                workdir: str | Path | None = None, seed: int = 12345) -> SizeCheck:
    """Measure ``model.spec`` at (``n``, ``dim``) and compare with the model's prediction."""
    fitted = {(a, b, c) for a, b, c in model.fitted_on}
    if (n, dim, payload_bytes) in fitted:
        raise ConfigError(f"check_model at n={n}, dim={dim} would test a size the model was fitted on; "
                          "pick another size.")
    m = measure_store(model.spec, n, dim, payload_bytes=payload_bytes, seed=seed, workdir=workdir)
    return SizeCheck(model.spec, n, dim, payload_bytes, model.disk_bytes(n, dim, payload_bytes), m.total)


#: the part of every RSS-measuring child process: ``rss()`` (VmRSS in bytes) and
#: ``mapped(prefix)`` (resident bytes of each memory-mapped file under ``prefix``, from smaps)
RSS_FUNCTION = r"""
def rss():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0
"""
RSS_CHILD_HELPERS = r"""
import json, re, sys
import numpy as np
import faiss, hnswlib, qdrant_edge  # noqa: F401  (libraries loaded before the baseline)
""" + RSS_FUNCTION + r"""

def mapped(prefix):
    files, current = {}, None
    with open("/proc/self/smaps") as fh:
        for line in fh:
            parts = line.split()
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                current = parts[5] if len(parts) > 5 and parts[5].startswith(prefix) else None
            elif parts[0] == "Rss:" and current is not None:
                files[current] = files.get(current, 0) + int(parts[1]) * 1024
    return files
"""

_RSS_CHILD = RSS_CHILD_HELPERS + r"""
from slimvec.connectors import make_store

spec, loc, dim = sys.argv[1], sys.argv[2], int(sys.argv[3])
if len(sys.argv) > 4:
    queries = np.load(sys.argv[4])
else:
    queries = np.random.default_rng(1).standard_normal((200, dim)).astype(np.float32)
store = make_store(spec, loc)
import slimvec.connectors.faiss_store, slimvec.connectors.hnsw_store, slimvec.connectors.qdrant_edge  # noqa
before = rss()
store.open()
store.search(queries, 10)
after = rss()
print(json.dumps({"rss_delta": after - before, "files": mapped(loc)}))
"""


def measure_resident(spec: str, n: int, dim: int, *, workdir: str | Path | None = None,
                     seed: int = 7) -> dict[str, Any]:
    """Measured memory of a store opened in a fresh process and searched 200 times.

    Builds ``spec`` with ``n`` random unit vectors, closes it, then in a child process reads
    ``VmRSS`` before ``open()`` and after ``open()`` + one batch of 200 queries, and attributes
    the memory-mapped store files still resident (``/proc/self/smaps``) to components. Linux
    only. Returns :func:`measure_open_rss`'s dict.
    """
    from slimvec.connectors import make_store

    spec = sizing_spec(spec)
    vecs = _unit_vectors(n, dim, seed)
    with tempfile.TemporaryDirectory(prefix="slimvec-rss-", dir=workdir) as tmp:
        store = make_store(spec, tmp).create(dim)
        try:
            for lo in range(0, n, _BATCH):
                store.upsert(np.arange(lo + 1, min(lo + _BATCH, n) + 1), vecs[lo:lo + _BATCH])
            store.finalize()
        finally:
            store.close()
        return measure_open_rss(spec, tmp, dim)


def measure_open_rss(spec: str, folder: str | Path, dim: int, queries: np.ndarray | None = None, *,
                     timeout: float = 3600) -> dict[str, Any]:
    """Measured memory of an existing store folder opened in a fresh process and searched.

    A child process loads the libraries, reads ``VmRSS``, opens the store at ``folder`` with
    ``spec``, answers ``queries`` (200 random ones when None) in one batch with k=10, and reads
    ``VmRSS`` again; resident pages of memory-mapped store files are attributed to components.
    Linux only.

    Parameters
    ----------
    spec : str
        Store spec the folder was built with.
    folder : str or Path
        The store folder (what :func:`slimvec.connectors.make_store` was given).
    dim : int
        Vector dimension of the store.
    queries : ndarray, optional
        Queries to answer (already reduced to ``dim``).
    timeout : float
        Seconds before the child is stopped.

    Returns
    -------
    dict
        ``rss_delta`` (bytes), ``mapped`` (component -> resident bytes of mapped store files;
        clean file pages, reclaimable under memory pressure) and ``process`` (``rss_delta`` minus
        mapped: heap, runtime, id maps).

    Raises
    ------
    ConfigError
        The child failed (its last error lines are in the message).
    """
    import json
    import subprocess
    import sys

    klass = store_class(spec)
    folder = str(folder)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    with tempfile.TemporaryDirectory(prefix="slimvec-rssq-") as qtmp:
        args = [sys.executable, "-c", _RSS_CHILD, spec, folder, str(dim)]
        if queries is not None:
            qpath = os.path.join(qtmp, "queries.npy")
            np.save(qpath, np.ascontiguousarray(queries, dtype=np.float32))
            args.append(qpath)
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise ConfigError(f"Measuring the memory of {spec} failed: {proc.stderr.strip()[-300:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    mapped: dict[str, int] = {}
    for path, size in data["files"].items():
        comp = klass.file_component(os.path.relpath(path, folder))
        mapped[comp] = mapped.get(comp, 0) + int(size)
    delta = int(data["rss_delta"])
    return {"rss_delta": delta, "mapped": mapped, "process": delta - sum(mapped.values())}
