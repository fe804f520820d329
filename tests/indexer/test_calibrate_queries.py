"""``slimvec calibrate --queries``: the rescoring depth of a default-recipe index re-measured on
the user's queries, kept in the folder for later calibrations, and guarded like the index's other
files (real MiniLM encoder, real Qdrant Edge store, real full-vector file)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from slimvec.cli import app
from slimvec.errors import ConfigError, PersistenceError
from slimvec.index.calibration_queries import CALIBRATION_QUERIES_FILE
from slimvec.index.folder import open_index, read_manifest
from slimvec.index.safefs import LinkError
from slimvec.indexer.calibrate import depth_ladder, exact_neighbours_of
from slimvec.indexer.pipeline import IngestOptions, ingest
from slimvec.ops.recalibrate import calibrate_index
from tests.conftest import bundled_sentences

TEXTS = bundled_sentences(1300)
CORPUS, MORE, QUERIES = TEXTS[:800], TEXTS[800:1000], TEXTS[1000:1200]


def _jsonl(path, texts, start=0):
    with open(path, "w", encoding="utf-8") as fh:
        for i, t in enumerate(texts, start):
            fh.write(json.dumps({"id": f"d{i}", "text": t}) + "\n")
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A default-recipe index (pca:96, Qdrant Edge, float16 full vectors, rescore=auto)."""
    root = tmp_path_factory.mktemp("cal")
    ingest(_jsonl(root / "docs.jsonl", CORPUS), root / "idx",
           IngestOptions(fit_sample=400, batch_size=200, progress=False))
    (root / "queries.txt").write_text("\n".join(QUERIES[:100]) + "\n\n" + "\n".join(QUERIES[100:])
                                      + "\n", encoding="utf-8")  # a blank line: skipped
    return root


@pytest.fixture
def index(built, tmp_path):
    shutil.copytree(built / "idx", tmp_path / "idx")
    return tmp_path / "idx"


def test_cli_calibrates_on_the_queries_and_records_what_they_measure(built, index, encoder):
    before = read_manifest(index).rescore
    assert before.calibrated and before.queries is None and before.n_queries > 0
    res = CliRunner().invoke(app, ["calibrate", "--index", str(index), "--queries",
                                   str(built / "queries.txt"), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["queries"] == 200 and out["previous_depth"] == before.depth
    m = read_manifest(index)
    assert m.rescore.queries == CALIBRATION_QUERIES_FILE and m.rescore.n_queries == 200
    assert m.rescore.depth == out["depth"] and m.rescore.n_corpus == 800
    assert CALIBRATION_QUERIES_FILE in m.sha256  # checked on every later open by a writer
    # the recorded recall is what searching these queries at that depth measures
    q = encoder.encode(QUERIES)
    with open_index(index) as idx:
        truth = exact_neighbours_of(idx.full_vectors, q, 10)
        ladder = depth_ladder(64)
        below = ladder[max(0, ladder.index(m.rescore.depth) - 1)]  # the x1.5 ladder's step below
        for depth in {m.rescore.depth, below}:
            found = idx.search(QUERIES, 10, rescore=depth).ids
            recall = np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found.tolist(), truth.tolist())])
            if depth == m.rescore.depth:
                assert recall == pytest.approx(m.rescore.recall, abs=1e-6)
            elif m.rescore.depth > 1:
                assert recall < m.rescore.target  # the step below did not reach it
        assert idx.info()["rescore_calibrated_on"] == "200 given queries"


def test_later_ingest_recalibrates_on_the_stored_queries(built, index):
    calibrate_index(index, QUERIES)
    ingest(_jsonl(built / "more.jsonl", MORE, start=800), index,
           IngestOptions(batch_size=200, progress=False))
    m = read_manifest(index)
    assert m.count == 1000
    assert m.rescore.queries == CALIBRATION_QUERIES_FILE
    assert m.rescore.n_queries == 200 and m.rescore.n_corpus == 1000


def test_stored_queries_are_guarded_and_owned(built, index, tmp_path):
    calibrate_index(index, QUERIES)
    path = index / CALIBRATION_QUERIES_FILE
    # replaced by another file: the recorded SHA-256 refuses it
    data = path.read_bytes()
    path.write_bytes(data[:-4] + b"\0\0\0\0")
    with pytest.raises(PersistenceError, match="SHA-256"):
        calibrate_index(index, QUERIES)
    # a link in its place is never followed
    path.unlink()
    (tmp_path / "elsewhere").write_bytes(data)
    os.symlink(tmp_path / "elsewhere", path)
    with pytest.raises(LinkError):
        calibrate_index(index, QUERIES)
    path.unlink()
    path.write_bytes(data)
    # --rebuild deletes it as a file slimvec wrote (no "holds files ... not account for" refusal)
    ingest(_jsonl(tmp_path / "docs.jsonl", CORPUS[:300]), index,
           IngestOptions(fit_sample=300, batch_size=300, progress=False, rebuild=True))
    assert not path.exists() and read_manifest(index).rescore.queries is None


def test_refusals_name_the_problem(built, tmp_path):
    ingest(_jsonl(tmp_path / "docs.jsonl", CORPUS[:300]), tmp_path / "plain",
           IngestOptions(reducer="pca:32", fit_sample=300, batch_size=300, progress=False))
    with pytest.raises(ConfigError, match="rescore=auto"):
        calibrate_index(tmp_path / "plain", QUERIES[:10])
    with pytest.raises(ConfigError, match="holds no index"):
        calibrate_index(tmp_path / "nothing", QUERIES[:10])
    (tmp_path / "empty.txt").write_text("\n\n", encoding="utf-8")
    res = CliRunner().invoke(app, ["calibrate", "--index", str(built / "idx"), "--queries",
                                   str(tmp_path / "empty.txt")])
    assert isinstance(res.exception, ConfigError) and "no usable query" in str(res.exception)
