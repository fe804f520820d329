"""``slimvec prune``: SparseCSE pruning of a sentence encoder into a reloadable folder."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

__all__ = ["prune"]

console = Console(stderr=True)


def prune(
    encoder: str | None = typer.Option(None, "--encoder", help="Encoder to prune: 'minilm' or a model folder [default: minilm]."),
    corpus: Path = typer.Option(..., "--corpus", help="Sentences: a text file (one per line), .jsonl ('text' key) or a .tsv of pairs (both columns)."),
    sparsity: float = typer.Option(0.2, "--sparsity", help="Fraction of heads and FFN neurons to remove, in [0, 1)."),
    heads_only: bool = typer.Option(False, "--heads-only", help="Prune attention heads only."),
    neurons_only: bool = typer.Option(False, "--neurons-only", help="Prune FFN neurons only."),
    rewind_steps: int = typer.Option(0, "--rewind-steps", help="Unsupervised SimCSE steps after pruning (batch 64, lr 3e-5)."),
    score_sentences: int = typer.Option(512, "--score-sentences", help="Corpus sentences used to score importance."),
    max_sentences: int | None = typer.Option(None, "--max-sentences", help="Read at most this many corpus sentences."),
    batch_size: int = typer.Option(64, "--batch-size", help="Sentences per scoring and rewinding batch."),
    lam: float = typer.Option(0.5, "--lambda", help="Weight of alignment against uniformity in the score loss."),
    seed: int = typer.Option(0, "--seed", help="Seed of scoring dropout and rewinding."),
    device: str = typer.Option("cpu", "--device", help="Torch device."),
    threads: int | None = typer.Option(None, "--threads", help="Torch CPU threads [default: torch's choice]; 1 is steadier on a busy machine."),
    out: Path = typer.Option(..., "--out", help="Folder to write the pruned encoder to (use it as --encoder DIR)."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Prune attention heads and FFN neurons by alignment + uniformity importance, then rewind."""
    from slimvec.errors import ConfigError
    from slimvec.pruning.corpus import read_corpus
    from slimvec.pruning.sparsecse import PruneOptions, load_source_model, prune_encoder

    if heads_only and neurons_only:
        raise ConfigError("--heads-only and --neurons-only exclude each other; pass at most one "
                          "(neither prunes both jointly).")
    if threads is not None:
        import torch

        torch.set_num_threads(max(1, threads))
    sentences = read_corpus(corpus, limit=max_sentences)
    opts = PruneOptions(sparsity=sparsity, heads=not neurons_only, neurons=not heads_only,
                        score_sentences=score_sentences, lam=lam, batch_size=batch_size,
                        rewind_steps=rewind_steps,
                        seed=seed, progress=not json_out)
    model = load_source_model(encoder, device=device)
    report = prune_encoder(model, sentences, opts, out=out, source=encoder or "minilm")
    data = report.to_json()
    if json_out:
        data["out"] = str(out)
        typer.echo(json.dumps(data, indent=2))
        return
    before, after = report.bytes_before, report.bytes_after
    console.print(
        f"[bold green]done[/]: heads {sum(data['heads_before'])} -> {sum(data['heads_after'])}, "
        f"FFN neurons {sum(data['intermediate_before']):,} -> {sum(data['intermediate_after']):,}, "
        f"parameters {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB; "
        f"{report.rewind.steps} rewind steps. Use it with --encoder {out}"
    )
