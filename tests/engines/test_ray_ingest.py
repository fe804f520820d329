"""``--engine ray`` against the single-process ingest, on a real local Ray runtime."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from slimvec.index.folder import open_index
from slimvec.indexer.pipeline import IngestOptions, ingest
from tests.engines.conftest import write_jsonl

OPTS = dict(reducer="pca:32", store="qdrant-edge", fit_sample=100, batch_size=32, progress=False)
QUERIES = ["a man is playing a guitar", "a woman is slicing an onion", "the cat sat on the mat",
           "stocks fell sharply today"]


def _all_ids(folder: Path, docs: list[dict]) -> set[int]:
    from slimvec.ids import doc_id

    with open_index(folder) as idx:
        found = idx.payloads([doc_id(d["id"]) for d in docs])
    return {doc_id(d["id"]) for d, p in zip(docs, found) if p is not None}


def test_two_workers_match_single_process(ray_runtime, docs_200, tmp_path, capsys, monkeypatch):
    from slimvec.engines.ray_ingest import RayOptions, ray_ingest
    from slimvec.index.manifest import Manifest

    src = write_jsonl(tmp_path / "docs.jsonl", docs_200)
    single = ingest(src, tmp_path / "single", IngestOptions(**OPTS))
    capsys.readouterr()
    monkeypatch.setenv("SLIMVEC_PROGRESS_SECONDS", "0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist = ray_ingest(str(src), tmp_path / "ray", IngestOptions(**{**OPTS, "progress": True}),
                          RayOptions(workers=2))
    # issue 52: the single-process ingest's progress lines (total, ETA), and no deprecation
    # warning from slimvec's own Ray Data calls
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("progress: ")]
    assert any(ln.startswith("progress: sampling input") for ln in lines), lines
    ingesting = [ln for ln in lines if ln.startswith("progress: ingesting docs.jsonl")]
    assert ingesting and all("/200 docs (" in ln for ln in ingesting), lines
    assert "done" in ingesting[-1] and "docs/s" in ingesting[-1], lines
    ours = [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught
            if "deprecat" in f"{w.category.__name__} {w.message}".lower()
            and "/slimvec/" in w.filename]
    assert not ours, ours
    assert dist.ingested == single.ingested == 200
    assert dist.count == single.count == 200
    # the actors' time, measured per block (it was 0.0); the writer's on the driver
    assert dist.encode_seconds > 0 and sum(n["documents"] for n in dist.nodes.values()) == 200
    assert sum(n["write_seconds"] for n in dist.nodes.values()) > 0
    assert "nodes" in dist.to_json() and "nodes" not in single.to_json()
    # same reducer artifact: fitted once on the same sample, encoded the same way
    a = (tmp_path / "single" / "reducer" / "state.safetensors").read_bytes()
    b = (tmp_path / "ray" / "reducer" / "state.safetensors").read_bytes()
    assert a == b
    assert _all_ids(tmp_path / "single", docs_200) == _all_ids(tmp_path / "ray", docs_200)
    with open_index(tmp_path / "single") as s, open_index(tmp_path / "ray") as r:
        rs, rr = s.search(QUERIES, 10), r.search(QUERIES, 10)
    np.testing.assert_array_equal(rs.ids, rr.ids)
    np.testing.assert_allclose(rs.scores, rr.scores, atol=1e-5)
    manifest = Manifest.read(tmp_path / "ray")  # typed, validated progress record
    assert manifest.progress.state == "done" and manifest.progress.engine == "ray"
    assert manifest.id_rule == Manifest.read(tmp_path / "single").id_rule
    assert sum(map(len, manifest.progress.committed.values())) == 7  # ceil(200 / 32)
    # the same command again: nothing to do
    again = ray_ingest(str(src), tmp_path / "ray", IngestOptions(**OPTS), RayOptions(workers=2))
    assert again.already_done and again.count == 200


def test_bad_rows_of_several_files_land_in_one_rejects_file(ray_runtime, docs_200, tmp_path):
    from slimvec.engines.ray_ingest import RayOptions, ray_ingest

    folder = tmp_path / "in"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", docs_200[:50] + ["{not json", {"id": "x1", "text": ""}])
    write_jsonl(folder / "b.jsonl", docs_200[50:100] + [{"id": "x2"}, "[1, 2]"])
    (folder / "c.csv").write_text("id,text\n" + "".join(f"c{i},{d['text'].replace(',', ' ')}\n"
                                                       for i, d in enumerate(docs_200[100:140]))
                                  + "c-bad,one,too many\n", encoding="utf-8")
    summary = ray_ingest(str(folder), tmp_path / "idx", IngestOptions(**OPTS), RayOptions(workers=1))
    lines = [json.loads(x) for x in (tmp_path / "idx" / "rejects.jsonl").read_text().splitlines()]
    assert summary.ingested == 140 and summary.count == 140
    assert summary.rejected == len(lines) == 5
    assert len({(r["source"], r["row"]) for r in lines}) == 5  # each bad row once
    by_file = {Path(r["source"]).name for r in lines}
    assert by_file == {"a.jsonl", "b.jsonl", "c.csv"}
    reasons = sorted(r["reason"] for r in lines)
    assert any(x.startswith("malformed JSON") for x in reasons)
    assert any(x.startswith("ragged row") for x in reasons)
    assert "missing text" in reasons and "empty or whitespace-only text" in reasons


def test_folder_safety_comes_from_the_builder(ray_runtime, docs_200, tmp_path):
    """A non-index folder with a user's file is refused before any Ray work, nothing deleted."""
    import pytest

    from slimvec.engines.ray_ingest import RayOptions, ray_ingest
    from slimvec.errors import ConfigError

    src = write_jsonl(tmp_path / "docs.jsonl", docs_200[:10])
    folder = tmp_path / "idx"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not a slimvec index"):
        ray_ingest(str(src), folder, IngestOptions(**OPTS, rebuild=False), RayOptions(workers=1))
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_default_recipe_keeps_full_vectors_and_calibrates_as_one_process(ray_runtime, docs_200,
                                                                         tmp_path):
    """No reducer, store or recipe given: the Ray engine builds the default recipe (pca:96,
    Qdrant Edge, float16 full vectors, calibrated rescoring) as the single-process ingest does."""
    from slimvec.engines.ray_ingest import RayOptions, ray_ingest
    from slimvec.index.manifest import Manifest
    from slimvec.recipe import DEFAULT_RECIPE, resolve_recipe

    opts = dict(fit_sample=200, batch_size=50, progress=False)
    src = write_jsonl(tmp_path / "docs.jsonl", docs_200)
    single = ingest(src, tmp_path / "single", IngestOptions(**opts))
    dist = ray_ingest(str(src), tmp_path / "ray", IngestOptions(**opts), RayOptions(workers=1))
    assert dist.ingested == single.ingested == 200
    one, ray = Manifest.read(tmp_path / "single"), Manifest.read(tmp_path / "ray")
    assert ray.recipe == one.recipe  # the canonical form, e.g. with the calibration target
    assert resolve_recipe(ray.recipe) == resolve_recipe(DEFAULT_RECIPE)
    assert ray.full is not None and ray.full.dtype == "float16" and ray.full == one.full
    assert ray.rescore is not None and ray.rescore.depth == one.rescore.depth  # calibrated alike
    with open_index(tmp_path / "single") as s, open_index(tmp_path / "ray") as r:
        rs, rr = s.search(QUERIES, 10), r.search(QUERIES, 10)  # the recipe's rescoring depth
    np.testing.assert_array_equal(rs.ids, rr.ids)
    np.testing.assert_allclose(rs.scores, rr.scores, atol=1e-3)
