"""SparseCSE on MiniLM per sparsity, before and after rewinding (``python -m benchmarks pruning``).

For each sparsity (joint: the same fraction of attention heads and of FFN neurons, ranked across
layers by alignment + uniformity importance scored once on the unpruned model):

- STS-B test Spearman (x100, cosine of the normalised embeddings against the gold score);
- task recall@10: for every duplicate pair (gold score >= 4) of STS-B dev + test, is the partner
  among the 10 nearest neighbours (itself excluded) of the union of all dev + test sentences;
  both directions, averaged;
- both before rewinding (pruned only) and after N steps of unsupervised SimCSE rewinding
  (sparsity 0 + rewinding is the control: what SimCSE fine-tuning alone does to MiniLM);
- encoder sentences/s: every architecture encodes the same sentences with the same batch size,
  round-robin over several rounds in one process (median of the rounds), and parameter bytes /
  ``model.safetensors`` bytes of the saved folder.

Scoring uses the first ``score_sentences`` sentences of stsb-train (dropout positives);
rewinding uses the unlabelled sentences of stsb-train, sick-train and msrp-train (never dev/test).
"""

from __future__ import annotations

import copy
import logging
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.corpora.sentences import DATA

__all__ = ["PruningEvaluator", "measure_pruning"]

log = logging.getLogger(__name__)


def _pairs(name: str) -> list[tuple[str, str, float]]:
    out = []
    with open(DATA / name, encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            a, b, s = line.rstrip("\n").split("\t")
            out.append((a, b, float(s)))
    return out


class PruningEvaluator:
    """STS-B test Spearman and duplicate recall@10 over STS-B dev + test (``limit`` pairs each)."""

    def __init__(self, limit: int | None = None) -> None:
        self.test = _pairs("stsb-test.tsv")[:limit]
        dev_test = _pairs("stsb-dev.tsv")[:limit] + self.test
        self.corpus = list(dict.fromkeys(t for a, b, _ in dev_test for t in (a, b)))
        self.pos = {t: i for i, t in enumerate(self.corpus)}
        self.dups = [(self.pos[a], self.pos[b]) for a, b, s in dev_test if s >= 4.0 and a != b]

    def __call__(self, model: Any) -> dict[str, float]:
        """Spearman x100 and recall@10 of a sentence-transformers model."""
        from scipy.stats import spearmanr

        emb = model.encode(self.corpus, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)
        a = emb[[self.pos[x] for x, _, _ in self.test]]
        b = emb[[self.pos[y] for _, y, _ in self.test]]
        sts = spearmanr((a * b).sum(1), [s for _, _, s in self.test]).statistic * 100
        queries = [q for pair in self.dups for q in (pair, pair[::-1])]
        q_idx = np.array([q for q, _ in queries])
        sims = emb[q_idx] @ emb.T
        sims[np.arange(len(q_idx)), q_idx] = -np.inf  # a sentence is not its own neighbour
        k = min(10, len(self.corpus) - 1)
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        hits = [t in row for (_, t), row in zip(queries, top)]
        return {"sts_spearman": round(float(sts), 2), "recall_at_10": round(float(np.mean(hits)), 4)}


def _throughput(models: dict[float, Any], texts: list[str], rounds: int, batch_size: int) -> dict[float, float]:
    for m in models.values():  # warm-up
        m.encode(texts[:128], batch_size=batch_size)
    rates: dict[float, list[float]] = {k: [] for k in models}
    for r in range(rounds):
        for key in (list(models) if r % 2 == 0 else list(models)[::-1]):
            t0 = time.perf_counter()
            models[key].encode(texts, batch_size=batch_size, convert_to_numpy=True)
            rates[key].append(len(texts) / (time.perf_counter() - t0))
    return {k: round(statistics.median(v), 1) for k, v in rates.items()}


def _one_sparsity(base: Any, imp: Any, s: float, structures: str, evaluate: PruningEvaluator,
                  rewind_corpus: list[str], rewind_steps: int, seed: int, tmp: Path) -> tuple[dict, Any]:
    from slimvec.encoder import Encoder
    from slimvec.pruning.persist import model_bytes, save_pruned_model
    from slimvec.pruning.prune import plan_pruning, prune_model
    from slimvec.pruning.rewind import rewind

    model = copy.deepcopy(base)
    plan = plan_pruning(imp.heads, imp.neurons, s, heads=structures != "neurons", neurons=structures != "heads")
    shapes = prune_model(model, plan)
    row: dict[str, Any] = {"sparsity": s, "structures": structures, "heads": sum(h for h, _ in shapes),
                           "ffn_neurons": sum(n for _, n in shapes), "parameter_bytes": model_bytes(model)}
    row["pruned"] = evaluate(model)
    if rewind_steps > 0:
        res = rewind(model, rewind_corpus, rewind_steps, seed=seed)
        row["rewound"] = evaluate(model)
        row["rewind_seconds"] = round(res.seconds, 1)
        row["rewind_last_loss"] = round(float(np.mean(res.losses[-10:])), 4)
    folder = save_pruned_model(model, tmp / f"s{s}")
    row["safetensors_bytes"] = (folder / "model.safetensors").stat().st_size
    log.info("sparsity %.2f: %s", s, row)
    return row, Encoder(folder, device="cpu").model  # what `--encoder DIR` would load


def measure_pruning(sparsities: Sequence[float] = (0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5), structures: str = "joint",
                    rewind_steps: int = 100, score_sentences: int = 512, threads: int = 1,
                    throughput_sentences: int = 1024, rounds: int = 5, batch_size: int = 64, seed: int = 0,
                    eval_pairs: int | None = None, rewind_sentences: int | None = None) -> dict[str, Any]:
    """Prune MiniLM at each sparsity and measure quality, bytes and throughput.

    ``eval_pairs`` and ``rewind_sentences`` bound the evaluation pairs and the rewinding corpus
    (None: all; small values are for smoke runs). Returns the record of docs/benchmarks/pruning.md
    (``{"model", ..., "rows": [{"sparsity", "heads", "ffn_neurons", "parameter_bytes", "pruned",
    "rewound", "safetensors_bytes", "sentences_per_s", "speedup"}]}``); the first sparsity is the
    speed-up's reference.
    """
    import torch

    from slimvec.encoder import Encoder
    from slimvec.pruning.corpus import read_corpus
    from slimvec.pruning.importance import compute_importance

    torch.set_num_threads(threads)
    base = Encoder(device="cpu").model
    base.eval()
    evaluate = PruningEvaluator(eval_pairs)
    score_set = read_corpus(DATA / "stsb-train.tsv", limit=score_sentences)
    rewind_corpus = list(dict.fromkeys(read_corpus(DATA / "stsb-train.tsv") + read_corpus(DATA / "sick-train.tsv")
                                       + read_corpus(DATA / "msrp-train.tsv")))[:rewind_sentences]
    t0 = time.perf_counter()
    imp = compute_importance(copy.deepcopy(base), score_set, seed=seed)
    score_s = time.perf_counter() - t0
    rows, models = [], {}
    with tempfile.TemporaryDirectory(prefix="slimvec-bench-pruning-") as tmp:
        for s in sparsities:
            row, models[float(s)] = _one_sparsity(base, imp, float(s), structures, evaluate, rewind_corpus,
                                                  rewind_steps, seed, Path(tmp))
            rows.append(row)
        texts = evaluate.corpus[:throughput_sentences]
        rates = _throughput(models, texts, rounds, batch_size)
    for row in rows:
        row["sentences_per_s"] = rates[row["sparsity"]]
        row["speedup"] = round(rates[row["sparsity"]] / rates[float(sparsities[0])], 3)
    return {"model": "all-MiniLM-L6-v2", "threads": threads, "batch_size": batch_size, "rewind_steps": rewind_steps,
            "rewind_recipe": "unsup SimCSE, MNRL scale 20, lr 3e-5 linear decay, batch 64, max_seq_length 32",
            "score_sentences": len(score_set), "scoring_seconds": round(score_s, 1),
            "rewind_corpus_sentences": len(rewind_corpus), "throughput_sentences": len(texts),
            "throughput_rounds": rounds, "duplicate_pairs": len(evaluate.dups), "rows": rows}
