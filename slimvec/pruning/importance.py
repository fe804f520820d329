"""Alignment-and-uniformity importance of every attention head and FFN neuron (SparseCSE).

The score loss is ``L = lam * L_align + (1 - lam) * L_uniform`` (Wang & Isola 2020) on
L2-normalised sentence embeddings:

- ``L_align = mean ||f(x) - f(x+)||^2`` over positive pairs, where ``x+`` is the same sentence
  under a second dropout pass (unsupervised) or the given partner of a pair;
- ``L_uniform = log mean exp(-2 ||f(x) - f(y)||^2)`` over the distinct pairs of a batch
  (averaged over the two views).

A mask of ones is attached to every head and neuron (:mod:`slimvec.pruning.masks`); the
importance of each is ``E |dL/dmask|`` over the batches of a scoring set (Molchanov et al. 2017),
then divided by the L2 norm of its layer's scores (Michel et al. 2019) so layers compare.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from slimvec.errors import ConfigError
from slimvec.pruning._features import embed, features, max_length
from slimvec.pruning.masks import attach_masks

__all__ = ["Importance", "alignment_loss", "uniformity_loss", "score_loss", "compute_importance"]

log = logging.getLogger(__name__)


def alignment_loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean squared distance between positive pairs (rows of ``x`` and ``y``)."""
    return (x - y).pow(2).sum(dim=1).mean()


def uniformity_loss(x: torch.Tensor, t: float = 2.0) -> torch.Tensor:
    """``log mean exp(-t ||x_i - x_j||^2)`` over the distinct pairs ``i < j`` of the rows of ``x``."""
    sq = torch.pdist(x, p=2).pow(2)
    return torch.logsumexp(-t * sq, dim=0) - np.log(sq.numel())


def score_loss(x: torch.Tensor, y: torch.Tensor, lam: float = 0.5) -> torch.Tensor:
    """``lam * align(x, y) + (1 - lam) * (uniform(x) + uniform(y)) / 2``."""
    uniform = (uniformity_loss(x) + uniformity_loss(y)) / 2
    return lam * alignment_loss(x, y) + (1.0 - lam) * uniform


@dataclass
class Importance:
    """Per-layer importance scores (normalised per layer; higher means more important).

    Attributes
    ----------
    heads : list of ndarray
        ``heads[i]`` has one score per head of layer ``i``.
    neurons : list of ndarray
        ``neurons[i]`` has one score per FFN intermediate neuron of layer ``i``.
    alignment, uniformity : float
        Mean losses over the scoring batches (with every mask at one).
    n_sentences : int
        Sentences scored.
    """

    heads: list[np.ndarray]
    neurons: list[np.ndarray]
    alignment: float
    uniformity: float
    n_sentences: int

    def summary(self) -> dict[str, Any]:
        """Small JSON-ready summary (not the full neuron scores)."""
        return {"alignment": self.alignment, "uniformity": self.uniformity,
                "n_sentences": self.n_sentences,
                "heads": [np.round(h, 4).tolist() for h in self.heads]}


def _normalise(scores: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(scores))
    return scores / norm if norm > 0 else scores


def compute_importance(
    model: Any,
    sentences: Sequence[str],
    positives: Sequence[str] | None = None,
    *,
    lam: float = 0.5,
    batch_size: int = 64,
    max_seq_length: int | None = 32,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> Importance:
    """Score every head and FFN neuron of ``model`` by ``E |dL_score/dmask|``.

    Parameters
    ----------
    model : SentenceTransformer
        A BERT-family encoder (pruned or not); its weights are not changed.
    sentences : sequence of str
        The scoring set.
    positives : sequence of str, optional
        Partner of each sentence (a positive pair). When omitted, the positive is the same
        sentence under a second dropout pass (unsupervised, as in SimCSE).
    lam : float, default 0.5
        Weight of alignment against uniformity.
    batch_size : int, default 64
        Sentences per batch (uniformity is computed within a batch).
    max_seq_length : int or None, default 32
        Truncate sentences to this many tokens while scoring.
    seed : int, default 0
        Seeds dropout, so scores are reproducible.
    progress : callable, optional
        Called with the number of sentences done after each batch.

    Returns
    -------
    Importance
        Scores normalised per layer.

    Raises
    ------
    ConfigError
        Fewer than 2 sentences, positives of another length, or ``lam`` outside [0, 1].
    """
    sentences = list(sentences)
    if len(sentences) < 2:
        raise ConfigError(f"Importance scoring needs at least 2 sentences, got {len(sentences)}.")
    if positives is not None and len(positives) != len(sentences):
        raise ConfigError(f"positives: expected {len(sentences)} partners (one per sentence), "
                          f"got {len(positives)}.")
    if not 0.0 <= lam <= 1.0:
        raise ConfigError(f"lam must be in [0, 1], got {lam}.")
    unsupervised = positives is None
    was_training = model.training
    grads = {p: p.requires_grad for p in model.parameters()}
    for p in grads:
        p.requires_grad_(False)  # only dL/dmask is needed
    torch.manual_seed(seed)
    model.train(unsupervised)  # dropout makes the second view in the unsupervised case
    head_acc: list[np.ndarray] | None = None
    neuron_acc: list[np.ndarray] | None = None
    n_batches, align_sum, unif_sum = 0, 0.0, 0.0
    try:
        with max_length(model, max_seq_length), attach_masks(model, requires_grad=True) as masks:
            head_acc = [np.zeros(m.numel()) for m in masks.heads]
            neuron_acc = [np.zeros(m.numel()) for m in masks.neurons]
            for start in range(0, len(sentences), batch_size):
                batch = sentences[start:start + batch_size]
                if len(batch) < 2:
                    continue
                feats = features(model, batch)
                x = embed(model, feats)
                other = feats if unsupervised else features(model, positives[start:start + batch_size])
                y = embed(model, other)
                loss = score_loss(x, y, lam)
                masks.zero_grad()
                loss.backward()
                for acc, m in zip(head_acc, masks.heads):
                    acc += m.grad.detach().abs().cpu().double().numpy()
                for acc, m in zip(neuron_acc, masks.neurons):
                    acc += m.grad.detach().abs().cpu().double().numpy()
                with torch.no_grad():
                    align_sum += float(alignment_loss(x, y))
                    unif_sum += float((uniformity_loss(x) + uniformity_loss(y)) / 2)
                n_batches += 1
                if progress is not None:
                    progress(len(batch))
    finally:
        for p, flag in grads.items():
            p.requires_grad_(flag)
        model.train(was_training)
    n = max(n_batches, 1)
    imp = Importance(
        heads=[_normalise(a / n) for a in head_acc],
        neurons=[_normalise(a / n) for a in neuron_acc],
        alignment=align_sum / n,
        uniformity=unif_sum / n,
        n_sentences=len(sentences),
    )
    log.info("importance over %d sentences: align %.4f, uniform %.4f",
             len(sentences), imp.alignment, imp.uniformity)
    return imp
