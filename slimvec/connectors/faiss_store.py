"""FAISS through ``index_factory``, with 64-bit document ids and a SQLite payload table.

Spec: ``faiss[:FACTORY][,ef=64,nprobe=16,train_size=20000,gpu=false]``; ``FACTORY`` is any
``faiss.index_factory`` string (``HNSW32`` by default, ``Flat``, ``IVF256,PQ16``, ``OPQ16,IVF256,PQ16``).

The FAISS index holds vectors at positions 0..n-1 (``add``); a position -> id array maps them to
document ids, so every factory gets 64-bit ids the same way. Re-upserting an id with the same
vector is a no-op; with a changed vector the new one is added and the old position is filtered out
of results (a tombstone), because graph indexes such as HNSW cannot remove vectors.

Indexes that need training (IVF, PQ) buffer vectors until ``train_size`` arrive or until
:meth:`FaissStore.finalize`, then train on the buffer and add it.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from slimvec.connectors.storefiles import META_FILE, read_meta, write_file_atomic, write_meta
from slimvec.connectors.base import SearchResult, VectorStore, check_vectors
from slimvec.connectors.options import check_options
from slimvec.connectors.payloads import PayloadTable
from slimvec.errors import ConfigError, MissingDependencyError, StoreError

__all__ = ["FaissStore"]

log = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {"factory": "HNSW32", "ef": 64, "nprobe": 16, "train_size": 20000,
                            "gpu": False, "polysemous": False}
INDEX_FILE, IDS_FILE, PENDING_FILE = "index.faiss", "ids.npy", "pending.npy"


def _faiss():
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise MissingDependencyError("faiss is not installed: pip install faiss-cpu (or the gpu extra)") from exc
    return faiss


def _save_npy(path: Path, arr: np.ndarray) -> None:
    def writer(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            np.save(fh, arr, allow_pickle=False)
    write_file_atomic(path, writer)


def _load_npy(path: Path) -> np.ndarray:
    return np.load(path, allow_pickle=False)


def _replaced_positions(ids: np.ndarray) -> set[int]:
    """Positions whose document id occurs again later (a newer vector replaced them)."""
    if len(ids) == 0:
        return set()
    _, last_from_end = np.unique(ids[::-1], return_index=True)
    live = np.zeros(len(ids), dtype=bool)
    live[len(ids) - 1 - last_from_end] = True
    return set(np.flatnonzero(~live).tolist())


def _polysemous_training_off(index: Any) -> None:
    """Turn off polysemous training on every PQ of a factory index (through pre-transforms)."""
    faiss = _faiss()
    idx = faiss.downcast_index(index)
    for _ in range(8):  # IndexPreTransform / IndexRefine / IndexIDMap wrap at most a few levels
        if hasattr(idx, "do_polysemous_training"):
            idx.do_polysemous_training = False
        inner = getattr(idx, "index", None) if not hasattr(idx, "invlists") else None
        if inner is None:
            break
        idx = faiss.downcast_index(inner)


class FaissStore(VectorStore):
    """A FAISS index in ``location/index.faiss`` with ids and payloads next to it.

    Parameters
    ----------
    location : str or path
        Folder of the index files.
    factory : str
        ``faiss.index_factory`` description.
    ef : int
        HNSW ``efSearch``.
    nprobe : int
        IVF lists visited per query.
    train_size : int
        Vectors buffered before training an index that needs it.
    gpu : bool
        Move the index to a GPU (needs ``faiss-gpu`` and a CUDA device).
    polysemous : bool
        Keep FAISS's polysemous training of PQ codes (the factory's default for ``PQn`` with
        8-bit codes). slimvec never searches with a Hamming threshold, which is all that training
        serves, and it made an ``IVF16,PQ8`` build on 2,000 vectors 60× slower (12.4 s against
        0.21 s); off unless asked. ADC search results do not depend on it.
    """

    name = "faiss"
    spec_arg = "factory"
    spec_arg_has_commas = True
    default_arg = DEFAULTS["factory"]
    snapshot_files = (INDEX_FILE, IDS_FILE, PENDING_FILE, META_FILE, "payloads.sqlite")
    resident_components = frozenset({"index", "ids"})

    @classmethod
    def quantization_label(cls, arg: str | None, options: Mapping[str, Any]) -> str:
        """The quantizer of the factory string (``HNSW32,SQ8`` -> ``sq8``; ``OPQ16,PQ16`` -> ``opq+pq``)."""
        up = (arg or cls.default_arg).upper()
        for key, label in (("OPQ", "opq+pq"), ("PQ", "pq"), ("SQ8", "sq8"), ("SQ4", "sq4"),
                           ("SQFP16", "fp16"), ("LSH", "lsh")):
            if key in up:
                return label
        return "float32"

    @classmethod
    def search_growth(cls, arg: str | None, options: Mapping[str, Any]) -> str:
        """``graph`` for HNSW factories; every other factory scans: flat codes (Flat, SQ8, PQ)
        all N vectors, IVF nprobe / nlist of them (linear in N at a fixed nlist)."""
        return "graph" if "HNSW" in (arg or cls.default_arg).upper() else "linear"

    @classmethod
    def _component(cls, rel: str) -> str:
        return {INDEX_FILE: "index", IDS_FILE: "ids"}.get(rel.rsplit("/", 1)[-1], "other")

    @classmethod
    def min_train_vectors(cls, arg: str | None, options: Mapping[str, Any]) -> int:
        """IVF needs a vector per list, PQ / SQ4 codebooks 256 (2^nbits) per sub-quantizer."""
        factory = str(options.get("factory") or arg or cls.default_arg).upper()
        need = 0
        for m in re.finditer(r"IVF(\d+)", factory):
            need = max(need, int(m.group(1)))
        if "PQ" in factory:
            need = max(need, 256)
        return need

    @classmethod
    def dim_problem(cls, arg: str | None, options: Mapping[str, Any], dim: int) -> str | None:
        """FAISS's own answer: the factory is built (empty, in memory) at ``dim``."""
        factory = str(options.get("factory") or arg or cls.default_arg)
        try:
            _faiss().index_factory(int(dim), factory)
        except RuntimeError as exc:
            reason = str(exc).split("Error: ")[-1].strip()
            return f"FAISS factory {factory!r} cannot hold {dim}-d vectors ({reason})"
        return None

    def __init__(self, location: str, **options: Any) -> None:
        super().__init__(location, **check_options(self.name, options, DEFAULTS))
        self._index = None
        self._ids = np.empty(0, dtype=np.int64)        # position -> document id
        self._pos: dict[int, int] | None = {}          # document id -> live position (None: not built)
        self._stale: set[int] = set()                  # positions replaced by a newer vector
        self._pending_ids: list[np.ndarray] = []       # buffered before training
        self._pending_vecs: list[np.ndarray] = []
        self._payloads: PayloadTable | None = None

    # -------------------------------------------------------------- lifecycle
    def create(self, dim: int, metric: str = "cosine") -> "FaissStore":
        faiss = _faiss()
        self.dim, self.metric = int(dim), self._check_metric(metric)
        folder = self._folder(self.location)
        if (folder / INDEX_FILE).exists() or (folder / META_FILE).exists():
            raise StoreError(f"A store already exists at {folder}; open it instead or choose an empty folder.")
        folder.mkdir(parents=True, exist_ok=True)
        fmetric = faiss.METRIC_L2 if metric == "l2" else faiss.METRIC_INNER_PRODUCT
        try:
            self._index = faiss.index_factory(self.dim, str(self.options["factory"]), fmetric)
            if not self.options.get("polysemous"):
                _polysemous_training_off(self._index)
        except RuntimeError as exc:
            raise ConfigError(f"FAISS could not build factory {self.options['factory']!r} for dimension "
                              f"{self.dim}: {str(exc).strip().splitlines()[-1]}. See the faiss "
                              "index_factory documentation (e.g. HNSW32, Flat, IVF256,PQ16).") from exc
        self._set_search_params()
        self._payloads = PayloadTable(folder / "payloads.sqlite")
        write_meta(folder, self.name, self.dim, self.metric, self.options)
        self.flush()
        return self

    def open(self) -> "FaissStore":
        faiss = _faiss()
        folder = self._folder(self.location)
        meta = read_meta(folder, self.name)
        self.dim, self.metric = int(meta["dim"]), meta["metric"]
        search_time = {k: v for k, v in self.options.items() if k in ("ef", "nprobe", "gpu") and v != DEFAULTS[k]}
        self.options = {**meta["options"], **search_time}
        try:
            self._index = faiss.read_index(str(folder / INDEX_FILE))
            self._ids = _load_npy(folder / IDS_FILE).astype(np.int64)
            if (folder / PENDING_FILE).exists():
                pending = _load_npy(folder / PENDING_FILE)
                if len(pending):
                    self._pending_ids = [np.ascontiguousarray(pending[:, :2]).view(np.int64).ravel()]
                    self._pending_vecs = [np.ascontiguousarray(pending[:, 2:].view(np.float32))]
        except (OSError, RuntimeError, ValueError) as exc:
            raise StoreError(f"Could not read the FAISS store at {folder}: {exc}") from exc
        if int(self._index.d) != self.dim:
            raise StoreError(f"The FAISS index {folder / INDEX_FILE} holds vectors of {self._index.d} "
                             f"dimensions, but its store records {self.dim}: the file was replaced or "
                             "damaged. Rebuild the index (slimvec ingest/migrate --rebuild).")
        if len(self._ids) > self._index.ntotal:
            # a flush was interrupted after the ids and before the index: the extra ids belong to
            # vectors that never reached the index file (the writer re-upserts them on resume)
            log.info("FAISS store %s: %d ids written ahead of the index by an interrupted flush "
                     "are dropped", folder, len(self._ids) - self._index.ntotal)
            self._ids = self._ids[:self._index.ntotal]
        if len(self._ids) != self._index.ntotal:
            raise StoreError(f"FAISS store at {folder} is inconsistent: {self._index.ntotal} vectors but "
                             f"{len(self._ids)} ids. Re-ingest into a new index.")
        self._stale = _replaced_positions(self._ids)
        self._pos = None  # built on the first upsert: a reader needs only the ids array
        self._set_search_params()
        self._payloads = PayloadTable(folder / "payloads.sqlite")
        self._dirty = False  # a reader's close() must not rewrite the files
        return self

    def _set_search_params(self) -> None:
        faiss = _faiss()
        ps = faiss.ParameterSpace()
        for name, key in (("efSearch", "ef"), ("nprobe", "nprobe")):
            try:
                ps.set_index_parameter(self._index, name, int(self.options[key]))
            except RuntimeError:
                pass  # the factory has no such parameter (e.g. nprobe on HNSW)
        if self.options["gpu"]:
            if not hasattr(faiss, "StandardGpuResources") or faiss.get_num_gpus() == 0:
                raise MissingDependencyError("gpu=true needs faiss-gpu and a CUDA device: pip install 'slimvec[gpu]'.")
            self._gpu_res = faiss.StandardGpuResources()
            self._index = faiss.index_cpu_to_gpu(self._gpu_res, 0, self._index)

    def _set_ef(self, ef: int) -> None:
        """Set HNSW ``efSearch`` (no-op for factories without it)."""
        try:
            _faiss().ParameterSpace().set_index_parameter(self._index, "efSearch", int(ef))
        except RuntimeError:
            pass

    def _require(self):
        if self._index is None:
            raise StoreError(f"FAISS store at {self.location} is not open: call create() or open().")
        return self._index

    # ------------------------------------------------------------------ data
    def _prepare(self, vecs: np.ndarray) -> np.ndarray:
        if self.metric == "cosine":
            vecs = vecs.copy()
            _faiss().normalize_L2(vecs)
        return vecs

    def upsert(self, ids: Sequence[int] | np.ndarray, vectors: np.ndarray,
               payloads: Sequence[dict[str, Any] | None] | None = None) -> None:
        index = self._require()
        self._dirty = True
        ids_arr = self._as_ids(ids)
        vecs = self._prepare(check_vectors(vectors, self.dim or 0))
        if len(ids_arr) != len(vecs):
            raise StoreError(f"upsert got {len(ids_arr)} ids for {len(vecs)} vectors.")
        # last occurrence wins inside one batch, as in Qdrant
        _, last = np.unique(ids_arr[::-1], return_index=True)
        keep = np.sort(len(ids_arr) - 1 - last)
        if payloads is not None:
            pl = list(payloads)
            assert self._payloads is not None
            self._payloads.put([int(ids_arr[i]) for i in keep], [pl[i] for i in keep])
        ids_arr, vecs = ids_arr[keep], vecs[keep]
        if not index.is_trained:
            self._pending_ids.append(ids_arr)
            self._pending_vecs.append(vecs)
            if sum(len(p) for p in self._pending_ids) >= int(self.options["train_size"]):
                self._train_and_add()
            return
        self._add(ids_arr, vecs)

    def _positions(self) -> dict[int, int]:
        """Document id -> live position, built when first needed (writers only: at ~100 B per
        vector it would double a quantized index's serving RAM)."""
        if self._pos is None:
            self._pos = {doc: position for position, doc in enumerate(self._ids.tolist())}
        return self._pos

    def _add(self, ids_arr: np.ndarray, vecs: np.ndarray) -> None:
        index = self._require()
        positions = self._positions()
        new = np.ones(len(ids_arr), dtype=bool)
        for j, doc in enumerate(ids_arr.tolist()):
            old = positions.get(doc)
            if old is None:
                continue
            if np.allclose(self._reconstruct(old), vecs[j], atol=1e-5):
                new[j] = False  # same document, same vector: nothing to do
            else:
                self._stale.add(old)
        if not new.any():
            return
        start = index.ntotal
        index.add(np.ascontiguousarray(vecs[new]))
        added = ids_arr[new]
        self._ids = np.concatenate([self._ids, added])
        for offset, doc in enumerate(added.tolist()):
            positions[doc] = start + offset
        if len(self._stale) > 0.1 * max(index.ntotal, 1):
            log.warning("FAISS store %s: %d of %d vectors are replaced copies; re-ingest into a new "
                        "index to reclaim space and speed.", self.location, len(self._stale), index.ntotal)

    def _reconstruct(self, position: int) -> np.ndarray:
        try:
            return self._require().reconstruct(int(position))
        except RuntimeError:
            return np.full(self.dim or 0, np.nan, dtype=np.float32)  # cannot tell: treat as changed

    def _train_and_add(self) -> None:
        ids_arr = np.concatenate(self._pending_ids) if self._pending_ids else np.empty(0, np.int64)
        vecs = np.concatenate(self._pending_vecs) if self._pending_vecs else np.empty((0, self.dim), np.float32)
        self._pending_ids, self._pending_vecs = [], []
        if len(vecs) == 0:
            return
        index = self._require()
        try:
            index.train(vecs)
        except RuntimeError as exc:
            self._pending_ids, self._pending_vecs = [ids_arr], [vecs]
            raise StoreError(f"FAISS could not train {self.options['factory']!r} on {len(vecs)} vectors: "
                             f"{str(exc).strip().splitlines()[-1]}. Give it more vectors or a smaller "
                             "IVF/PQ setting.") from exc
        log.info("trained FAISS %s on %d vectors", self.options["factory"], len(vecs))
        self._add(ids_arr, vecs)

    def search(self, queries: np.ndarray, k: int, **params: Any) -> SearchResult:
        index = self._require()
        check_options(self.name, params, DEFAULTS)
        if params:
            saved = dict(self.options)
            self.options.update(params)
            self._set_search_params()
            self.options = saved
        if not index.is_trained and self._pending_ids:
            self._train_and_add()
        qs = self._prepare(check_vectors(queries, self.dim or 0, "queries"))
        k = self._capped(k)
        out = SearchResult.empty(len(qs), k)
        if index.ntotal == 0 or k == 0:  # faiss asserts k > 0
            return out
        stale = self._stale
        kk = min(k + len(stale), index.ntotal)
        ef = int(params.get("ef", self.options["ef"]))
        if kk > ef:  # HNSW finds at most efSearch candidates: a smaller ef leaves holes in a deep
            self._set_ef(kk)  # candidate list (rescoring fetches k x R), so recall plateaus
        try:
            dist, pos = index.search(qs, kk)
        finally:
            if kk > ef:
                self._set_ef(ef)
        if not stale:  # the usual case: positions map to ids in one numpy step
            width = min(k, pos.shape[1])
            pos = pos[:, :width]
            hit = pos >= 0
            out.ids[:, :width] = np.where(hit, self._ids[np.where(hit, pos, 0)], -1)
            scores = -dist[:, :width] if self.metric == "l2" else dist[:, :width]
            out.scores[:, :width] = np.where(hit, scores, out.scores[:, :width])
            return out
        for row in range(len(qs)):
            col = 0
            for d, p in zip(dist[row], pos[row]):
                if p < 0 or int(p) in stale:
                    continue
                out.ids[row, col] = self._ids[p]
                out.scores[row, col] = -d if self.metric == "l2" else d
                col += 1
                if col == k:
                    break
        return out

    def count(self) -> int:
        self._require()
        if self._pos is not None:  # a writer keeps the map up to date: counting is free
            live_ids = set(self._pos)
            return len(live_ids) + len({int(i) for p in self._pending_ids for i in p} - live_ids)
        live = np.unique(self._ids)  # a reader: from the ids array, without building the map
        pending = np.unique(np.concatenate(self._pending_ids)) if self._pending_ids else live[:0]
        return int(len(live) + len(np.setdiff1d(pending, live, assume_unique=True)))

    def get_payloads(self, ids: Sequence[int]) -> list[dict[str, Any] | None]:
        if self._payloads is None:
            raise StoreError(f"FAISS store at {self.location} is not open.")
        return self._payloads.get(ids)

    def finalize(self) -> None:
        """Train (if the factory needs it) on what is buffered, then persist."""
        if not self._require().is_trained:
            self._train_and_add()
        self.flush()

    def flush(self) -> None:
        faiss = _faiss()
        index = self._require()
        folder = self._folder(self.location)
        assert self._payloads is not None
        self._payloads.commit()
        cpu = faiss.index_gpu_to_cpu(index) if self.options.get("gpu") else index
        # ids first: they only ever grow by appending, so a kill between the two renames leaves
        # ids ahead of the index, which open() cuts back to the index (never the other way round)
        _save_npy(folder / IDS_FILE, self._ids)
        write_file_atomic(folder / INDEX_FILE, lambda tmp: faiss.write_index(cpu, tmp))
        if self._pending_ids:
            ids_arr = np.concatenate(self._pending_ids)
            vecs = np.concatenate(self._pending_vecs).astype(np.float32)
            packed = np.concatenate([ids_arr.view(np.float32).reshape(-1, 2), vecs], axis=1)
            _save_npy(folder / PENDING_FILE, packed)
        elif (folder / PENDING_FILE).exists():
            (folder / PENDING_FILE).unlink()

    def close(self) -> None:
        if self._index is not None:
            try:
                if getattr(self, "_dirty", True):
                    self.flush()
            finally:
                self._index = None
                if self._payloads is not None:
                    self._payloads.close()
                    self._payloads = None
