"""``embedtextnet:D`` — EmbedTextNet (Hwang, Taha, Nechaev, ACL Findings 2023).

A variational auto-encoder over precomputed sentence embeddings: a 1-D convolutional encoder maps
the embedding (read as a one-channel sequence) to the mean and log-variance of a D-dimensional
Gaussian, a transposed-convolution decoder maps a sample back. The loss is a *weighted*
reconstruction term plus the KL term, and after ``corr_after`` epochs a correlation penalty
``1 - r`` (Pearson r between each embedding and its reconstruction). The reduced vector is the
encoder mean ``mu`` (no sampling at inference).
"""

from __future__ import annotations

import logging
import math
from typing import Any, ClassVar

import numpy as np

from slimvec.errors import ConfigError
from slimvec.reducers._torch import NetPersistence, apply_in_batches, minibatches, require_torch, seeded
from slimvec.reducers.base import Reducer

__all__ = ["EmbedTextNetReducer", "build_embedtextnet", "gamma_rule", "DEFAULT_GAMMA", "PAPER_GAMMA"]

log = logging.getLogger(__name__)

#: the decoder upsamples by 2 three times, so it starts from ceil(dim / 8) positions
_UPSAMPLE = 8
#: soft bound of the encoder's log-variance (sigma between e^-5 and e^5)
LOGVAR_BOUND = 10.0


#: the default gamma: the value the project's measurements favour on sentence embeddings
#: (BENCHMARKS.md, reducer D-sweep: task recall@10 0.892 vs PCA 0.881 at D = 16, where the paper's
#: rule gives 0.400; docs/benchmarks/learned.md has the ``slimvec bench`` check)
DEFAULT_GAMMA = 1000.0
#: ``gamma=paper`` selects the paper's rule (:func:`gamma_rule`)
PAPER_GAMMA = "paper"


def gamma_rule(first_rec: float) -> float:
    """The paper's tuning value: ``gamma = 10`` if the first reconstruction loss < 0.1, else 0.3."""
    return 10.0 if first_rec < 0.1 else 0.3


def _check_gamma(gamma: Any) -> float | str:
    """``gamma`` as a positive float or :data:`PAPER_GAMMA`; anything else is a ConfigError."""
    if isinstance(gamma, str) and gamma.strip().lower() == PAPER_GAMMA:
        return PAPER_GAMMA
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not gamma > 0 \
            or not math.isfinite(gamma):
        raise ConfigError(f"embedtextnet: gamma must be a positive number or 'paper' (the paper's "
                          f"rule: 10 or 0.3 from the first reconstruction loss), got {gamma!r}.")
    return float(gamma)


def build_embedtextnet(dim_in: int, n_components: int, width: int = 32, leaky_slope: float = 0.01):
    """Build the encoder/decoder module of Table 10 (torch ``nn.Module``).

    Encoder: ``Conv1d(1->w) BN LReLU AvgPool2 -> Conv1d(w->2w) BN LReLU AvgPool2 ->
    Conv1d(2w->4w) BN LReLU -> flatten -> Linear to mu and to logvar`` (kernel 5, stride 1,
    "same" padding). Decoder: ``Linear(D -> 4w * ceil(dim/8)) -> ConvT(4w->4w) -> ConvT(4w->2w)
    -> ConvT(2w->w)`` each stride 2 with BN + LReLU, then ``ConvT(w->1)`` stride 1, linear, and
    the output cropped to ``dim_in``.
    """
    torch = require_torch("embedtextnet")
    nn = torch.nn

    class EmbedTextNet(nn.Module):  # type: ignore[name-defined]  # nn is imported at run time, above
        def __init__(self) -> None:
            super().__init__()
            c1, c2, c3 = width, 2 * width, 4 * width
            act = lambda: nn.LeakyReLU(leaky_slope)  # noqa: E731
            self.dim_in = dim_in
            self.encoder = nn.Sequential(
                nn.Conv1d(1, c1, 5, padding=2), nn.BatchNorm1d(c1), act(), nn.AvgPool1d(2),
                nn.Conv1d(c1, c2, 5, padding=2), nn.BatchNorm1d(c2), act(), nn.AvgPool1d(2),
                nn.Conv1d(c2, c3, 5, padding=2), nn.BatchNorm1d(c3), act(),
                nn.Flatten(),
            )
            flat = c3 * (dim_in // 2 // 2)
            self.to_mu = nn.Linear(flat, n_components)
            self.to_logvar = nn.Linear(flat, n_components)
            self.start_len = math.ceil(dim_in / _UPSAMPLE)
            self.from_z = nn.Linear(n_components, c3 * self.start_len)
            up = dict(kernel_size=5, stride=2, padding=2, output_padding=1)
            self.decoder = nn.Sequential(
                nn.ConvTranspose1d(c3, c3, **up), nn.BatchNorm1d(c3), act(),
                nn.ConvTranspose1d(c3, c2, **up), nn.BatchNorm1d(c2), act(),
                nn.ConvTranspose1d(c2, c1, **up), nn.BatchNorm1d(c1), act(),
                nn.ConvTranspose1d(c1, 1, 5, stride=1, padding=2),
            )

        def encode(self, x):
            h = self.encoder(x.unsqueeze(1))
            # log-variance softly bounded to (-LOGVAR_BOUND, LOGVAR_BOUND): exp() cannot overflow
            bound = LOGVAR_BOUND
            return self.to_mu(h), bound * torch.tanh(self.to_logvar(h) / bound)

        def decode(self, z):
            h = self.from_z(z).view(z.shape[0], -1, self.start_len)
            return self.decoder(h).squeeze(1)[:, : self.dim_in]

        def forward(self, x):
            mu, logvar = self.encode(x)
            if self.training:
                z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
            else:
                z = mu
            return self.decode(z), mu, logvar

    return EmbedTextNet()


class EmbedTextNetReducer(NetPersistence, Reducer):
    """EmbedTextNet: a convolutional VAE with weighted reconstruction and correlation losses.

    Loss per batch: ``W * L_rec + L_KL`` and, from epoch ``corr_after`` on (0-based, so the
    penalty joins after N full epochs), ``+ mean(1 - r)``. The reduced vector is ``mu``.

    Choices where the paper (whose code is not public) is ambiguous, each a parameter:

    - **W (Algorithm 1).** The first epoch trains the plain VAE (``W = 1``); from its mean losses
      ``W = gamma * mean(L_KL) / mean(L_rec)``, with ``gamma = 10`` if ``mean(L_rec) < 0.1``
      else ``0.3``. So after epoch 1 the weighted reconstruction is ``gamma`` times the KL term,
      which matches the paper's stated intent (more weight on reconstruction; a larger gamma when
      the reconstruction loss is small). ``W`` is clipped to ``[1, w_max]`` so a vanishing KL in
      the first epoch cannot switch reconstruction off.
    - **gamma (ours: 1000 by default).** The paper's rule (``gamma=paper``) lets the KL term win
      on unit-norm sentence embeddings (a partial posterior collapse: task recall@10 0.400 at
      D = 16 where PCA keeps 0.881); ``gamma=1000`` keeps the reconstruction dominant and beats
      PCA at D = 16 (0.892). See BENCHMARKS.md (reducer D-sweep) and
      docs/benchmarks/learned.md.
    - **Loss scales.** ``L_rec`` is the MSE averaged over coordinates and batch; ``L_KL`` is summed
      over latent dimensions and averaged over the batch; the correlation term is averaged over
      the batch (each ``1 - r`` lies in [0, 2]).
    - **Input scaling (ours).** Inputs are centred on the fit mean and divided by one scalar (the
      mean per-coordinate standard deviation; one scalar because MiniLM has a constant
      coordinate). Unit-norm sentence vectors have coordinates of ~0.05, far below the network's
      O(1) initial output, and without this the VAE learned slowly or diverged under RMSprop at
      lr 2e-3. The gamma rule is applied to ``L_rec`` in the original units (``rec * scale^2``),
      as the paper measured it on raw embeddings; for unit-norm MiniLM vectors it picks 10.
    - **Optimiser.** RMSprop with Keras' defaults (``alpha=0.9``, ``eps=1e-7``): the paper's
      "Dense" layers and RMSprop suggest Keras, and torch's ``alpha=0.99`` makes the first steps
      ten times larger.
    - **Table 10.** Kernel 5, stride 1 with "same" padding in the encoder; average pooling (2)
      after the first two convolutions; BN + LeakyReLU (slope ``leaky_slope``, Keras' default
      0.3) after every convolution except the last transposed one; the decoder's first three
      transposed convolutions have stride 2 ("others: 2"), the last stride 1 to one channel.
      Widths are ``width, 2*width, 4*width`` (32, 64, 128).
    - **Batch size.** ``batch_size=None`` uses 256, or 32 when fitting on fewer than
      ``small_set`` vectors (the paper used 32 for SBERT on STS-B, ~11k sentences).
    - **Epochs.** Default 30 (the paper: 30 for text similarity, 40 otherwise).

    Parameters
    ----------
    n_components : int, default 64
        Latent dimension D.
    epochs : int, default 30
    lr : float, default 2e-3
        RMSprop learning rate.
    batch_size : int or None, default None
    small_set : int, default 12000
    corr_after : int, default 5
        N of Algorithm 1: epochs before the correlation penalty is added.
    gamma : float or "paper", default 1000
        Weight of reconstruction against KL after epoch 1; ``"paper"`` applies the paper's rule
        (10 if the first reconstruction loss < 0.1, else 0.3). ``None`` means the default.
    w_max : float, default 1e5
    width : int, default 32
    leaky_slope : float, default 0.3
    seed : int, default 0
    normalize : bool, default True
        L2-normalise the reduced vectors.

    Fitted attributes
    -----------------
    recon_weight_ : float
        W.
    gamma_ : float
    mean_ : ndarray of shape (n_features_in_,)
    scale_ : ndarray of shape (1,)
        Input centring and scaling.
    loss_history_ : list of dict
        Mean ``rec``, ``kl``, ``corr`` (1 - r) per epoch.
    """

    name: ClassVar[str] = "embedtextnet"
    has_inverse: ClassVar[bool] = False

    def __init__(
        self,
        n_components: int = 64,
        epochs: int = 30,
        lr: float = 2e-3,
        batch_size: int | None = None,
        small_set: int = 12000,
        corr_after: int = 5,
        gamma: float | str | None = DEFAULT_GAMMA,
        w_max: float = 1e5,
        width: int = 32,
        leaky_slope: float = 0.3,
        seed: int = 0,
        normalize: bool = True,
    ) -> None:
        self.n_components = n_components
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size
        self.small_set = small_set
        self.corr_after = corr_after
        self.gamma = gamma
        self.w_max = w_max
        self.width = width
        self.leaky_slope = leaky_slope
        self.seed = seed
        self.normalize = normalize

    # ------------------------------------------------------------------ fitting
    def _check_params(self, n: int, dim: int) -> int:
        if not isinstance(self.epochs, int) or self.epochs < 1:
            raise ConfigError(f"embedtextnet: epochs must be a positive integer, got {self.epochs!r}.")
        if dim < 8:
            raise ConfigError(f"embedtextnet needs input dimension >= 8 (two poolings), got {dim}.")
        _check_gamma(DEFAULT_GAMMA if self.gamma is None else self.gamma)
        batch = self.batch_size or (32 if n < self.small_set else 256)
        if not isinstance(batch, int) or batch < 2:
            raise ConfigError(f"embedtextnet: batch_size must be an integer >= 2, got {batch!r}.")
        if n < 2:
            raise ConfigError(f"embedtextnet: fit needs at least 2 vectors, got {n}.")
        return min(batch, n)

    def _fit(self, X: np.ndarray, **kwargs: Any) -> None:
        torch = require_torch("embedtextnet")
        from slimvec.reducers.losses import gaussian_kl, pearson_rows

        n, dim = X.shape
        batch = self._check_params(n, dim)
        mean = X.mean(axis=0, dtype=np.float64)
        scale = float(np.sqrt(X.var(axis=0, dtype=np.float64)).mean()) or 1.0
        self.mean_ = mean.astype(np.float32)
        self.scale_ = np.array([scale], dtype=np.float32)
        data = torch.from_numpy(self._standardize(X))
        # mean / scale: the standardised input plus this is the original embedding up to scale
        shift = torch.from_numpy((mean / scale).astype(np.float32))
        history: list[dict[str, float]] = []
        weight = 1.0
        with seeded(self.seed) as gen:
            net = build_embedtextnet(dim, self.n_components, self.width, self.leaky_slope)
            opt = torch.optim.RMSprop(net.parameters(), lr=self.lr, alpha=0.9, eps=1e-7)
            steps_per_epoch = max(1, n // batch)
            # linear warm-up over the first epoch: RMSprop's squared-gradient average starts at
            # zero, so its first steps are the largest and made the KL term blow up
            sched = torch.optim.lr_scheduler.LambdaLR(
                opt, lambda step: min(1.0, (step + 1) / steps_per_epoch)
            )
            net.train()
            for epoch in range(self.epochs):
                use_corr = epoch >= self.corr_after
                sums = {"rec": 0.0, "kl": 0.0, "corr": 0.0}
                count = 0
                # drop a trailing batch of one row: BatchNorm cannot train on it
                for idx in minibatches(n, batch, gen, drop_last=False):
                    if len(idx) < 2:
                        continue
                    xb = data[idx]
                    rec, mu, logvar = net(xb)
                    l_rec = torch.mean((rec - xb) ** 2)
                    l_kl = gaussian_kl(mu, logvar).mean()
                    # r between the embedding and its reconstruction, in the input's own units
                    l_corr = (1.0 - pearson_rows(xb + shift, rec + shift)).mean()
                    loss = weight * l_rec + l_kl + (l_corr if use_corr else 0.0)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    sched.step()
                    k = len(idx)
                    sums["rec"] += l_rec.item() * k
                    sums["kl"] += l_kl.item() * k
                    sums["corr"] += l_corr.item() * k
                    count += k
                means = {key: value / max(count, 1) for key, value in sums.items()}
                if not all(math.isfinite(v) for v in means.values()):
                    raise ConfigError(
                        f"embedtextnet diverged at epoch {epoch + 1} (losses {means}). "
                        "Lower lr or check the input vectors."
                    )
                history.append({"epoch": epoch + 1, "W": weight, **means})
                log.info("embedtextnet epoch %d/%d W=%.4g rec=%.5g kl=%.4g 1-r=%.4g",
                         epoch + 1, self.epochs, weight, means["rec"], means["kl"], means["corr"])
                if epoch == 0:
                    raw_rec = means["rec"] * scale**2  # in the input's own units
                    choice = _check_gamma(DEFAULT_GAMMA if self.gamma is None else self.gamma)
                    gamma = gamma_rule(raw_rec) if choice == PAPER_GAMMA else float(choice)
                    raw = gamma * means["kl"] / max(means["rec"], 1e-12)
                    weight = float(min(max(raw, 1.0), self.w_max))
                    self.gamma_ = gamma
            net.eval()
        self.net_ = net
        self.recon_weight_ = weight
        self.loss_history_ = history
        self.n_components_ = int(self.n_components)

    # ------------------------------------------------------------- transforming
    def _standardize(self, X: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray((X - self.mean_) / self.scale_[0], dtype=np.float32)

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return apply_in_batches(lambda xb: self.net_.encode(xb)[0], self._standardize(X))

    def reconstruct(self, X: Any) -> np.ndarray:
        """Encode to ``mu`` and decode back to the input space (float32, input dimension)."""
        X = self._check_input(X)
        out = apply_in_batches(lambda xb: self.net_.decode(self.net_.encode(xb)[0]), self._standardize(X))
        return np.ascontiguousarray(out * self.scale_[0] + self.mean_, dtype=np.float32)

    # ------------------------------------------------------------- persistence
    def _new_net(self, meta: dict[str, Any]):
        return build_embedtextnet(
            int(meta["n_features_in_"]), int(meta["n_components_"]), self.width, self.leaky_slope
        )

    def _meta(self) -> dict[str, Any]:
        return {
            "n_components_": int(self.n_components_),
            "recon_weight_": float(self.recon_weight_),
            "gamma_": float(self.gamma_),
            "loss_history_": self.loss_history_,
        }
