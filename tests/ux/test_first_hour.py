"""Issue 27, "the first hour": items 4 (help and summaries), 5 (rescoring controls), 6 (small
corpora) through the real CLI (typer's CliRunner, real MiniLM, real Qdrant Edge / hnswlib)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slimvec.buildspec import DEFAULTS
from slimvec.cli import app
from slimvec.recipe import DEFAULT_RECIPE, parse_recipe
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
    """50 real sentences into the default recipe (the case that failed with PCA-96, the default
    before issue 28)."""
    folder = tmp_path_factory.mktemp("small-index") / "idx"
    result = runner.invoke(app, ["ingest", str(small_docs), "--index", str(folder)])
    return folder, result


# ---------------------------------------------------------------------------- item 6
def test_small_corpus_with_the_default_recipe_builds(small_index):
    # the default recipe has no reducer to fit: 50 documents build it as they are
    folder, result = small_index
    out = flat(result.output)
    assert result.exit_code == 0, out
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["recipe"] == str(parse_recipe(DEFAULT_RECIPE)) and manifest["dim_out"] == 384
    assert not (folder / ".slimvec-new").exists()
    assert manifest["count"] == SMALL


def test_small_corpus_under_a_default_recipe_with_a_reducer_keeps_the_full_vectors(small_docs, tmp_path):
    # a default recipe whose reducer cannot be fitted on the corpus (the service's --recipe, or
    # IngestOptions.default_recipe) falls back to the full vectors in its store, and says so
    from slimvec.indexer.pipeline import IngestOptions, ingest

    said: list[str] = []
    summary = ingest(small_docs, tmp_path / "idx", IngestOptions(
        default_recipe="pca:96|hnsw|rescore=auto,keep_full=float16", progress=False), notify=said.append)
    text = flat(" ".join(said))
    assert "small corpus" in text and "50 document(s), fewer than the 96" in text, text
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["recipe"] == "none|hnsw" and summary.ingested == SMALL


def test_small_corpus_index_is_searchable(runner, small_index):
    folder, _ = small_index
    text = bundled_sentences(SMALL)[7]
    found = runner.invoke(app, ["search", text, "--index", str(folder), "-k", "3", "--json"])
    assert found.exit_code == 0, found.output
    hits = json.loads(found.stdout)[0]["hits"]
    assert hits[0]["id"] == "d7" and abs(hits[0]["score"] - 1.0) < 1e-3


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
    store = DEFAULTS["store"]
    assert f"--reducer given, so this index is pca:16 in {store} with no full vectors kept, " \
           "so no rescoring" in out, out
    assert f"--recipe 'pca:16|{store}|rescore=auto,keep_full=float16'" in out, out
    assert json.loads(result.stdout)["recipe"] == f"pca:16|{store}"


# ---------------------------------------------------------------------------- item 4
@pytest.fixture(scope="module")
def rescored_index(runner, tmp_path_factory):
    """120 sentences, PCA-16 in hnswlib, float16 side file, depth 4: what info must describe."""
    tmp = tmp_path_factory.mktemp("rescored")
    docs = write_docs(tmp / "docs.jsonl", bundled_sentences(120))
    folder = tmp / "idx"
    result = runner.invoke(app, ["ingest", str(docs), "--index", str(folder), "--recipe",
                                 "pca:16|hnsw|rescore=4,keep_full=float16"])
    assert result.exit_code == 0, result.output
    return folder, result


@pytest.mark.parametrize("command,expected", [
    ("ingest", [f"[default: the default recipe {DEFAULT_RECIPE}",
                "needs slimvec[ray])", "[default: 'id' if present, else a hash of the text]"]),
    ("search", ["[default: the depth recorded by the index's recipe (slimvec info shows it as xR), else 0]",
                "0: no re-ranking", "A score is the cosine similarity"]),
])
def test_help_shows_the_hand_written_defaults(runner, command, expected):
    result = runner.invoke(app, [command, "--help"], terminal_width=200, max_content_width=200)
    assert result.exit_code == 0
    text = flat(result.output)
    for phrase in expected:
        assert phrase in text, (phrase, text)


def test_ingest_prints_the_recipe_it_used(small_index, rescored_index):
    assert f"recipe: {parse_recipe(DEFAULT_RECIPE)}" in flat(small_index[1].output)
    assert "recipe: pca:16|hnsw|rescore=4 (" in flat(rescored_index[1].output)


def test_info_says_what_was_saved(runner, rescored_index):
    folder, _ = rescored_index
    data = json.loads(runner.invoke(app, ["info", "--index", str(folder), "--json"]).stdout)
    assert data["full_vector_bytes"] == 384 * 4 and data["reduced_vector_bytes"] == 16 * 4
    assert data["full_file"] == "full/vectors.f16" and data["full_dtype"] == "float16"
    assert data["full_bytes"] >= 120 * 384 * 2
    assert data["rescore"] == "x4"
    # hnswlib holds its graph file in RAM, plus the 16 B/vector id lookup of the side file
    graph = sum(p.stat().st_blocks * 512 for p in (folder / "store").iterdir()
                if p.name.startswith("index.hnsw"))
    assert data["ram_bytes"] == graph + 16 * 120 and graph > 0, data
    text = flat(runner.invoke(app, ["info", "--index", str(folder)]).output)
    assert "against 1,536 B for one full 384-d float32 vector" in text, text
    assert "full vectors for rescoring: full/vectors.f16 (float16" in text, text
    assert "rescoring: x4 by default" in text, text
    assert "RAM while serving:" in text, text


# ---------------------------------------------------------------------------- item 5
def search_json(runner, folder: Path, *args: str) -> dict:
    text = bundled_sentences(120)[11]
    result = runner.invoke(app, ["search", text, "--index", str(folder), "-k", "5", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)[0]


def test_search_rescore_0_means_no_re_ranking_and_says_which_space(runner, rescored_index):
    folder, _ = rescored_index
    default = search_json(runner, folder)
    plain = search_json(runner, folder, "--rescore", "0")
    assert default["rescore"] == 4 and plain["rescore"] == 0
    assert default["score"].startswith("cosine similarity of the full 384-d encoder vectors (float16)")
    assert plain["score"].startswith("cosine similarity of the reduced 16-d vectors (pca:16)")
    assert default["hits"][0]["id"] == "d11" and abs(default["hits"][0]["score"] - 1) < 1e-3
    # the same documents score differently in the two spaces
    re_ranked = {h["id"]: h["score"] for h in default["hits"]}
    reduced = {h["id"]: h["score"] for h in plain["hits"]}
    shared = [s for s in re_ranked if s in reduced and s != "d11"]
    assert shared and any(abs(re_ranked[s] - reduced[s]) > 1e-3 for s in shared)
    as_none = search_json(runner, folder, "--recipe", "none")
    assert {k: v for k, v in as_none.items() if k != "timings_ms"} == \
        {k: v for k, v in plain.items() if k != "timings_ms"}


def test_search_json_has_payload_fields_and_timings(runner, rescored_index):
    folder, _ = rescored_index
    item = search_json(runner, folder)
    hit = item["hits"][0]
    assert hit["payload"] == {"id": "d11", "lang": "en", "n": 11}  # every field of the row
    # the user's id as "id" (what the table shows), the store's as "store_id" (issue 52)
    assert hit["id"] == "d11" and isinstance(hit["store_id"], int) and "source_id" not in hit
    t = item["timings_ms"]
    assert t["queries"] == 1 and t["total_ms"] >= t["search_ms"] > 0 and t["encode_ms"] > 0


def test_search_negative_rescore_gives_true_advice(runner, rescored_index):
    folder, _ = rescored_index
    result = runner.invoke(app, ["search", "x", "--index", str(folder), "--rescore", "-1"])
    assert result.exit_code != 0
    message = flat(str(result.exception))
    assert "--rescore must be 0 (no re-ranking) or a positive depth R" in message, message
    assert "omit --rescore to search without re-ranking" not in message


def test_ingest_recipe_none_builds_without_a_recipe(runner, small_docs, tmp_path):
    folder = tmp_path / "idx"
    result = runner.invoke(app, ["ingest", str(small_docs), "--index", str(folder), "--recipe",
                                 "none", "--reducer", "pca:16", "--store", "hnsw", "--json"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["reducer"] == "pca:16" and manifest.get("recipe") is None
    assert manifest.get("full") is None and not (folder / "full").exists()
    assert "the rest of the default recipe" not in flat(result.stderr)


def test_search_text_on_a_vector_only_index_says_what_to_do(runner, tmp_path):
    """The timed search encodes through Index.embed, which names the way out for an index
    migrated from vectors (it has no encoder)."""
    import numpy as np

    from slimvec.migrate.run import MigrateOptions, migrate

    rng = np.random.default_rng(0)
    np.save(tmp_path / "v.npy", rng.standard_normal((60, 384)).astype(np.float32))
    migrate(f"npy:{tmp_path / 'v.npy'}", tmp_path / "idx",
            MigrateOptions(reducer="rp:8", store="hnsw", progress=False))
    result = runner.invoke(app, ["search", "a text", "--index", str(tmp_path / "idx")])
    assert result.exit_code != 0
    message = flat(str(result.exception))
    assert "records no encoder" in message and "--vectors FILE" in message
