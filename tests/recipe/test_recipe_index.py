"""--recipe on ingest / migrate: recorded in the manifest; rescore=auto calibrated at the end of the
run; searches use the recorded depth; info reports it. Real FAISS / hnswlib / Qdrant Edge stores,
real MiniLM vectors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import slimvec
from slimvec.errors import ConfigError, PersistenceError
from slimvec.index.manifest import Manifest
from slimvec.indexer.calibrate import depth_ladder
from slimvec.migrate import MigrateOptions, migrate

AUTO = "pca:24|faiss:HNSW32,SQ8|rescore=auto"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "slimvec", *args], capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def npy(minilm_vectors, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("src") / "vectors.npy"
    np.save(path, minilm_vectors)
    return path


@pytest.fixture(scope="module")
def auto_index(npy, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("auto") / "idx"
    migrate(str(npy), folder, MigrateOptions(recipe=AUTO, progress=False))
    return folder


def test_auto_depth_is_calibrated_and_recorded(auto_index, minilm_vectors):
    m = Manifest.read(auto_index)
    assert m.recipe == "pca:24|faiss:HNSW32,SQ8|rescore=auto,target=0.99"
    assert m.reducer == "pca:24" and m.store == "faiss:HNSW32,SQ8"
    assert m.full is not None and m.full.dtype == "float16" and m.full.dir  # the default precision
    r = m.rescore
    assert r is not None and r.calibrated and r.reached
    assert r.depth in depth_ladder(64) and r.depth > 1  # pca:24 + SQ8 needs rescoring
    # corpus vectors are calibrated for half the target's miss rate (calibrate.CORPUS_MISS_SHARE)
    assert r.recall >= 0.995 and r.target == pytest.approx(0.995) and r.k == 10
    assert r.n_queries == 500 and r.n_corpus == len(minilm_vectors)


def test_search_uses_the_recorded_depth(auto_index, minilm_vectors):
    X = minilm_vectors
    q = X[1000:1100] + 0.01 * np.random.default_rng(0).standard_normal((100, X.shape[1])).astype(np.float32)
    with slimvec.open(auto_index) as idx:
        depth = idx.manifest.rescore.depth
        default = idx.search(q, 10)
        explicit = idx.search(q, 10, rescore=depth)
        plain = idx.store.search(idx.reducer.transform(q), 10)
    np.testing.assert_array_equal(default.ids, explicit.ids)
    np.testing.assert_allclose(default.scores, explicit.scores)
    # the default rescored: its scores are full-space cosines, and it beats the reduced index
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    truth = np.argsort(-(qn @ Xn.T), axis=1)[:, :10]
    recall = lambda ids: np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, truth)])  # noqa: E731
    assert recall(default.ids) >= 0.97
    assert recall(default.ids) > recall(plain.ids) + 0.1


def test_negative_rescore_and_k_zero_are_clear_errors_and_zero_turns_rescoring_off(auto_index, minilm_vectors):
    with slimvec.open(auto_index) as idx:
        with pytest.raises(ConfigError, match="rescore must be a positive integer"):
            idx.search(minilm_vectors[:2], 10, rescore=-1)
        off = idx.search(minilm_vectors[:5], 10, rescore=0)
        plain = idx.store.search(idx.reducer.transform(minilm_vectors[:5]), 10)
        np.testing.assert_array_equal(off.ids, plain.ids)
        with pytest.raises(ConfigError, match="k must be a positive integer"):
            idx.search(minilm_vectors[:2], 0)


def test_info_reports_recipe_depth_and_recall(auto_index):
    m = Manifest.read(auto_index)
    proc = _cli("info", "--index", str(auto_index), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["recipe"] == m.recipe
    assert data["rescore_depth"] == m.rescore.depth and data["rescore_calibrated"] is True
    assert data["rescore_recall"] == m.rescore.recall
    text = _cli("info", "--index", str(auto_index))
    assert text.returncode == 0, text.stderr
    assert f"recipe: {m.recipe}" in text.stdout
    assert "rescore_recall" in text.stdout


@pytest.fixture(scope="module")
def cli_index(sentences, tmp_path_factory) -> tuple[Path, Path]:
    """``slimvec ingest --recipe pca:32|hnsw|rescore=4`` of 300 sentences: (docs file, index)."""
    tmp = tmp_path_factory.mktemp("cli")
    docs = tmp / "docs.txt"
    docs.write_text("\n".join(sentences[:300]) + "\n", encoding="utf-8")
    proc = _cli("ingest", str(docs), "--index", str(tmp / "idx"), "--recipe", "pca:32|hnsw|rescore=4",
                "--json")
    assert proc.returncode == 0, proc.stderr
    return docs, tmp / "idx"


def test_ingest_cli_fixed_depth_recorded(cli_index):
    docs, index = cli_index
    m = Manifest.read(index)
    assert m.recipe == "pca:32|hnsw|rescore=4" and m.reducer == "pca:32" and m.store == "hnsw"
    assert m.rescore is not None and m.rescore.depth == 4 and not m.rescore.calibrated
    assert m.rescore.recall is None
    assert m.full is not None and m.full.dtype == "float16"  # a recipe's keep_full default
    # a second run with the same recipe adds to it; another recipe is refused
    again = _cli("ingest", str(docs), "--index", str(index), "--recipe", "pca:32|hnsw|rescore=8")
    assert again.returncode != 0
    assert "recipe 'pca:32|hnsw|rescore=4' (asked 'pca:32|hnsw|rescore=8')" in again.stderr
    assert "Traceback" not in again.stderr


def test_recipe_and_disagreeing_store_are_refused(npy, tmp_path):
    proc = _cli("migrate", "--from", str(npy), "--index", str(tmp_path / "idx"),
                "--recipe", "pca:24|hnsw|rescore=2", "--store", "faiss")
    assert proc.returncode != 0
    err = " ".join(proc.stderr.split())
    assert "disagrees with --store 'faiss' (the recipe says 'hnsw')" in err
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "idx" / "manifest.json").exists()
    # the same store given twice is fine
    opts = MigrateOptions(recipe="pca:24|hnsw|rescore=2", store="hnsw", progress=False)
    migrate(str(npy), tmp_path / "ok", opts)
    assert Manifest.read(tmp_path / "ok").rescore.depth == 2


def test_auto_with_qdrant_in_store_full_vectors_is_refused_at_the_start(npy, tmp_path):
    with pytest.raises(ConfigError, match="calibration is not supported"):
        migrate(str(npy), tmp_path / "idx", MigrateOptions(recipe="pca:24|qdrant-edge|rescore=auto,keep_full=float32",
                                                           progress=False))
    assert not (tmp_path / "idx" / "manifest.json").exists()
    assert not (tmp_path / "idx" / "store").exists()


def test_manifest_recipe_fields_are_validated(auto_index, tmp_path):
    raw = json.loads((auto_index / "manifest.json").read_text())
    bad = dict(raw, rescore=dict(raw["rescore"], depth="32"))
    with pytest.raises(PersistenceError, match="'rescore.depth' should be int"):
        Manifest.from_json(bad, tmp_path / "manifest.json")
    bad = dict(raw, rescore=dict(raw["rescore"], depth=0))
    with pytest.raises(PersistenceError, match="'rescore.depth' should be >= 1"):
        Manifest.from_json(bad, tmp_path / "manifest.json")
    bad = dict(raw, recipe="pca:24")
    with pytest.raises(PersistenceError, match="key 'recipe' is not a valid recipe"):
        Manifest.from_json(bad, tmp_path / "manifest.json")
    old = {k: v for k, v in raw.items() if k not in ("recipe", "rescore")}
    m = Manifest.from_json(old, tmp_path / "manifest.json")
    assert m.recipe is None and m.rescore is None
    assert "recipe" not in m.extra


def test_search_with_a_recipe_uses_its_depth_and_refuses_another_build(auto_index, tmp_path):
    with slimvec.open(auto_index) as idx:
        calibrated = idx.manifest.rescore.depth
        assert idx.recipe_depth(AUTO) == calibrated
        assert idx.recipe_depth("pca:24|faiss:HNSW32,SQ8|rescore=3") == 3
        assert idx.recipe_depth("pca:24|faiss:HNSW32,SQ8") == 0
        with pytest.raises(ConfigError, match=r"reducer 'pca:32' \(the index has 'pca:24'\)"):
            idx.recipe_depth("pca:32|faiss:HNSW32,SQ8|rescore=4")
        with pytest.raises(ConfigError, match=r"store 'hnsw' \(the index has 'faiss:HNSW32,SQ8'\)"):
            idx.recipe_depth("pca:24|hnsw|rescore=4")
    recipe_file = tmp_path / "tuned.json"
    recipe_file.write_text(json.dumps({"recipe": "pca:24|faiss:HNSW32,SQ8|rescore=5"}))
    with slimvec.open(auto_index) as idx:
        assert idx.recipe_depth(recipe_file) == 5


def test_search_cli_recipe(cli_index, sentences, npy, tmp_path):
    _, index = cli_index
    ok = _cli("search", sentences[3], "--index", str(index), "--recipe", "pca:32|hnsw|rescore=4", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)[0]["hits"][0]["text"] == sentences[3]
    bad = _cli("search", sentences[3], "--index", str(index), "--recipe", "pca:16|hnsw|rescore=4")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "reducer 'pca:16' (the index has 'pca:32')" in " ".join(bad.stderr.split())
    both = _cli("search", "x", "--index", str(index), "--recipe", "pca:32|hnsw", "--rescore", "2")
    assert both.returncode != 0 and "not both" in both.stderr
    # an index without full vectors: a rescoring recipe is refused with the way out
    migrate(str(npy), tmp_path / "plain", MigrateOptions(reducer="pca:24", store="hnsw", progress=False))
    with slimvec.open(tmp_path / "plain") as idx:
        assert idx.recipe_depth("pca:24|hnsw") == 0
        with pytest.raises(ConfigError, match="keeps no full vectors"):
            idx.recipe_depth("pca:24|hnsw|rescore=4")


def test_a_run_stopped_before_calibration_warns_and_the_rerun_calibrates(npy, tmp_path, caplog):
    """finish() commits 'done' and then calibrates: a kill in between leaves no depth. Opening
    says so; rerunning the same command adds nothing and calibrates."""
    import logging

    folder = tmp_path / "idx"
    migrate(str(npy), folder, MigrateOptions(recipe=AUTO, progress=False))
    raw = json.loads((folder / "manifest.json").read_text())
    count = raw["count"]
    raw["rescore"] = None  # what a kill between the 'done' commit and the calibration leaves
    (folder / "manifest.json").write_text(json.dumps(raw))
    with caplog.at_level(logging.WARNING, logger="slimvec.index.folder"):
        with slimvec.open(folder) as idx:
            assert idx.manifest.rescore is None
            with pytest.raises(ConfigError, match="no calibrated rescoring depth"):
                idx.recipe_depth(AUTO)
    assert "rerun the same ingest / migrate command" in caplog.text
    migrate(str(npy), folder, MigrateOptions(recipe=AUTO, progress=False))
    m = Manifest.read(folder)
    assert m.count == count and m.rescore is not None and m.rescore.calibrated


def test_a_depth_capped_short_of_the_target_shows_in_the_summary_and_info(minilm_vectors, tmp_path):
    """Issue 27 item 3: rescore=auto that hits its depth cap below the target says so where the
    user looks (the migrate / ingest summary and `info`), not only in a log warning."""
    from typer.testing import CliRunner

    from slimvec.cli import app

    src = tmp_path / "v.npy"
    np.save(src, minilm_vectors[:1500])
    folder = tmp_path / "idx"
    run = CliRunner().invoke(app, ["migrate", "--from", str(src), "--index", str(folder),
                                   "--recipe", "pca:2|hnsw|rescore=auto"])
    assert run.exit_code == 0, run.output
    m = Manifest.read(folder)
    assert m.rescore.reached is False and m.rescore.depth == 64
    said = " ".join(run.output.split())
    assert f"target not met: reached {m.rescore.recall:.4f} at depth cap 64" in said
    info = CliRunner().invoke(app, ["info", "--index", str(folder), "--json"])
    assert info.exit_code == 0, info.output
    status = json.loads(info.stdout)["rescore_status"]
    assert status.startswith(f"target not met: reached {m.rescore.recall:.4f} at depth cap 64 (target 0.99")
    assert "larger reducer dimension" in status
    text = CliRunner().invoke(app, ["info", "--index", str(folder)])
    assert "target not met" in text.stdout


def test_info_says_a_met_target(auto_index):
    from typer.testing import CliRunner

    from slimvec.cli import app

    out = CliRunner().invoke(app, ["info", "--index", str(auto_index), "--json"])
    status = json.loads(out.stdout)["rescore_status"]
    m = Manifest.read(auto_index)
    assert status.startswith(f"target met: {m.rescore.recall:.4f} at depth {m.rescore.depth} (target 0.995 "
                             "on corpus vectors, which are held to half the recipe target's miss rate")
