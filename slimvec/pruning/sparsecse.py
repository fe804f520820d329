"""SparseCSE end to end: score heads and neurons, prune at a sparsity, rewind, save.

``prune_encoder`` is what ``slimvec prune`` runs; the benchmark script calls the same pieces.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slimvec.errors import ConfigError
from slimvec.pruning.importance import Importance, compute_importance
from slimvec.pruning.masks import layer_shapes
from slimvec.pruning.persist import load_pruned_model, model_bytes, save_pruned_model
from slimvec.pruning.prune import PruningPlan, plan_pruning, prune_model
from slimvec.pruning.rewind import RewindResult, rewind

__all__ = ["PruneOptions", "PruneReport", "load_source_model", "prune_encoder"]

log = logging.getLogger(__name__)


@dataclass
class PruneOptions:
    """Settings of one SparseCSE run.

    Attributes
    ----------
    sparsity : float
        Fraction of heads and/or neurons to remove, in [0, 1).
    heads, neurons : bool
        Which structures to prune (both: joint pruning, as the paper's main setting).
    score_sentences : int
        Sentences of the corpus used to score importance (the first ones, in file order).
    lam : float
        Alignment weight of the score loss (the paper's lambda, 0.5).
    rewind_steps : int
        Unsupervised SimCSE steps after pruning (0: no rewinding).
    rewind_lr, batch_size, max_seq_length, scale : float, int, int, float
        Rewinding recipe (SimCSE: 3e-5, 64, 32, 20).
    seed : int
        Seeds scoring dropout and rewinding.
    progress : bool
        Show progress bars.
    """

    sparsity: float = 0.2
    heads: bool = True
    neurons: bool = True
    score_sentences: int = 512
    lam: float = 0.5
    rewind_steps: int = 0
    rewind_lr: float = 3e-5
    batch_size: int = 64
    max_seq_length: int = 32
    scale: float = 20.0
    seed: int = 0
    progress: bool = True


@dataclass
class PruneReport:
    """What :func:`prune_encoder` did; ``to_json`` is stored in the saved model's config."""

    source: str
    options: PruneOptions
    plan: PruningPlan
    shapes_before: list[tuple[int, int]]
    shapes_after: list[tuple[int, int]]
    bytes_before: int
    bytes_after: int
    importance: Importance
    rewind: RewindResult
    seconds: dict[str, float] = field(default_factory=dict)
    out: Path | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready provenance (plan, sizes, settings, timings)."""
        opts = {k: v for k, v in vars(self.options).items() if k != "progress"}
        return {
            "method": "sparsecse",
            "source": self.source,
            "options": opts,
            "kept_heads": self.plan.to_json()["heads"],
            "heads_before": [h for h, _ in self.shapes_before],
            "heads_after": [h for h, _ in self.shapes_after],
            "intermediate_before": [n for _, n in self.shapes_before],
            "intermediate_after": [n for _, n in self.shapes_after],
            "parameter_bytes_before": self.bytes_before,
            "parameter_bytes_after": self.bytes_after,
            "importance": self.importance.summary(),
            "rewind": self.rewind.summary(),
            "seconds": {k: round(v, 2) for k, v in self.seconds.items()},
        }


def load_source_model(spec: str | os.PathLike[str] | None, device: str = "cpu") -> Any:
    """The sentence-transformers model named by an encoder spec (``minilm`` or a folder)."""
    from slimvec.models import is_pruned_folder, load_sentence_transformer, resolve_model

    path = resolve_model(spec)
    if is_pruned_folder(path):
        return load_pruned_model(path, device=device)
    return load_sentence_transformer(path, device=device)


def _bars(enabled: bool):
    from slimvec.ui import make_progress

    return make_progress(enabled, unit="sentences")


def prune_encoder(
    model: Any,
    sentences: Sequence[str],
    options: PruneOptions | None = None,
    *,
    out: str | os.PathLike[str] | None = None,
    source: str = "",
    positives: Sequence[str] | None = None,
) -> PruneReport:
    """Score, prune (in place), optionally rewind and save a sentence encoder.

    Parameters
    ----------
    model : SentenceTransformer
        A BERT-family encoder, changed in place.
    sentences : sequence of str
        The corpus: the first ``options.score_sentences`` score importance, all of them rewind.
    options : PruneOptions, optional
        Sparsity, structures and rewinding recipe.
    out : path-like, optional
        Folder to save the pruned model to (loadable as ``--encoder DIR``).
    source : str
        Name of the source model, recorded in the saved config.
    positives : sequence of str, optional
        Partner of each scoring sentence (pairs); dropout positives when omitted.

    Returns
    -------
    PruneReport

    Raises
    ------
    ConfigError
        Bad sparsity or structure choice, or too few sentences.
    """
    opts = options or PruneOptions()
    sentences = list(sentences)
    if len(sentences) < 2:
        raise ConfigError(f"Pruning needs a corpus of at least 2 sentences, got {len(sentences)}.")
    score_set = sentences[: max(2, opts.score_sentences)]
    if positives is not None:
        positives = list(positives)[: len(score_set)]
    shapes_before, bytes_before = layer_shapes(model), model_bytes(model)
    seconds: dict[str, float] = {}
    with _bars(opts.progress) as bars:
        task = bars.add_task(f"scoring heads and neurons ({len(score_set):,} sentences)",
                             total=len(score_set), unit="sentences")
        t0 = time.perf_counter()
        importance = compute_importance(
            model, score_set, positives, lam=opts.lam, batch_size=opts.batch_size,
            max_seq_length=opts.max_seq_length, seed=opts.seed,
            progress=lambda n: bars.advance(task, n))
        bars.update(task, completed=len(score_set))
        seconds["scoring"] = time.perf_counter() - t0
        plan = plan_pruning(importance.heads, importance.neurons, opts.sparsity,
                            heads=opts.heads, neurons=opts.neurons)
        shapes_after = prune_model(model, plan)
        result = RewindResult(0, 0.0, [], {"objective": "none"})
        if opts.rewind_steps > 0:
            task = bars.add_task(f"rewinding (SimCSE on {len(sentences):,} sentences)",
                                 total=opts.rewind_steps, unit="steps")
            t0 = time.perf_counter()
            result = rewind(model, sentences, opts.rewind_steps, lr=opts.rewind_lr,
                            batch_size=opts.batch_size, max_seq_length=opts.max_seq_length,
                            scale=opts.scale, seed=opts.seed,
                            progress=lambda n: bars.advance(task, n))
            seconds["rewinding"] = time.perf_counter() - t0
    model.eval()
    report = PruneReport(source=source, options=opts, plan=plan, shapes_before=shapes_before,
                         shapes_after=shapes_after, bytes_before=bytes_before,
                         bytes_after=model_bytes(model), importance=importance, rewind=result,
                         seconds=seconds)
    log.info("pruned %s at sparsity %.3f: heads %d -> %d, neurons %d -> %d",
             source or "encoder", opts.sparsity, sum(h for h, _ in shapes_before),
             sum(h for h, _ in shapes_after), sum(n for _, n in shapes_before),
             sum(n for _, n in shapes_after))
    if out is not None:
        report.out = save_pruned_model(model, out, info=report.to_json())
    return report
