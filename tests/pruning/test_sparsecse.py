import json
from pathlib import Path

import numpy as np
import torch
from typer.testing import CliRunner

from slimvec.encoder import Encoder
from slimvec.pruning.corpus import read_corpus
from slimvec.pruning.sparsecse import PruneOptions, prune_encoder

DATA = Path(__file__).resolve().parents[2] / "slimvec" / "data"


def test_prune_and_rewind_on_a_real_corpus(minilm, corpus_sentences, texts, tmp_path):
    original = minilm.encode(texts, convert_to_numpy=True, normalize_embeddings=True)
    words_before = minilm[0].model.embeddings.word_embeddings.weight.detach().clone()
    opts = PruneOptions(sparsity=0.1, score_sentences=64, rewind_steps=3, batch_size=16,
                        progress=False)
    report = prune_encoder(minilm, corpus_sentences, opts, out=tmp_path / "p10", source="minilm")
    assert sum(h for h, _ in report.shapes_after) == 72 - round(0.1 * 72)
    assert sum(n for _, n in report.shapes_after) == 9216 - round(0.1 * 9216)
    assert report.bytes_after < report.bytes_before
    assert report.rewind.steps == 3 and np.isfinite(report.rewind.losses).all()
    words_after = minilm[0].model.embeddings.word_embeddings.weight.detach()
    assert not torch.equal(words_before, words_after)  # rewinding trained the model
    assert not minilm.training

    pruned = minilm.encode(texts, convert_to_numpy=True, normalize_embeddings=True)
    cos = (pruned * original).sum(axis=1)
    assert cos.min() > 0.5, cos  # still the same embedding space, not noise
    reloaded = Encoder(tmp_path / "p10", device="cpu").encode(texts)
    np.testing.assert_allclose(reloaded, pruned, atol=1e-5)
    info = json.loads((tmp_path / "p10" / "slimvec_pruned.json").read_text())["info"]
    assert info["rewind"]["steps"] == 3 and info["options"]["sparsity"] == 0.1


def test_cli_prune_heads_only_then_ingest_and_search_with_it(tmp_path):
    from slimvec.cli import app

    out = tmp_path / "heads5"
    result = CliRunner().invoke(app, [
        "prune", "--corpus", str(DATA / "stsb-dev.tsv"), "--sparsity", "0.05", "--heads-only",
        "--rewind-steps", "0", "--batch-size", "16", "--score-sentences", "32",
        "--max-sentences", "100", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert sum(report["heads_after"]) == 72 - round(0.05 * 72)
    assert report["intermediate_after"] == [1536] * 6
    enc = Encoder(out, device="cpu")
    assert enc.encode(["a short sentence"]).shape == (1, 384)

    # the pruned folder is an encoder for ingest and search (`--encoder DIR`)
    sentences = read_corpus(DATA / "stsb-dev.tsv", limit=60)
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(sentences)))
    runner = CliRunner()
    built = runner.invoke(app, ["ingest", str(docs), "--index", str(tmp_path / "idx"), "--reducer",
                                "pca:8", "--store", "faiss:Flat", "--encoder", str(out), "--json"])
    assert built.exit_code == 0, built.output
    assert json.loads(built.stdout)["ingested"] == 60
    info = runner.invoke(app, ["info", "--index", str(tmp_path / "idx"), "--json"])
    assert str(out) in info.stdout, info.stdout  # the index records the pruned encoder
    found = runner.invoke(app, ["search", sentences[7], "--index", str(tmp_path / "idx"), "-k", "3",
                                "--json"])
    assert found.exit_code == 0, found.output
    hits = json.loads(found.stdout[found.stdout.index("["):])[0]["hits"]
    assert hits[0]["id"] == 7 and abs(hits[0]["score"] - 1.0) < 1e-3
