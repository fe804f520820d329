"""``ae:D`` — a single-hidden-layer autoencoder (torch), as in the unsupervised-DR evaluation.

Encoder ``Linear(dim -> D)`` then an activation; decoder ``Linear(D -> dim)``; mean squared
reconstruction error; Adam; early stopping on a held-out split. The reduced vector is the encoder
output. Training needs torch; transform and inverse run in numpy from the saved weights.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np

from slimvec.errors import ConfigError, MissingDependencyError, PersistenceError
from slimvec.reducers.base import Reducer

__all__ = ["AutoencoderReducer", "ACTIVATIONS"]

log = logging.getLogger(__name__)

ACTIVATIONS = ("tanh", "relu", "sigmoid", "identity")
_NET_KEYS = ("encoder.weight", "encoder.bias", "decoder.weight", "decoder.bias")


def _np_activation(name: str, Z: np.ndarray) -> np.ndarray:
    if name == "tanh":
        return np.tanh(Z)
    if name == "relu":
        return np.maximum(Z, 0.0)
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-Z))
    return Z


class AutoencoderReducer(Reducer):
    """Single-hidden-layer autoencoder; the code (encoder output) is the reduced vector.

    Inputs are centred on the fit mean and divided by one scalar (the mean per-coordinate
    standard deviation): unit-norm sentence vectors have coordinates of about 0.05, far below the
    network's initial scale. ``val_fraction`` of the fit rows (seeded) are held out; training
    stops when their loss has not improved for ``patience`` epochs and the best weights are kept.

    ``inverse_transform`` decodes codes as ``transform`` returns them with ``normalize=False``;
    with ``normalize=True`` the codes lost their length and the reconstruction is approximate.

    Parameters
    ----------
    n_components : int, default 96
        Output dimension D (the hidden layer width).
    activation : {"tanh", "relu", "sigmoid", "identity"}, default "tanh"
        Applied to the encoder output.
    epochs : int, default 50
        Most training epochs.
    batch_size : int, default 128
    lr : float, default 1e-3
        Adam learning rate.
    patience : int, default 5
        Epochs without validation improvement before stopping.
    val_fraction : float, default 0.1
        Share of fit rows held out for early stopping (none when fewer than 20 rows).
    seed : int, default 0
        Seeds initialisation, split and batch order.
    normalize : bool, default True
        L2-normalise the reduced vectors.

    Fitted attributes
    -----------------
    weights_ : dict of str to ndarray
        ``encoder.weight`` (D, dim), ``encoder.bias`` (D,), ``decoder.weight`` (dim, D),
        ``decoder.bias`` (dim,): the torch ``state_dict``, saved to safetensors as ``net.*``.
    mean_ : ndarray of shape (n_features_in_,)
    scale_ : float
    n_epochs_ : int
        Epochs run.
    best_val_loss_ : float
        Best held-out MSE in the scaled space (training loss when nothing was held out).
    """

    name: ClassVar[str] = "ae"
    has_inverse: ClassVar[bool] = True

    def __init__(
        self,
        n_components: int = 96,
        activation: str = "tanh",
        epochs: int = 50,
        batch_size: int = 128,
        lr: float = 1e-3,
        patience: int = 5,
        val_fraction: float = 0.1,
        seed: int = 0,
        normalize: bool = True,
    ) -> None:
        self.n_components = n_components
        self.activation = activation
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.patience = patience
        self.val_fraction = val_fraction
        self.seed = seed
        self.normalize = normalize

    def _needs_samples_ge_components(self) -> bool:
        return False  # a bottleneck wider than the sample is merely wasteful, not ill-posed

    def _validate(self) -> None:
        if self.activation not in ACTIVATIONS:
            raise ConfigError(
                f"ae: unknown activation {self.activation!r}. Known: {', '.join(ACTIVATIONS)}."
            )
        for key in ("epochs", "batch_size"):
            value = getattr(self, key)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ConfigError(f"ae: {key} must be a positive integer, got {value!r}.")
        if not 0.0 <= float(self.val_fraction) < 1.0:
            raise ConfigError(f"ae: val_fraction must be in [0, 1), got {self.val_fraction!r}.")

    # ---------------------------------------------------------------- fitting
    def _fit(self, X: np.ndarray, **kwargs: Any) -> None:
        self._validate()
        try:
            import torch
        except ImportError as exc:  # pragma: no cover - torch is a dependency
            raise MissingDependencyError(
                "ae needs PyTorch to fit: pip install torch==2.13.0 (CPU wheels are enough)."
            ) from exc
        mean = X.mean(axis=0, dtype=np.float64)
        scale = float(X.std(axis=0, dtype=np.float64).mean())
        scale = scale if scale > 1e-12 else 1.0
        Xs = ((X - mean) / scale).astype(np.float32)
        rng = np.random.default_rng(self.seed)
        perm = rng.permutation(len(Xs))
        n_val = int(len(Xs) * float(self.val_fraction)) if len(Xs) >= 20 else 0
        val, train = Xs[perm[:n_val]], Xs[perm[n_val:]]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self.seed))
            net = _build(torch, X.shape[1], int(self.n_components), self.activation)
        # The matrices are small: one thread is faster than several fighting over shared cores
        # (measured 13x slower with 2 threads on a loaded 2-core machine).
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            weights, n_epochs, best = _train(torch, net, train, val, self, rng)
        finally:
            torch.set_num_threads(threads)
        self.weights_ = weights
        self.mean_ = mean.astype(np.float32)
        self.scale_ = scale
        self.n_epochs_ = n_epochs
        self.best_val_loss_ = best
        self.n_components_ = int(self.n_components)
        log.info("ae: %d epochs, best held-out MSE %.5f (scaled space)", n_epochs, best)

    # ------------------------------------------------------------ transforming
    def _transform(self, X: np.ndarray) -> np.ndarray:
        W, b = self.weights_["encoder.weight"], self.weights_["encoder.bias"]
        Xs = (X - self.mean_) / np.float32(self.scale_)
        return _np_activation(self.activation, Xs @ W.T + b)

    def _inverse_transform(self, Z: np.ndarray) -> np.ndarray:
        W, b = self.weights_["decoder.weight"], self.weights_["decoder.bias"]
        return (Z @ W.T + b) * np.float32(self.scale_) + self.mean_

    # ------------------------------------------------------------ persistence
    def _state(self) -> dict[str, np.ndarray]:
        state = {f"net.{k}": v for k, v in self.weights_.items()}
        state["mean_"] = self.mean_
        return state

    def _meta(self) -> dict[str, Any]:
        return {
            "n_components_": int(self.n_components_),
            "scale_": float(self.scale_),
            "n_epochs_": int(self.n_epochs_),
            "best_val_loss_": float(self.best_val_loss_),
        }

    def _restore(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        for key, value in meta.items():
            setattr(self, key, value)
        self.mean_ = arrays["mean_"]
        self.weights_ = {k: arrays[f"net.{k}"] for k in _NET_KEYS}
        if self.activation not in ACTIVATIONS:
            raise PersistenceError(
                f"ae artifact names an unknown activation {self.activation!r}; "
                f"known: {', '.join(ACTIVATIONS)}."
            )

    def _expected_shapes(self, meta: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        d, D = int(meta.get("n_features_in_", -1)), int(meta.get("n_components_", -1))
        return {
            "net.encoder.weight": (D, d),
            "net.encoder.bias": (D,),
            "net.decoder.weight": (d, D),
            "net.decoder.bias": (d,),
            "mean_": (d,),
        }


def _build(torch: Any, dim: int, n_components: int, activation: str) -> Any:
    nn = torch.nn
    acts = {"tanh": nn.Tanh, "relu": nn.ReLU, "sigmoid": nn.Sigmoid, "identity": nn.Identity}

    class Autoencoder(nn.Module):  # type: ignore[name-defined]  # nn is imported at run time, above
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Linear(dim, n_components)
            self.act = acts[activation]()
            self.decoder = nn.Linear(n_components, dim)

        def forward(self, x: Any) -> Any:
            return self.decoder(self.act(self.encoder(x)))

    return Autoencoder()


def _train(
    torch: Any,
    net: Any,
    train: np.ndarray,
    val: np.ndarray,
    params: AutoencoderReducer,
    rng: np.random.Generator,
) -> tuple[dict[str, np.ndarray], int, float]:
    """Adam on MSE with early stopping; returns the best weights, epochs run, best loss."""
    opt = torch.optim.Adam(net.parameters(), lr=float(params.lr))
    loss_fn = torch.nn.MSELoss()
    xt = torch.from_numpy(train)
    xv = torch.from_numpy(val) if len(val) else xt
    best, best_state, stale, epoch = float("inf"), None, 0, 0
    for epoch in range(1, int(params.epochs) + 1):  # noqa: B007 - returned: the epochs run
        net.train()
        order = torch.from_numpy(rng.permutation(len(xt)))
        for start in range(0, len(xt), int(params.batch_size)):
            batch = xt[order[start : start + int(params.batch_size)]]
            opt.zero_grad()
            loss = loss_fn(net(batch), batch)
            loss.backward()
            opt.step()
        net.eval()
        with torch.no_grad():
            current = float(loss_fn(net(xv), xv))
        if current < best - 1e-7:
            best, stale = current, 0
            best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
        else:
            stale += 1
            if stale >= int(params.patience):
                break
    state = best_state if best_state is not None else net.state_dict()
    weights = {k: np.ascontiguousarray(state[k].cpu().numpy(), dtype=np.float32) for k in _NET_KEYS}
    return weights, epoch, best
