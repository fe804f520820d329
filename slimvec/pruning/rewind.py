"""Rewinding: fine-tune a pruned encoder with unsupervised SimCSE.

Each sentence is its own positive under a second dropout pass; the other sentences of the batch
are negatives. This is sentence-transformers' ``MultipleNegativesRankingLoss`` on ``(s, s)``
pairs with ``scale=20`` (temperature 0.05), AdamW at ``lr=3e-5`` decaying linearly to zero,
batch 64, inputs truncated to 32 tokens (the SimCSE recipe the SparseCSE paper rewinds with).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from slimvec.errors import ConfigError
from slimvec.pruning._features import features, max_length

__all__ = ["RewindResult", "rewind"]

log = logging.getLogger(__name__)


@dataclass
class RewindResult:
    """What a rewinding run did.

    Attributes
    ----------
    steps : int
        Optimiser steps taken.
    seconds : float
        Wall time.
    losses : list of float
        Training loss of every step.
    settings : dict
        The hyper-parameters used.
    """

    steps: int
    seconds: float
    losses: list[float] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (first and last losses, not all of them)."""
        tail = self.losses[-10:]
        return {"steps": self.steps, "seconds": round(self.seconds, 2),
                "first_loss": self.losses[0] if self.losses else None,
                "last_loss_mean10": float(np.mean(tail)) if tail else None,
                **self.settings}


def rewind(
    model: Any,
    sentences: Sequence[str],
    steps: int,
    *,
    lr: float = 3e-5,
    batch_size: int = 64,
    max_seq_length: int = 32,
    scale: float = 20.0,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> RewindResult:
    """Fine-tune ``model`` in place with unsupervised SimCSE for ``steps`` batches.

    Parameters
    ----------
    model : SentenceTransformer
        The (pruned) encoder; left in eval mode afterwards.
    sentences : sequence of str
        Training sentences, cycled through in a seeded shuffled order.
    steps : int
        Optimiser steps (0 does nothing).
    lr, batch_size, max_seq_length, scale : see module docstring.
    seed : int, default 0
        Seeds the order and the dropout.
    progress : callable, optional
        Called with 1 after each step.

    Returns
    -------
    RewindResult

    Raises
    ------
    ConfigError
        Negative steps, fewer than 2 sentences or a batch size below 2.
    """
    from sentence_transformers.losses import MultipleNegativesRankingLoss

    settings = {"objective": "unsup-simcse", "lr": lr, "batch_size": batch_size,
                "max_seq_length": max_seq_length, "scale": scale, "seed": seed}
    if steps < 0:
        raise ConfigError(f"rewind steps must be >= 0, got {steps}.")
    if steps == 0:
        return RewindResult(0, 0.0, [], settings)
    sentences = list(sentences)
    if len(sentences) < 2 or batch_size < 2:
        raise ConfigError(f"Rewinding needs at least 2 sentences and a batch of at least 2; got "
                          f"{len(sentences)} sentences, batch {batch_size}.")
    batch_size = min(batch_size, len(sentences))
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    loss_fn = MultipleNegativesRankingLoss(model, scale=scale)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1.0 - s / steps))
    order = rng.permutation(len(sentences))
    pos = 0
    losses: list[float] = []
    t0 = time.perf_counter()
    model.train()
    try:
        with max_length(model, max_seq_length):
            for _step in range(steps):
                if pos + batch_size > len(order):
                    order, pos = rng.permutation(len(sentences)), 0
                batch = [sentences[i] for i in order[pos:pos + batch_size]]
                pos += batch_size
                feats = features(model, batch)
                loss = loss_fn([dict(feats), dict(feats)], None)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sched.step()
                losses.append(float(loss.detach()))
                if progress is not None:
                    progress(1)
    finally:
        model.eval()
        opt.zero_grad(set_to_none=True)
    result = RewindResult(steps, time.perf_counter() - t0, losses, settings)
    log.info("rewound %d steps in %.1fs, loss %.3f -> %.3f", steps, result.seconds,
             losses[0], losses[-1])
    return result
