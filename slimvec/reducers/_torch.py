"""Small torch helpers shared by the neural reducers (EmbedTextNet, MCR²).

Torch is imported lazily (only when a neural reducer is fitted or loaded). A fitted network is
persisted as its ``state_dict`` flattened into safetensors arrays under a prefix (``net.``), and
read back with shape checks; nothing here ever calls ``torch.load``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from slimvec.errors import MissingDependencyError, PersistenceError

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = [
    "require_torch",
    "module_arrays",
    "module_shapes",
    "load_module_arrays",
    "seeded",
    "minibatches",
    "apply_in_batches",
    "NetPersistence",
]

PREFIX = "net."


def require_torch(feature: str) -> Any:
    """Import and return ``torch``, or raise :class:`MissingDependencyError` naming ``feature``."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is a core dependency
        raise MissingDependencyError(
            f"{feature} needs PyTorch: pip install torch==2.13.0 (CPU wheels are enough)."
        ) from exc
    return torch


def module_arrays(module: torch.nn.Module, prefix: str = PREFIX) -> dict[str, np.ndarray]:
    """Flatten a module's ``state_dict`` (parameters and buffers) into numpy arrays."""
    return {
        # 0-d buffers (BatchNorm's num_batches_tracked) are stored as shape (1,): the artifact
        # writer keeps at least one dimension per array.
        prefix + key: np.ascontiguousarray(np.atleast_1d(value.detach().cpu().numpy()))
        for key, value in module.state_dict().items()
    }


def module_shapes(module: torch.nn.Module, prefix: str = PREFIX) -> dict[str, tuple[int, ...]]:
    """Shapes every saved array of ``module`` must have (for the load-time check)."""
    return {prefix + key: _saved_shape(value.shape) for key, value in module.state_dict().items()}


def _saved_shape(shape: Any) -> tuple[int, ...]:
    """Shape an array is saved with: scalars become (1,)."""
    return tuple(shape) or (1,)


def load_module_arrays(
    module: torch.nn.Module, arrays: dict[str, np.ndarray], prefix: str = PREFIX
) -> None:
    """Load arrays written by :func:`module_arrays` into ``module`` (strict: no missing keys).

    Raises
    ------
    PersistenceError
        An array is missing, extra, or has the wrong shape; the message names it.
    """
    import torch

    own = module.state_dict()
    state = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
    missing = sorted(set(own) - set(state))
    extra = sorted(set(state) - set(own))
    if missing or extra:
        raise PersistenceError(
            f"Saved network weights do not match the architecture: missing {missing[:5]}, "
            f"unexpected {extra[:5]}. The artifact was written by another version; re-fit it."
        )
    tensors = {}
    for key, ref in own.items():
        arr = state[key]
        if tuple(arr.shape) != _saved_shape(ref.shape):
            raise PersistenceError(
                f"Saved weight {prefix + key!r} has shape {tuple(arr.shape)}, "
                f"expected {tuple(ref.shape)}."
            )
        tensors[key] = torch.from_numpy(np.array(arr, copy=True).reshape(ref.shape)).to(ref.dtype)
    module.load_state_dict(tensors, strict=True)


@contextlib.contextmanager
def seeded(seed: int | None) -> Iterator[torch.Generator]:
    """Run a block with torch's global RNG seeded (and restored afterwards).

    Yields a ``torch.Generator`` seeded from ``seed`` for shuffling. ``seed=None`` draws a seed.
    """
    import torch

    if seed is None:
        seed = int(np.random.SeedSequence().generate_state(1)[0])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        gen = torch.Generator().manual_seed(int(seed))
        yield gen


def minibatches(
    n: int, batch_size: int, generator: torch.Generator, *, drop_last: bool
) -> Iterator[torch.Tensor]:
    """Yield shuffled index batches of ``range(n)``."""
    import torch

    order = torch.randperm(n, generator=generator)
    stop = n - (n % batch_size) if drop_last else n
    for start in range(0, stop, batch_size):
        idx = order[start : start + batch_size]
        if len(idx):
            yield idx


def apply_in_batches(
    fn: Callable[[torch.Tensor], torch.Tensor], X: np.ndarray, batch_size: int = 4096
) -> np.ndarray:
    """Apply a tensor function to float32 rows of ``X`` without gradients, batch by batch."""
    import torch

    outs = []
    with torch.inference_mode():
        for start in range(0, max(X.shape[0], 1), batch_size):
            xb = torch.from_numpy(np.ascontiguousarray(X[start : start + batch_size]))
            outs.append(fn(xb).detach().cpu().numpy())
    return np.concatenate(outs, axis=0)


class NetPersistence:
    """The saved state of a neural reducer (EmbedTextNet, MCR²): ``mean_``, ``scale_`` and its
    network's arrays (:func:`module_arrays`), restored into a fresh network of the saved shape.
    A subclass gives ``_new_net(meta)`` and ``_meta()``."""

    mean_: np.ndarray
    scale_: np.ndarray
    net_: Any

    def _new_net(self, meta: dict[str, Any]) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _state(self) -> dict[str, np.ndarray]:
        return {"mean_": self.mean_, "scale_": self.scale_, **module_arrays(self.net_)}

    def _expected_shapes(self, meta: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        shapes = {"mean_": (int(meta["n_features_in_"]),), "scale_": (1,)}
        return {**shapes, **module_shapes(self._new_net(meta))}

    def _restore(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        for key, value in meta.items():
            setattr(self, key, value)
        self.mean_ = np.asarray(arrays["mean_"], dtype=np.float32)
        self.scale_ = np.asarray(arrays["scale_"], dtype=np.float32)
        net = self._new_net(meta)
        load_module_arrays(net, arrays)
        net.eval()
        self.net_ = net
