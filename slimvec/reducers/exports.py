"""Exports of a fitted linear reducer ``y = normalize((x - b) A^T)`` to other runtimes.

- :func:`to_sentence_transformers`: append a ``Dense`` layer (with bias ``-A b``, identity
  activation) and a ``Normalize`` layer to a sentence-transformers model, so ``model.encode``
  emits the reduced vectors directly. Unlike the sentence-transformers PCA recipe (a bias-free
  Dense layer), the centring is kept.
- :func:`export_numpy`: ``components.npy`` + ``offset.npy`` + ``linear.json``, readable by any
  numpy program without slimvec (and without pickle).

The FAISS export lives on :meth:`slimvec.reducers.linear.LinearReducer.to_faiss`.
"""

from __future__ import annotations

import copy as _copy
import os
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from slimvec.errors import MissingDependencyError, PersistenceError
from slimvec.persistence import write_json_atomic

__all__ = ["to_sentence_transformers", "export_numpy", "LINEAR_JSON", "LinearMap"]


class LinearMap(Protocol):
    """What an export reads from a fitted linear reducer (``y = normalize((x - b) A^T)``).

    :class:`slimvec.reducers.linear.LinearReducer` is one. Typed by shape, not imported: linear.py
    imports this module for its ``to_sentence_transformers`` / ``export_numpy`` methods, so an
    import back would be a cycle (issue 24 item 7).
    """

    components_: np.ndarray
    offset_: np.ndarray
    n_features_in_: int
    n_components_: int

    @property
    def spec(self) -> str: ...

    def _check_fitted(self) -> None: ...

LINEAR_JSON = "linear.json"
FORMULA = "y = (x - offset) @ components.T; if normalize: y = y / ||y||_2 (zero rows stay zero)"


def _bias(reducer: LinearMap) -> np.ndarray:
    """``-A b`` in float64, then float32: the bias of ``y = A x - A b``."""
    return -(reducer.components_.astype(np.float64) @ reducer.offset_.astype(np.float64))


def to_sentence_transformers(reducer: LinearMap, model: Any, *, copy: bool = True) -> Any:
    """Append the reducer to a sentence-transformers model.

    Parameters
    ----------
    reducer : LinearReducer
        A fitted linear reducer.
    model : sentence_transformers.SentenceTransformer
        The encoder the reducer was fitted on (its output dimension must be the reducer's input).
    copy : bool, default True
        Work on a deep copy and leave ``model`` untouched; ``False`` appends in place.

    Returns
    -------
    SentenceTransformer
        ``model.encode(x)`` of the result equals ``reducer.transform(model.encode(x))`` up to
        float32 rounding. Save it with ``.save(folder)`` (safetensors); the identity activation
        is stored as ``torch.nn.modules.linear.Identity`` and loads without ``trust_remote_code``.

    Raises
    ------
    DimensionMismatchError
        The model's embedding dimension differs from the reducer's input dimension.
    """
    try:
        import torch
        from sentence_transformers.sentence_transformer.modules import Dense, Normalize
    except ImportError as exc:  # pragma: no cover - both are dependencies
        raise MissingDependencyError(
            "Exporting to sentence-transformers needs 'sentence-transformers>=5' and torch: "
            "pip install sentence-transformers."
        ) from exc
    from slimvec.errors import DimensionMismatchError

    reducer._check_fitted()
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    dim = getter()
    if dim is not None and int(dim) != reducer.n_features_in_:
        raise DimensionMismatchError(
            "sentence-transformers model output vs reducer input",
            reducer.n_features_in_,
            int(dim),
            "Append the reducer to the encoder it was fitted on.",
        )
    if copy:
        model = _copy.deepcopy(model)
    dense = Dense(
        reducer.n_features_in_,
        reducer.n_components_,
        bias=True,
        activation_function=torch.nn.Identity(),
        init_weight=torch.tensor(reducer.components_, dtype=torch.float32),
        init_bias=torch.tensor(_bias(reducer), dtype=torch.float32),
    )
    device = next(iter(model.parameters()), torch.empty(0)).device
    model.append(dense.to(device))
    if getattr(reducer, "normalize", False):
        model.append(Normalize())
    return model


def export_numpy(reducer: LinearMap, folder: str | os.PathLike[str]) -> Path:
    """Write ``components.npy``, ``offset.npy`` and ``linear.json`` into ``folder``.

    ``linear.json`` holds ``formula``, ``normalize``, ``dim_in``, ``dim_out``, ``dtype`` and the
    reducer ``spec``. Arrays are float32, saved with ``allow_pickle=False`` and readable with
    ``np.load(path, allow_pickle=False)``.

    Returns
    -------
    Path
        The folder.
    """
    reducer._check_fitted()
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, arr in (("components", reducer.components_), ("offset", reducer.offset_)):
            tmp = folder / f".{name}.tmp.npy"
            np.save(tmp, np.ascontiguousarray(arr, dtype=np.float32), allow_pickle=False)
            os.replace(tmp, folder / f"{name}.npy")
    except OSError as exc:
        raise PersistenceError(
            f"Cannot write the numpy export to {folder}: {exc.strerror or exc}. "
            "Check permissions and free space."
        ) from exc
    write_json_atomic(
        folder / LINEAR_JSON,
        {
            "formula": FORMULA,
            "normalize": bool(getattr(reducer, "normalize", False)),
            "dim_in": int(reducer.n_features_in_),
            "dim_out": int(reducer.n_components_),
            "dtype": "float32",
            "components": "components.npy",
            "offset": "offset.npy",
            "spec": reducer.spec,
        },
    )
    return folder
