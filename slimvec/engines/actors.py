"""The Ray Data stages: read blocks (tasks) and encode + reduce them (an actor pool).

Everything crossing process boundaries is plain data: file paths, JSON strings, numpy arrays and
the reducer artifact as the bytes of its files (``config.json`` + ``*.safetensors``), never a
pickled model object. Each actor loads the encoder once and rebuilds the reducer from the bytes.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.engines.blocks import doc_from_json, doc_to_json, iter_blocks
from slimvec.ids import ID_RULE
from slimvec.sources.readers import SourceSpec

__all__ = ["ReadBlocks", "read_blocks", "EncodeReduce", "write_segment_blocks", "artifact_bytes",
           "sample_key"]

log = logging.getLogger(__name__)


def sample_key(file_index: int, row: int) -> int:
    """One int64 per (file, row), to look up the fit sample's vectors."""
    return (int(file_index) << 40) | int(row)


def artifact_bytes(folder: str | os.PathLike[str]) -> dict[str, bytes]:
    """The files of a saved reducer artifact folder, relative path -> bytes."""
    root = Path(folder)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _load_artifact(files: dict[str, bytes]) -> Any:
    from slimvec.reducers import load_reducer

    with tempfile.TemporaryDirectory(prefix="slimvec-reducer-") as tmp:
        for rel, data in files.items():
            target = Path(tmp) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return load_reducer(tmp)


class ReadBlocks:
    """Ray Data ``map_batches`` function: one input file per call -> one row per block.

    Parameters
    ----------
    batch_size : int
        Rows per block.
    skip : dict
        ``{file index: [block, ...]}`` already committed (a resumed run).
    """

    def __init__(self, batch_size: int, skip: dict[int, list[int]]) -> None:
        self.batch_size = int(batch_size)
        self.skip = {int(k): frozenset(v) for k, v in skip.items()}

    def __call__(self, batch: dict[str, Any]) -> Iterator[dict[str, Any]]:
        for i in range(len(batch["file"])):
            index = int(batch["file"][i])
            spec = SourceSpec(str(batch["path"][i]), str(batch["text_column"][i]),
                              batch["id_column"][i] or None, batch["format"][i] or None)
            for block, docs, rejects, rows in iter_blocks(spec, self.batch_size,
                                                          self.skip.get(index, frozenset())):
                yield {"file": np.array([index]), "block": np.array([block]),
                       "path": np.array([spec.path], dtype=object),
                       "rows": np.array([rows]),
                       "docs": np.array([json.dumps([doc_to_json(d) for d in docs],
                                                    ensure_ascii=False)], dtype=object),
                       "rejects": np.array([json.dumps([r.to_json() for r in rejects],
                                                       ensure_ascii=False)], dtype=object)}


def read_blocks(batch: dict[str, Any], batch_size: int, skip: dict[int, list[int]]
                ) -> Iterator[dict[str, Any]]:
    """Ray Data task function: :class:`ReadBlocks` as a plain function (runs as Ray tasks)."""
    yield from ReadBlocks(batch_size, skip)(batch)


class EncodeReduce:
    """Ray Data actor: encode a block's documents, reduce them, return one 2-D array per block,
    with the actor's node id (``node``) and its seconds on the block (``encode_seconds``).

    Parameters
    ----------
    spec : dict
        The index's :meth:`BuildSpec.to_dict`; its encoder (a model folder visible to every node).
    reducer_files : dict or None
        Reducer artifact bytes (:func:`artifact_bytes`); ``None`` returns full vectors (the fit
        sample pass, before the reducer exists).
    encode_batch : int
        Sentences per forward pass.
    cache_keys, cache_vectors : ndarray, optional
        Full vectors already computed for the fit sample (keys from :func:`sample_key`); reused
        instead of encoding those rows again, exactly as the single-process ingest does.
    text_column : str
        For the rejects of truncated texts.
    threads : int
        Torch threads per actor.
    id_rule : int
        The index's id rule (``Manifest.id_rule``) for :func:`slimvec.ids.doc_ids`.
    keep_full : bool
        Also return each block's full vectors (column ``full``) beside the reduced ones, for an
        index that keeps them (``--keep-full``).
    """

    def __init__(self, spec: dict[str, Any], reducer_files: dict[str, bytes] | None, encode_batch: int,
                 cache_keys: np.ndarray | None = None, cache_vectors: np.ndarray | None = None,
                 text_column: str = "text", threads: int = 1, id_rule: int = ID_RULE,
                 keep_full: bool = False) -> None:
        import torch

        from slimvec.buildspec import BuildSpec

        torch.set_num_threads(max(1, int(threads)))
        self.encoder = BuildSpec.from_dict(spec).load_encoder(batch_size=encode_batch)
        self.reducer = _load_artifact(reducer_files) if reducer_files else None
        self.text_column = text_column
        self.id_rule = id_rule
        self.keep_full = bool(keep_full) and self.reducer is not None
        self.node = _node_id()
        self.cache: dict[int, np.ndarray] = {}
        if cache_keys is not None and cache_vectors is not None:
            self.cache = {int(k): cache_vectors[i] for i, k in enumerate(cache_keys)}
        log.info("encoder actor ready in pid %d", os.getpid())

    def _encode(self, file_index: int, docs: list[Any]) -> np.ndarray:
        out = np.empty((len(docs), self.encoder.dim), dtype=np.float32)
        todo = []
        for i, d in enumerate(docs):
            vec = self.cache.get(sample_key(file_index, d.row))
            if vec is None:
                todo.append(i)
            else:
                out[i] = vec
        if todo:
            out[todo] = self.encoder.encode([docs[i].text for i in todo])
        return out

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        from slimvec.ids import doc_ids
        from slimvec.sources.checks import truncation_rejects

        out: dict[str, list[Any]] = {k: [] for k in ("file", "block", "rows", "ids", "vectors", "path",
                                                     "payloads", "rejects", "full", "seconds")}
        for i in range(len(batch["file"])):
            t0 = time.perf_counter()
            index = int(batch["file"][i])
            docs = [doc_from_json(d) for d in json.loads(batch["docs"][i])]
            rejects = json.loads(batch["rejects"][i])
            vectors = self._encode(index, docs)
            out["full"].append(vectors)
            payloads = [{**d.payload, "text": d.text, "source_id": d.id} for d in docs]
            if docs:
                warn = truncation_rejects(self.encoder, docs, str(batch["path"][i]), self.text_column)
                rejects += [w.to_json() for w in warn]
            if self.reducer is not None and docs:
                if hasattr(self.reducer, "transform_with_clusters"):
                    vectors, clusters = self.reducer.transform_with_clusters(vectors)
                    payloads = [{**p, "cluster": int(c)} for p, c in zip(payloads, clusters)]
                else:
                    vectors = self.reducer.transform(vectors)
            elif self.reducer is not None:
                vectors = np.zeros((0, int(self.reducer.n_components_)), dtype=np.float32)
            out["file"].append(index)
            out["path"].append(str(batch["path"][i]))
            out["block"].append(int(batch["block"][i]))
            out["rows"].append(int(batch["rows"][i]))
            out["ids"].append(doc_ids([d.id for d in docs], self.id_rule))
            out["vectors"].append(np.asarray(vectors, dtype=np.float32))
            out["payloads"].append(json.dumps(payloads, ensure_ascii=False))
            out["rejects"].append(json.dumps(rejects, ensure_ascii=False))
            out["seconds"].append(time.perf_counter() - t0)  # parse, encode, reduce: this block
        result = {"file": np.array(out["file"]), "block": np.array(out["block"]),
                  "rows": np.array(out["rows"]), "ids": _ragged(out["ids"]),
                  "path": np.array(out["path"], dtype=object),
                  "vectors": _ragged(out["vectors"]),
                  "payloads": np.array(out["payloads"], dtype=object),
                  "rejects": np.array(out["rejects"], dtype=object),
                  "node": np.array([self.node] * len(out["file"]), dtype=object),
                  "encode_seconds": np.array(out["seconds"], dtype=np.float64)}
        if self.keep_full:
            result["full"] = _ragged(out["full"])
        return result


def write_segment_blocks(batch: dict[str, Any], index_folder: str) -> dict[str, Any]:
    """Ray Data task function: the encoded blocks of one call (:class:`EncodeReduce`'s rows)
    written as one segment of the index at ``index_folder`` (on storage every node sees), its
    graph built here (:func:`slimvec.indexer.segments.write_segment`). Returns one row: the
    segment's folder, its blocks (``[[file, block], ...]``), the source rows they read, the
    encoder nodes' figures and this node's write seconds; no vector goes back."""
    import uuid

    from slimvec.engines.blocks import reject_from_json
    from slimvec.index.manifest import Manifest
    from slimvec.indexer.segments import SEGMENTS_DIR, write_segment
    from slimvec.indexer.writer import VectorBatch

    t0 = time.perf_counter()
    manifest = Manifest.read(Path(index_folder))
    dim_out, dim_in = int(manifest.dim_out), int(manifest.dim_in)
    keys = [(int(f), int(k)) for f, k in zip(batch["file"], batch["block"])]
    encoded: dict[str, list[float]] = {}
    for i, node in enumerate(batch["node"]):
        entry = encoded.setdefault(str(node), [0, 0, 0.0])
        entry[0] += 1
        entry[1] += len(batch["ids"][i])
        entry[2] += float(batch["encode_seconds"][i])

    full = batch.get("full")

    def batches() -> Iterator[Any]:
        for i in range(len(keys)):
            yield VectorBatch(np.asarray(batch["ids"][i], dtype=np.int64),
                              np.asarray(batch["vectors"][i], dtype=np.float32).reshape(-1, dim_out),
                              json.loads(batch["payloads"][i]),
                              [reject_from_json(r) for r in json.loads(batch["rejects"][i])], 0,
                              source=str(batch["path"][i]),
                              reduced=True,
                              full=None if full is None else
                              np.asarray(full[i], dtype=np.float32).reshape(-1, dim_in))

    name = f"{_node_id()[:8]}-{uuid.uuid4().hex[:12]}"
    write_segment(Path(index_folder), manifest, name, batches())
    return {"segment": np.array([str(Path(index_folder) / SEGMENTS_DIR / name)], dtype=object),
            "blocks": np.array([json.dumps(keys)], dtype=object),
            "rows": np.array([int(np.sum(batch["rows"]))]),
            "encoded": np.array([json.dumps(encoded)], dtype=object),
            "node": np.array([_node_id()], dtype=object),
            "write_seconds": np.array([time.perf_counter() - t0])}


def _node_id() -> str:
    """The id of the Ray node this actor runs on (the driver names it by its address)."""
    import ray

    return str(ray.get_runtime_context().get_node_id())


def _ragged(arrays: list[np.ndarray]) -> np.ndarray:
    """Stack equal shapes (one 2-D array per block becomes (1, n, d)); object array otherwise."""
    if len({a.shape for a in arrays}) == 1:
        return np.stack(arrays)
    out = np.empty(len(arrays), dtype=object)
    for i, a in enumerate(arrays):
        out[i] = a
    return out
