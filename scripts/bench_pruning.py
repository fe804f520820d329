"""SparseCSE on MiniLM: throughput, bytes and quality per sparsity, before and after rewinding.

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

Scoring uses the first ``--score-sentences`` sentences of stsb-train (dropout positives);
rewinding uses the unlabelled sentences of stsb-train, sick-train and msrp-train (never dev/test).

Usage: python scripts/bench_pruning.py [--sparsities 0,0.02,...] [--rewind-steps 100]
       [--threads 1] [--out results/pruning.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy.stats import spearmanr

from slimvec.indexer.encoder import Encoder
from slimvec.pruning.corpus import read_corpus
from slimvec.pruning.importance import compute_importance
from slimvec.pruning.persist import model_bytes, save_pruned_model
from slimvec.pruning.prune import plan_pruning, prune_model
from slimvec.pruning.rewind import rewind

DATA = Path(__file__).resolve().parents[1] / "slimvec" / "data"
log = logging.getLogger("bench_pruning")


def _pairs(name: str) -> list[tuple[str, str, float]]:
    out = []
    with open(DATA / name, encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            a, b, s = line.rstrip("\n").split("\t")
            out.append((a, b, float(s)))
    return out


class Evaluator:
    """STS-B test Spearman and duplicate recall@10 over STS-B dev + test."""

    def __init__(self) -> None:
        self.test = _pairs("stsb-test.tsv")
        dev_test = _pairs("stsb-dev.tsv") + self.test
        self.corpus = list(dict.fromkeys(t for a, b, _ in dev_test for t in (a, b)))
        self.pos = {t: i for i, t in enumerate(self.corpus)}
        self.dups = [(self.pos[a], self.pos[b]) for a, b, s in dev_test if s >= 4.0 and a != b]

    def __call__(self, model: Any) -> dict[str, float]:
        emb = model.encode(self.corpus, batch_size=64, convert_to_numpy=True,
                           normalize_embeddings=True)
        a = emb[[self.pos[x] for x, _, _ in self.test]]
        b = emb[[self.pos[y] for _, y, _ in self.test]]
        sts = spearmanr((a * b).sum(1), [s for _, _, s in self.test]).statistic * 100
        queries = [q for pair in self.dups for q in (pair, pair[::-1])]
        q_idx = np.array([q for q, _ in queries])
        sims = emb[q_idx] @ emb.T
        sims[np.arange(len(q_idx)), q_idx] = -np.inf  # a sentence is not its own neighbour
        top = np.argpartition(-sims, 10, axis=1)[:, :10]
        hits = [t in row for (_, t), row in zip(queries, top)]
        return {"sts_spearman": round(float(sts), 2), "recall_at_10": round(float(np.mean(hits)), 4)}


def _throughput(models: dict[str, Any], texts: list[str], rounds: int,
                batch_size: int) -> dict[str, float]:
    for m in models.values():  # warm-up
        m.encode(texts[:128], batch_size=batch_size)
    rates: dict[str, list[float]] = {k: [] for k in models}
    for r in range(rounds):
        order = list(models) if r % 2 == 0 else list(models)[::-1]
        for key in order:
            t0 = time.perf_counter()
            models[key].encode(texts, batch_size=batch_size, convert_to_numpy=True)
            rates[key].append(len(texts) / (time.perf_counter() - t0))
    return {k: round(statistics.median(v), 1) for k, v in rates.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sparsities", default="0,0.02,0.05,0.1,0.2,0.3,0.5")
    ap.add_argument("--structures", choices=["joint", "heads", "neurons"], default="joint")
    ap.add_argument("--rewind-steps", type=int, default=100)
    ap.add_argument("--score-sentences", type=int, default=512)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--throughput-sentences", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("results/pruning.json"))
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(args.threads)
    sparsities = [float(s) for s in args.sparsities.split(",")]

    base = Encoder(device="cpu").model
    base.eval()
    evaluate = Evaluator()
    score_set = read_corpus(DATA / "stsb-train.tsv", limit=args.score_sentences)
    rewind_corpus = list(dict.fromkeys(
        read_corpus(DATA / "stsb-train.tsv") + read_corpus(DATA / "sick-train.tsv")
        + read_corpus(DATA / "msrp-train.tsv")))
    t0 = time.perf_counter()
    imp = compute_importance(copy.deepcopy(base), score_set, seed=args.seed)
    score_s = time.perf_counter() - t0
    log.info("scored %d sentences in %.1fs", len(score_set), score_s)

    rows, models = [], {}
    tmp = Path(tempfile.mkdtemp(prefix="slimvec-bench-pruning-"))
    for s in sparsities:
        model = copy.deepcopy(base)
        plan = plan_pruning(imp.heads, imp.neurons, s, heads=args.structures != "neurons",
                            neurons=args.structures != "heads")
        shapes = prune_model(model, plan)
        row: dict[str, Any] = {
            "sparsity": s, "structures": args.structures,
            "heads": sum(h for h, _ in shapes), "ffn_neurons": sum(n for _, n in shapes),
            "parameter_bytes": model_bytes(model),
        }
        row["pruned"] = evaluate(model)
        log.info("sparsity %.2f pruned: %s", s, row["pruned"])
        if args.rewind_steps > 0:
            res = rewind(model, rewind_corpus, args.rewind_steps, seed=args.seed)
            row["rewound"] = evaluate(model)
            row["rewind_seconds"] = round(res.seconds, 1)
            row["rewind_last_loss"] = round(float(np.mean(res.losses[-10:])), 4)
            log.info("sparsity %.2f rewound (%d steps, %.0fs): %s", s, args.rewind_steps,
                     res.seconds, row["rewound"])
        folder = save_pruned_model(model, tmp / f"s{s}")
        row["safetensors_bytes"] = (folder / "model.safetensors").stat().st_size
        models[s] = Encoder(folder, device="cpu").model  # what `--encoder DIR` would load
        rows.append(row)

    texts = evaluate.corpus[: args.throughput_sentences]
    rates = _throughput(models, texts, args.rounds, args.batch_size)
    for row in rows:
        row["sentences_per_s"] = rates[row["sparsity"]]
        row["speedup"] = round(rates[row["sparsity"]] / rates[sparsities[0]], 3)
    result = {
        "model": "all-MiniLM-L6-v2", "threads": args.threads, "batch_size": args.batch_size,
        "rewind_steps": args.rewind_steps, "rewind_recipe": "unsup SimCSE, MNRL scale 20, "
        "lr 3e-5 linear decay, batch 64, max_seq_length 32",
        "score_sentences": len(score_set), "scoring_seconds": round(score_s, 1),
        "rewind_corpus_sentences": len(rewind_corpus),
        "throughput_sentences": len(texts), "throughput_rounds": args.rounds,
        "duplicate_pairs": len(evaluate.dups), "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
