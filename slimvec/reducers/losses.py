"""Loss functions of the learned reducers, written once and tested on hand-computed cases.

- :func:`coding_rate` and :func:`coding_rate_per_cluster`: the MCR² terms (Yu et al. 2020, used
  by NMCE and the sentence-compression paper);
- :func:`pearson_rows`: EmbedTextNet's correlation between an embedding and its reconstruction;
- :func:`gaussian_kl`: the VAE regulariser KL(N(mu, sigma^2) || N(0, I)).

All take and return torch tensors; rows are samples.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["coding_rate", "coding_rate_per_cluster", "pearson_rows", "gaussian_kl"]


def _logdet_i_plus_gram(A: torch.Tensor, scale: torch.Tensor | float) -> torch.Tensor:
    """``logdet(I + scale * A^T A)`` for ``A`` of shape (..., m, d), in float32 via Cholesky.

    Uses Sylvester's identity ``det(I_d + c A^T A) = det(I_m + c A A^T)`` to factor the smaller
    of the two Gram matrices. The matrix is symmetric positive definite, so Cholesky is exact and
    cheaper than a general LU-based ``logdet``.
    """
    import torch

    A = A.float()
    m, d = A.shape[-2], A.shape[-1]
    gram = A.transpose(-1, -2) @ A if d <= m else A @ A.transpose(-1, -2)
    n = gram.shape[-1]
    if not torch.is_tensor(scale):
        scale = torch.tensor(float(scale), dtype=A.dtype, device=A.device)
    scale = scale.to(A.dtype).reshape(scale.shape + (1, 1))
    eye = torch.eye(n, dtype=A.dtype, device=A.device)
    mat = eye + scale * gram
    chol = torch.linalg.cholesky(mat)
    return 2.0 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)


def coding_rate(Z: torch.Tensor, eps2: float) -> torch.Tensor:
    """Total coding rate ``R(Z) = 1/2 logdet(I + d / (m eps^2) Z^T Z)``.

    Parameters
    ----------
    Z : tensor of shape (m, d)
        m samples (rows) of dimension d, usually unit-norm.
    eps2 : float
        Squared distortion ``eps^2``.

    Returns
    -------
    tensor
        Scalar coding rate in nats.
    """
    m, d = Z.shape
    return 0.5 * _logdet_i_plus_gram(Z, d / (m * eps2))


def coding_rate_per_cluster(Z: torch.Tensor, Pi: torch.Tensor, eps2: float) -> torch.Tensor:
    """Sum over clusters of ``R_k = tr(Pi_k) / (2m) logdet(I + d / (tr(Pi_k) eps^2) Z^T Pi_k Z)``.

    Parameters
    ----------
    Z : tensor of shape (m, d)
    Pi : tensor of shape (m, K)
        Soft (or one-hot) memberships, rows summing to 1; ``Pi_k = diag(Pi[:, k])``.
    eps2 : float

    Returns
    -------
    tensor
        Scalar ``sum_k R_k``. With uniform memberships it equals :func:`coding_rate` (no signal).
    """
    import torch

    m, d = Z.shape
    tr = Pi.sum(0).float() + 1e-8  # (K,)
    # sqrt(Pi_k) * Z for every k: (K, m, d); Z^T Pi_k Z = (sqrt(Pi_k) Z)^T (sqrt(Pi_k) Z)
    # clamp above 0: sqrt'(0) is infinite, and a (Gumbel-)softmax membership underflowing to an
    # exact 0 would turn the whole backward pass into NaN
    weighted = torch.sqrt(Pi.float().T.clamp_min(1e-12)).unsqueeze(-1) * Z.float().unsqueeze(0)
    logdets = _logdet_i_plus_gram(weighted, d / (tr * eps2))
    return (tr / (2.0 * m) * logdets).sum()


def pearson_rows(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Pearson correlation between matching rows of ``a`` and ``b`` (over their coordinates).

    Returns a tensor of shape (n,); identical rows give 1, negated rows give -1.
    """
    ac = a - a.mean(dim=1, keepdim=True)
    bc = b - b.mean(dim=1, keepdim=True)
    num = (ac * bc).sum(dim=1)
    den = ac.norm(dim=1) * bc.norm(dim=1)
    return num / den.clamp_min(eps)


def gaussian_kl(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """``KL(N(mu, exp(logvar)) || N(0, I))`` per row, summed over the latent dimensions."""
    return 0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar).sum(dim=1)
