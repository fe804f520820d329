"""Issue 27, "the first hour": items 4 (help and summaries), 5 (rescoring controls), 6 (small
corpora) through the real CLI (typer's CliRunner, real MiniLM, real Qdrant Edge / hnswlib)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slimvec.cli import app
from tests.conftest import bundled_sentences

SMALL = 50


def flat(text: str) -> str:
    """Rich wraps long lines at the console width; compare messages on one line."""
    return " ".join(text.split())


def write_docs(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": t, "lang": "en", "n": i}) + "\n"
                            for i, t in enumerate(texts)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture(scope="module")
def small_docs(tmp_path_factory) -> Path:
    return write_docs(tmp_path_factory.mktemp("small") / "docs.jsonl", bundled_sentences(SMALL))


@pytest.fixture(scope="module")
def small_index(runner, small_docs, tmp_path_factory):
    """50 real sentences into the default recipe: the case that failed with PCA-96."""
    folder = tmp_path_factory.mktemp("small-index") / "idx"
    result = runner.invoke(app, ["ingest", str(small_docs), "--index", str(folder)])
    return folder, result


# ---------------------------------------------------------------------------- item 6
def test_small_corpus_with_the_default_recipe_builds_and_says_how(small_index):
    folder, result = small_index
    out = flat(result.output)
    assert result.exit_code == 0, out
    assert "small corpus" in out and "50 document(s), fewer than the 96" in out, out
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["recipe"] == "none|qdrant-edge" and manifest["dim_out"] == 384
    assert not (folder / ".slimvec-new").exists()
    assert manifest["count"] == SMALL


def test_small_corpus_index_is_searchable(runner, small_index):
    folder, _ = small_index
    text = bundled_sentences(SMALL)[7]
    found = runner.invoke(app, ["search", text, "--index", str(folder), "-k", "3", "--json"])
    assert found.exit_code == 0, found.output
    hits = json.loads(found.stdout)[0]["hits"]
    assert hits[0]["source_id"] == "d7" and abs(hits[0]["score"] - 1.0) < 1e-3


def test_a_failed_first_build_leaves_no_lock_or_marker(runner, small_docs, tmp_path):
    folder = tmp_path / "idx"
    result = runner.invoke(app, ["ingest", str(small_docs), "--index", str(folder),
                                 "--reducer", "pca:96"])
    assert result.exit_code != 0
    assert "n_components=96 is larger than the 50 fit sample" in flat(str(result.exception)
                                                                       + result.output)
    assert not folder.exists() or sorted(p.name for p in folder.iterdir()) == [], \
        sorted(p.name for p in folder.iterdir())


def test_a_failed_build_in_an_existing_empty_folder_leaves_it_empty(runner, small_docs, tmp_path):
    folder = tmp_path / "idx"
    folder.mkdir()
    result = runner.invoke(app, ["ingest", str(small_docs), "--index", str(folder),
                                 "--reducer", "pca:64", "--store", "hnsw"])
    assert result.exit_code != 0
    assert folder.is_dir() and sorted(p.name for p in folder.iterdir()) == []


def test_one_part_of_a_recipe_says_loudly_the_rest_of_the_default_is_not_applied(
        runner, small_docs, tmp_path):
    result = runner.invoke(app, ["ingest", str(small_docs), "--index", str(tmp_path / "idx"),
                                 "--reducer", "pca:16", "--json"])
    assert result.exit_code == 0, result.output
    out = flat(result.stderr)
    assert "--reducer given, so this index is pca:16 in qdrant-edge with no full vectors kept, " \
           "so no rescoring" in out, out
    assert "--recipe 'pca:16|qdrant-edge|rescore=auto,keep_full=float16'" in out, out
    assert json.loads(result.stdout)["recipe"] == "pca:16|qdrant-edge"
