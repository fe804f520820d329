"""``mcr2:D,clusters=K`` — an MCR² projection head with built-in clusters.

Ševerdija et al., "Compressing Sentence Representation with Maximum Coding Rate Reduction"
(MIPRO 2023), training the NMCE head of Li, Chen, LeCun and Sommer (2022) on frozen encoder
vectors of pairs of similar sentences. The head gives a D-dimensional unit vector *and* a cluster
id per sentence, so an index can store each document's cluster without running k-means.
"""

from __future__ import annotations

import copy
import logging
import math
from typing import Any, ClassVar

import numpy as np

from slimvec.errors import ConfigError
from slimvec.reducers._torch import NetPersistence, apply_in_batches, minibatches, require_torch, seeded
from slimvec.reducers.base import Reducer

__all__ = ["MCR2Reducer", "build_mcr2_net", "stack_pairs", "check_pairs", "mine_neighbor_pairs"]

log = logging.getLogger(__name__)

_PROBE = 2048


def build_mcr2_net(dim_in: int, n_components: int, clusters: int, hidden: int, layers: int):
    """MLP trunk (``layers`` x Linear + ELU, width ``hidden``) with two heads.

    ``forward(x)`` returns ``(z, logits)``: ``z`` the L2-normalised feature head output (D) and
    ``logits`` the cluster head output (K).
    """
    torch = require_torch("mcr2")
    nn = torch.nn

    class MCR2Head(nn.Module):  # type: ignore[name-defined]  # nn is imported at run time, above
        def __init__(self) -> None:
            super().__init__()
            mods: list[Any] = []
            width = dim_in
            for _ in range(layers):
                mods += [nn.Linear(width, hidden), nn.ELU()]
                width = hidden
            self.trunk = nn.Sequential(*mods)
            self.features = nn.Linear(width, n_components)
            self.cluster = nn.Linear(width, clusters)

        def forward(self, x):
            h = self.trunk(x)
            return nn.functional.normalize(self.features(h), dim=1), self.cluster(h)

    return MCR2Head()


def stack_pairs(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Turn two aligned arrays of similar vectors into ``(X, pairs)`` for :meth:`MCR2Reducer.fit`.

    Row ``i`` of ``A`` and row ``i`` of ``B`` are a positive pair; ``X = vstack(A, B)`` and
    ``pairs[i] = (i, len(A) + i)``. Encode the two columns of a pairs file and pass them here.
    """
    A = np.asarray(A, dtype=np.float32)
    B = np.asarray(B, dtype=np.float32)
    if A.shape != B.shape or A.ndim != 2:
        raise ConfigError(
            f"stack_pairs: both sides must be 2-D arrays of the same shape, got {A.shape} and {B.shape}."
        )
    n = A.shape[0]
    pairs = np.stack([np.arange(n), np.arange(n, 2 * n)], axis=1).astype(np.int64)
    return np.vstack([A, B]), pairs


def check_pairs(pairs: Any, n_rows: int) -> np.ndarray:
    """Validate ``pairs`` as an (n_pairs, 2) integer array of row indices into ``X``."""
    try:
        arr = np.asarray(pairs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"pairs must be an (n_pairs, 2) array of row indices: {exc}.") from exc
    if arr.ndim != 2 or arr.shape[1] != 2 or arr.shape[0] == 0:
        raise ConfigError(
            f"pairs must have shape (n_pairs, 2) with n_pairs >= 1, got {arr.shape}. "
            "Each row holds the indices in X of two similar sentences."
        )
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.equal(np.mod(arr, 1), 0)):
            raise ConfigError(f"pairs must hold integer row indices, got dtype {arr.dtype}.")
        arr = arr.astype(np.int64)
    bad = (arr < 0) | (arr >= n_rows)
    if bad.any():
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        raise ConfigError(
            f"pairs row {row} = {arr[row].tolist()} indexes outside X, which has {n_rows} rows."
        )
    return arr.astype(np.int64)


def mine_neighbor_pairs(X: np.ndarray) -> np.ndarray:
    """Self-supervised fallback: pair every row with its nearest other row (FAISS k-NN)."""
    from slimvec.reducers._knn import knn_graph

    nn_idx = knn_graph(X, 1)[:, 0]
    return np.stack([np.arange(X.shape[0]), nn_idx], axis=1).astype(np.int64)


#: the default pair-cosine weight: the paper's value collapses the features on our data
#: (docs/benchmarks/learned.md: features' task recall@10 0.497 at lam 2000, 0.980 at lam 100)
DEFAULT_LAM = 100.0


def _lam_value(lam: Any, n_components: int) -> float:
    """``lam`` as a float: a positive number, ``"paper"`` (2000 for D <= 100, else 4000) or None."""
    if lam is None:
        return DEFAULT_LAM
    if isinstance(lam, str) and lam.strip().lower() == "paper":
        return 2000.0 if n_components <= 100 else 4000.0
    if isinstance(lam, bool) or not isinstance(lam, (int, float, np.floating)) or not lam >= 0:
        raise ConfigError(f"mcr2: lam must be a number >= 0 or 'paper' (the paper's 2000 / 4000), "
                          f"got {lam!r}.")
    return float(lam)


class MCR2Reducer(NetPersistence, Reducer):
    """MCR² projection head with a cluster head (NMCE-style), trained on positive pairs.

    Learns from pairs: ``fit(X, pairs=P)`` where ``P`` is an (n_pairs, 2) integer array of row
    indices of ``X`` holding similar sentences (see :func:`stack_pairs`). Without ``pairs`` every
    row is paired with its nearest neighbour (a weaker, self-supervised signal; logged).

    Loss per batch of pairs ``(a, b)``, ``Z̄ = normalize((z_a + z_b) / 2)``,
    ``Π̄ = (gumbel_softmax(l_a) + gumbel_softmax(l_b)) / 2``::

        -R(Z̄) + sum_k R_k(Z̄, Π̄) - lam * mean(cos(z_a, z_b))

    with ``R`` and ``R_k`` from :mod:`slimvec.reducers.losses` (logdet in float32). Batches have a
    fixed size (``drop_last``) because ``R`` depends on it.

    Trap handling:

    - *Uniform assignments give no signal* (``sum_k R_k == R``): the first ``warmup_epochs``
      train the features alone with the total-coding-rate term ``-R - lam * cos``; then the
      cluster head joins with its own learning rate, ``cluster_lr_mult`` times the trunk's.
      The log shows ``R - sum R_k`` per epoch (zero means the clusters carry nothing).
    - *Collapse under a large lam*: after every epoch a fixed probe of up to 2048 rows is
      embedded; if the mean cosine between random probe vectors exceeds ``collapse_cos`` or its
      coding rate falls below ``collapse_frac`` of the best seen, training stops, the last
      healthy weights are restored, ``collapsed_`` is set and a warning logged.

    Parameters
    ----------
    n_components : int, default 128
        Feature dimension D.
    clusters : int, default 128
        Number of clusters K of the cluster head.
    hidden : int, default 1024
    layers : int, default 2
        Hidden Linear + ELU layers of the trunk.
    lam : float or "paper", default 100
        Weight of the pair cosine. ``"paper"`` uses the paper's 2000 for D <= 100, else 4000,
        under which the features collapsed in every run on our data (task recall@10 0.50 of the
        features vs 0.98 at ``lam=100``; docs/benchmarks/learned.md); ``None`` means the default.
    eps2 : float, default 0.5
        Squared distortion ``eps^2`` of the coding rates.
    tau : float, default 0.5
        Gumbel-softmax temperature.
    epochs : int, default 60
    warmup_epochs : int, default 10
    batch_size : int, default 256
        Pairs per batch (lowered to the number of pairs if fewer).
    lr : float, default 1e-3
        AdamW learning rate of the trunk and feature head.
    cluster_lr_mult : float, default 10.0
    collapse_cos : float, default 0.8
    collapse_frac : float, default 0.5
    seed : int, default 0
    normalize : bool, default True
        The features are unit vectors already; kept for the common contract.

    Fitted attributes
    -----------------
    lam_ : float
    collapsed_ : bool
    clusters_used_ : int
        Distinct clusters predicted on the probe rows at the end of training.
    loss_history_ : list of dict
        Per epoch: mean ``R``, ``sum_Rk``, ``cos`` (pairs), ``probe_cos`` (random rows),
        ``probe_R``, phase.
    """

    name: ClassVar[str] = "mcr2"
    learns_from_pairs: ClassVar[bool] = True
    has_clusters: ClassVar[bool] = True

    def __init__(
        self,
        n_components: int = 128,
        clusters: int = 128,
        hidden: int = 1024,
        layers: int = 2,
        lam: float | str | None = DEFAULT_LAM,
        eps2: float = 0.5,
        tau: float = 0.5,
        epochs: int = 60,
        warmup_epochs: int = 10,
        batch_size: int = 256,
        lr: float = 1e-3,
        cluster_lr_mult: float = 10.0,
        collapse_cos: float = 0.8,
        collapse_frac: float = 0.5,
        seed: int = 0,
        normalize: bool = True,
    ) -> None:
        self.n_components = n_components
        self.clusters = clusters
        self.hidden = hidden
        self.layers = layers
        self.lam = lam
        self.eps2 = eps2
        self.tau = tau
        self.epochs = epochs
        self.warmup_epochs = warmup_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.cluster_lr_mult = cluster_lr_mult
        self.collapse_cos = collapse_cos
        self.collapse_frac = collapse_frac
        self.seed = seed
        self.normalize = normalize

    def _needs_samples_ge_components(self) -> bool:
        return False

    def _check_params(self) -> None:
        for key in ("clusters", "hidden", "layers", "epochs", "batch_size"):
            value = getattr(self, key)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ConfigError(f"mcr2: {key} must be a positive integer, got {value!r}.")
        if self.clusters < 2:
            raise ConfigError(f"mcr2: clusters must be >= 2, got {self.clusters}.")
        _lam_value(self.lam, self.n_components)
        if not self.eps2 > 0 or not self.tau > 0:
            raise ConfigError(f"mcr2: eps2 and tau must be > 0, got {self.eps2!r}, {self.tau!r}.")

    # ------------------------------------------------------------------ fitting
    def _fit(self, X: np.ndarray, pairs: Any = None, **kwargs: Any) -> None:
        torch = require_torch("mcr2")
        from slimvec.reducers.losses import coding_rate, coding_rate_per_cluster

        F = torch.nn.functional
        self._check_params()
        n, dim = X.shape
        if pairs is None:
            log.warning(
                "mcr2: no training pairs given; pairing every row with its nearest neighbour. "
                "Pass fit(X, pairs=...) with pairs of similar sentences for the paper's setting."
            )
            pairs = mine_neighbor_pairs(X)
        pairs = check_pairs(pairs, n)
        n_pairs = pairs.shape[0]
        batch = min(int(self.batch_size), n_pairs)
        if batch < 2:
            raise ConfigError(f"mcr2 needs at least 2 training pairs, got {n_pairs}.")
        if batch < self.batch_size:
            log.warning("mcr2: only %d pairs, batch size lowered from %d.", n_pairs, self.batch_size)
        lam = _lam_value(self.lam, self.n_components)

        mean = X.mean(axis=0, dtype=np.float64)
        scale = float(np.sqrt(X.var(axis=0, dtype=np.float64)).mean()) or 1.0
        self.mean_ = mean.astype(np.float32)
        self.scale_ = np.array([scale], dtype=np.float32)
        data = torch.from_numpy(self._standardize(X))
        rng = np.random.default_rng(self.seed)
        probe = data[torch.from_numpy(rng.choice(n, size=min(n, _PROBE), replace=False))]
        probe_perm = torch.from_numpy(rng.permutation(probe.shape[0]))
        ia = torch.from_numpy(pairs[:, 0])
        ib = torch.from_numpy(pairs[:, 1])

        history: list[dict[str, Any]] = []
        collapsed = False
        with seeded(self.seed) as gen:
            net = build_mcr2_net(dim, self.n_components, self.clusters, self.hidden, self.layers)
            head = list(net.cluster.parameters())
            body = [p for name, p in net.named_parameters() if not name.startswith("cluster.")]
            opt = torch.optim.AdamW(
                [{"params": body, "lr": self.lr}, {"params": head, "lr": self.lr * self.cluster_lr_mult}]
            )
            best_state = copy.deepcopy(net.state_dict())
            best_probe_rate = -math.inf
            for epoch in range(self.epochs):
                phase = "tcr" if epoch < self.warmup_epochs else "mcr2"
                net.train()
                sums = {"R": 0.0, "sum_Rk": 0.0, "cos": 0.0, "loss": 0.0}
                steps = 0
                for idx in minibatches(n_pairs, batch, gen, drop_last=True):
                    za, la = net(data[ia[idx]])
                    zb, lb = net(data[ib[idx]])
                    if not bool(torch.isfinite(za).all() and torch.isfinite(zb).all()):
                        sums["loss"] = math.nan  # diverged: caught below, best weights restored
                        break
                    zbar = F.normalize(za + zb, dim=1)
                    rate = coding_rate(zbar, self.eps2)
                    cos = (za * zb).sum(dim=1).mean()
                    if phase == "tcr":
                        with torch.no_grad():
                            pi = (F.softmax(la, 1) + F.softmax(lb, 1)) / 2
                            rate_k = coding_rate_per_cluster(zbar, pi, self.eps2)
                        loss = -rate - lam * cos
                    else:
                        pi = (F.gumbel_softmax(la, tau=self.tau) + F.gumbel_softmax(lb, tau=self.tau)) / 2
                        rate_k = coding_rate_per_cluster(zbar, pi, self.eps2)
                        loss = -rate + rate_k - lam * cos
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    sums["R"] += rate.item()
                    sums["sum_Rk"] += rate_k.item()
                    sums["cos"] += cos.item()
                    sums["loss"] += loss.item()
                    steps += 1
                means = {k: v / max(steps, 1) for k, v in sums.items()}
                net.eval()
                with torch.inference_mode():
                    pz, plog = net(probe)
                    finite = bool(torch.isfinite(pz).all())  # NaN weights: no Cholesky on them
                    probe_cos = float((pz * pz[probe_perm]).sum(1).mean()) if finite else math.nan
                    probe_rate = float(coding_rate(pz, self.eps2)) if finite else math.nan
                    used = int(torch.unique(plog.argmax(1)).numel())
                row = {"epoch": epoch + 1, "phase": phase, **means, "probe_cos": probe_cos,
                       "probe_R": probe_rate, "clusters_used": used}
                history.append(row)
                log.info(
                    "mcr2 epoch %d/%d [%s] R=%.3f sumRk=%.3f R-sumRk=%.3f cos=%.4f "
                    "probe_cos=%.3f probe_R=%.2f clusters=%d",
                    epoch + 1, self.epochs, phase, means["R"], means["sum_Rk"],
                    means["R"] - means["sum_Rk"], means["cos"], probe_cos, probe_rate, used,
                )
                if not (finite and all(math.isfinite(v) for v in means.values())):
                    collapsed = True
                    log.warning("mcr2: non-finite loss at epoch %d; restoring the last healthy weights.",
                                epoch + 1)
                    break
                if probe_cos > self.collapse_cos or probe_rate < self.collapse_frac * best_probe_rate:
                    collapsed = True
                    log.warning(
                        "mcr2: features collapsed at epoch %d (mean cosine of random rows %.3f > %.2f, "
                        "or coding rate %.2f < %.2f x best %.2f); restoring the last healthy weights. "
                        "Lower lam or raise eps2.",
                        epoch + 1, probe_cos, self.collapse_cos, probe_rate, self.collapse_frac,
                        best_probe_rate,
                    )
                    break
                best_probe_rate = max(best_probe_rate, probe_rate)
                best_state = copy.deepcopy(net.state_dict())
            net.load_state_dict(best_state)
            net.eval()
        self.net_ = net
        self.lam_ = lam
        self.collapsed_ = collapsed
        self.loss_history_ = history
        self.n_components_ = int(self.n_components)
        with torch.inference_mode():
            self.clusters_used_ = int(torch.unique(net(probe)[1].argmax(1)).numel())

    # ------------------------------------------------------------- transforming
    def _standardize(self, X: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray((X - self.mean_) / self.scale_[0], dtype=np.float32)

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return apply_in_batches(lambda xb: self.net_(xb)[0], self._standardize(X))

    def predict_cluster(self, X: Any) -> np.ndarray:
        """Cluster id (int64 in ``[0, clusters)``) of each row: argmax of the cluster head."""
        X = self._check_input(X, "predict_cluster input")
        out = apply_in_batches(lambda xb: self.net_(xb)[1].argmax(dim=1), self._standardize(X))
        return out.astype(np.int64)

    def cluster_scores(self, X: Any) -> np.ndarray:
        """Cluster-head logits (float32, shape (n, clusters)): route a query to its top-p clusters."""
        X = self._check_input(X, "cluster_scores input")
        return apply_in_batches(lambda xb: self.net_(xb)[1], self._standardize(X)).astype(np.float32)

    def transform_with_clusters(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(transform(X), predict_cluster(X))`` in one pass of the network."""
        X = self._check_input(X)
        Xs = self._standardize(X)
        torch = require_torch("mcr2")
        feats, ids = [], []
        with torch.inference_mode():
            for start in range(0, max(Xs.shape[0], 1), 4096):
                z, logits = self.net_(torch.from_numpy(Xs[start : start + 4096]))
                feats.append(z.numpy())
                ids.append(logits.argmax(dim=1).numpy())
        Z = np.concatenate(feats).astype(np.float32)
        if self.normalize:
            from slimvec.reducers.base import l2_normalize

            Z = l2_normalize(Z)
        return np.ascontiguousarray(Z), np.concatenate(ids).astype(np.int64)

    # ------------------------------------------------------------- persistence
    def _new_net(self, meta: dict[str, Any]):
        return build_mcr2_net(
            int(meta["n_features_in_"]), int(meta["n_components_"]), int(self.clusters),
            int(self.hidden), int(self.layers),
        )

    def _meta(self) -> dict[str, Any]:
        return {
            "n_components_": int(self.n_components_),
            "lam_": float(self.lam_),
            "collapsed_": bool(self.collapsed_),
            "clusters_used_": int(self.clusters_used_),
            "loss_history_": self.loss_history_,
        }
