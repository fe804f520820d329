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
"""

from __future__ import annotations

import os
from pathlib import Path

from slimvec.errors import ConfigError

__all__ = ["export_reducer", "EXPORT_FORMATS"]

EXPORT_FORMATS = ("npy", "faiss", "faiss-transform", "sentence-transformers")


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
    from slimvec.indexer.index import REDUCER_DIR, read_manifest
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
    from slimvec.indexer.encoder import Encoder

    encoder = Encoder(spec)
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

    from slimvec.indexer.index import store_folder
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
