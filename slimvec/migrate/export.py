"""Export an index's reducer for stacks that do not run slimvec.

- ``npy``: ``components.npy`` + ``offset.npy`` + ``linear.json`` (:func:`export_numpy`);
- ``faiss``: a complete FAISS index: ``IndexPreTransform`` (the reducer as a
  ``LinearTransform``, then L2 normalisation when the reducer normalises) in front of an
  ``IndexIDMap2`` over a flat inner-product index holding the index's reduced vectors under their
  ids: ``faiss.read_index`` it and ``search`` with full-size queries (local stores: FAISS, hnswlib,
  Qdrant Edge; the vectors are read back from the store folder);
- ``faiss-transform``: the same chain with nothing in it (``ntotal == 0``): ``add`` full-size
  vectors yourself;
- ``sentence-transformers``: the index's encoder (or ``model``) with the reducer appended as a
  ``Dense`` (+ ``Normalize``) layer, saved as a model folder whose ``encode`` emits reduced
  vectors directly.

Only the linear family (``pca``, ``svd``, ``whiten``, ``rp``, ``truncate``, …) can be exported.

:func:`export_vectors` (``slimvec export --vectors``) writes the full vectors the index kept
instead, under the ids given at ingest (issue 40 item 7), to bench or tune on them elsewhere
without re-encoding: ``npy`` a folder with ``vectors.npy`` (float32, n x dim) and ``ids.json``
(the ids in the same order, a JSON list ``slimvec get --ids`` reads), ``parquet`` one file with
columns ``id`` (as strings) and ``vector`` (``slimvec migrate --from parquet:FILE,id=id,vector=vector`` reads
it back; needs pyarrow). Deleted documents are not exported.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from slimvec.errors import ConfigError

__all__ = ["export_reducer", "export_vectors", "EXPORT_FORMATS", "VECTOR_FORMATS"]

EXPORT_FORMATS = ("npy", "faiss", "faiss-transform", "sentence-transformers")
#: formats of ``export --vectors``
VECTOR_FORMATS = ("npy", "parquet")


def export_reducer(index_dir: str | os.PathLike[str], fmt: str, out: str | os.PathLike[str],
                   model: str | None = None) -> Path:
    """Write the reducer of the index at ``index_dir`` in format ``fmt`` to ``out``.

    Parameters
    ----------
    index_dir : path
        A slimvec index folder.
    fmt : {"npy", "faiss", "faiss-transform", "sentence-transformers"}
    out : path
        Folder (``npy``, ``sentence-transformers``) or file (``faiss``, ``faiss-transform``).
    model : str, optional
        Encoder spec or model folder for ``sentence-transformers`` (default: the index's encoder;
        required for an index built by ``migrate``, which has none).

    Returns
    -------
    Path
        What was written.

    Raises
    ------
    ConfigError
        Unknown format, a non-linear reducer, or no model for ``sentence-transformers``.
    """
    from slimvec.index.folder import REDUCER_DIR, read_manifest
    from slimvec.reducers import load_reducer

    if fmt not in EXPORT_FORMATS:
        raise ConfigError(f"Unknown export format {fmt!r}. Known: {', '.join(EXPORT_FORMATS)}.")
    manifest = read_manifest(index_dir)
    reducer = load_reducer(Path(index_dir) / REDUCER_DIR)
    if not hasattr(reducer, "to_faiss"):
        raise ConfigError(f"The reducer {manifest.reducer!r} of {index_dir} is not linear and "
                          "cannot be exported; only pca, svd, whiten, rp, truncate ... can. Reduce "
                          "queries with slimvec.open(INDEX).reducer.transform instead.")
    out = Path(out)
    if fmt == "npy":
        from slimvec.reducers.exports import export_numpy

        return export_numpy(reducer, out)
    if fmt in ("faiss", "faiss-transform"):
        import faiss

        transform = reducer.to_faiss()
        flat = faiss.IndexFlatIP(int(reducer.n_components_))
        inner: object = flat
        if fmt == "faiss":
            inner = faiss.IndexIDMap2(flat)
            ids, vectors = _stored_vectors(Path(index_dir), manifest, int(reducer.n_components_))
            inner.add_with_ids(vectors, ids)
        transforms = list(getattr(transform, "transforms", [transform]))
        index = faiss.IndexPreTransform(inner)
        for t in reversed(transforms):  # the Python objects stay alive until written below
            index.prepend_transform(t)
        out.parent.mkdir(parents=True, exist_ok=True)
        faiss.write_index(index, str(out))
        return out
    spec = model or manifest.encoder
    if not spec:
        raise ConfigError(f"{index_dir} was built from vectors and records no encoder: pass the "
                          "encoder the vectors came from (--model NAME_OR_FOLDER).")
    from slimvec.buildspec import BuildSpec

    encoder = replace(BuildSpec.reopen(manifest), encoder=spec).load_encoder()
    if encoder.dim != reducer.n_features_in_:
        from slimvec.errors import DimensionMismatchError

        raise DimensionMismatchError(f"encoder {spec} output vs reducer input of {index_dir}",
                                     reducer.n_features_in_, encoder.dim)
    st = reducer.to_sentence_transformers(encoder.model)
    st.save(str(out))
    return out


def _stored_vectors(index_dir: Path, manifest: object, dim: int) -> tuple[object, object]:
    """(ids, reduced vectors) of a local store, read back through the migrate sources."""
    import numpy as np

    from slimvec.index.folder import store_folder
    from slimvec.migrate.sources import open_source

    folder = store_folder(index_dir)
    if not (folder / "slimvec_store.json").exists():
        raise ConfigError(f"The store of {index_dir} ({getattr(manifest, 'store', '?')}) is not a "
                          "local store folder this export can read its vectors from: export "
                          "--format faiss-transform (the reducer alone) and add the vectors yourself.")
    try:
        src = open_source(str(folder))
    except ConfigError:  # a Qdrant Edge store keeping full vectors: read the reduced ones
        src = open_source(f"qdrant-edge:{folder},vector=reduced")
    with src:
        if src.dim != dim:
            raise ConfigError(f"The store of {index_dir} holds {src.dim}-d vectors, expected the "
                              f"reducer's {dim}: export --format faiss-transform instead.")
        ids, parts = [], []
        for batch in src.batches(0, 4096):
            ids.append(np.asarray(batch.ids, dtype=np.int64))
            parts.append(np.asarray(batch.vectors, dtype=np.float32))
    if not ids:
        return np.empty(0, np.int64), np.empty((0, dim), np.float32)
    return np.concatenate(ids), np.ascontiguousarray(np.concatenate(parts))


def export_vectors(index_dir: str | os.PathLike[str], fmt: str, out: str | os.PathLike[str]
                   ) -> tuple[Path, int]:
    """Write the full vectors the index at ``index_dir`` kept, with the ids given at ingest.

    Parameters
    ----------
    index_dir : path
        An index that keeps its full vectors (the default recipe does).
    fmt : {"npy", "parquet"}
        ``npy``: ``out`` is a folder that gets ``vectors.npy`` and ``ids.json``; ``parquet``: ``out``
        is a file with columns ``id`` (as strings) and ``vector``.
    out : path

    Returns
    -------
    (Path, int)
        What was written and how many vectors (live documents only, in store-id order).

    Raises
    ------
    ConfigError
        Unknown format, or an index that keeps no full vectors (the message says how to keep them).
    MissingDependencyError
        ``parquet`` without pyarrow.
    """
    import numpy as np

    from slimvec.ids import user_id
    from slimvec.index.kept import open_kept
    from slimvec.index.locking import IndexLock
    from slimvec.index.manifest import Manifest

    if fmt not in VECTOR_FORMATS:
        raise ConfigError(f"export --vectors writes {' or '.join(VECTOR_FORMATS)}, not {fmt!r}.")
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError as exc:
            from slimvec.errors import MissingDependencyError

            raise MissingDependencyError("export --format parquet needs pyarrow, which is not "
                                         "installed: pip install pyarrow (or export --format npy)."
                                         ) from exc
    folder, out = Path(index_dir), Path(out)
    with IndexLock(folder, exclusive=False), open_kept(folder, Manifest.read(folder)) as kept:
        n, ids = kept.count(), list[Any]()
        batches = ((v, [user_id(int(i), p) for i, p in zip(sids, pays)])
                   for sids, v, pays, _ in kept.batches(0, 4096))
        if fmt == "npy":
            out.mkdir(parents=True, exist_ok=True)
            arr = np.lib.format.open_memmap(out / "vectors.npy", mode="w+", dtype=np.float32,
                                            shape=(n, kept.dim))
            for vectors, users in batches:
                arr[len(ids):len(ids) + len(users)] = vectors
                ids.extend(users)
            arr.flush()
            del arr
            (out / "ids.json").write_text(json.dumps(ids, ensure_ascii=False), encoding="utf-8")
            return out, len(ids)
        return out, _write_parquet(out, batches, kept.dim)


def _write_parquet(out: Path, batches: Any, dim: int) -> int:
    """Stream ``(vectors, user ids)`` batches into columns ``id`` (as strings: a column has one
    type, and the id rule maps ``"17"`` and ``17`` to one document) and ``vector``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("id", pa.string()), ("vector", pa.list_(pa.float32(), dim))])
    out.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with pq.ParquetWriter(str(out), schema) as writer:
        for vectors, users in batches:
            flat = pa.array(vectors.astype("float32", copy=False).ravel(), pa.float32())
            writer.write_table(pa.table({"id": pa.array([str(i) for i in users], pa.string()),
                                         "vector": pa.FixedSizeListArray.from_arrays(flat, dim)},
                                        schema=schema))
            n += len(users)
    return n
