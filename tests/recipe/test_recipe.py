"""Recipe strings and tuned.json: parsing, canonical form, round trips, clear errors."""

from __future__ import annotations

import json

import pytest

from slimvec.errors import ConfigError
from slimvec.recipe import Recipe, load_recipe, parse_recipe, resolve_recipe, save_recipe


def test_parse_faiss_factory_keeps_its_commas():
    r = parse_recipe("pca:192|faiss:HNSW32,SQ8|rescore=4")
    # a rescoring recipe keeps float16 full vectors unless it names another precision, as the
    # default recipe (issue 40 item 6); the canonical string names another precision only
    assert (r.reducer, r.store, r.rescore, r.keep_full) == ("pca:192", "faiss:HNSW32,SQ8", 4, "float16")
    assert str(r) == "pca:192|faiss:HNSW32,SQ8|rescore=4"
    assert parse_recipe("pca:192|faiss:HNSW32,SQ8|rescore=4,keep_full=float16") == r
    r32 = parse_recipe("pca:192|faiss:HNSW32,SQ8|rescore=4,keep_full=float32")
    assert r32.keep_full == "float32" and str(r32).endswith("keep_full=float32")
    assert parse_recipe(str(r32)) == r32


def test_recipe_json_written_when_float32_was_implied_still_loads():
    old = {"recipe": "pca:96|hnsw|rescore=4", "keep_full": "float32"}
    assert Recipe.from_json(old).keep_full == "float32"


def test_auto_rescore_with_target_and_half_precision():
    r = parse_recipe(" pca:96 | hnsw:M=16,ef=64 | rescore=auto,target=0.995 | keep_full=float16 ")
    assert r.auto_rescore and r.target_recall == 0.995 and r.keep_full == "float16"
    assert parse_recipe(str(r)) == r
    assert r.with_depth(8).rescore == 8 and not r.with_depth(8).auto_rescore


def test_no_rescore_and_canonical_store():
    r = parse_recipe("none|qdrant-edge:quant=sq8")
    assert r.rescore is None and r.keep_full is None
    assert str(r) == "none|qdrant-edge:quant=sq8"
    assert str(parse_recipe("none|faiss")) == "none|faiss:HNSW32"


@pytest.mark.parametrize("text, words", [
    ("pca:96", ["reducer and a store"]),
    ("pca:96|hnsw|rescore=0", ["rescore", ">= 1"]),
    ("pca:96|hnsw|rescore=many", ["positive integer or 'auto'"]),
    ("pca:96|hnsw|depth=4", ["depth=4", "rescore=..."]),
    ("pca:96|hnsw|rescore=4,rescore=8", ["given twice"]),
    ("pca:96|hnsw|rescore=4,target=0.9", ["rescore=auto only"]),
    ("pca:96|hnsw|rescore=auto,target=1.5", ["(0, 1]"]),
    ("pca:96|hnsw|rescore=4,keep_full=int8", ["keep_full", "float16"]),
    ("pca:96|hnsw|rescore=4,keep_full=none", ["needs the full vectors"]),
    ("pcx:96|hnsw", ["reducer stage", "Unknown reducer"]),
    ("pca:96|milvus", ["store stage", "Unknown store"]),
    ("", ["Empty recipe"]),
])
def test_bad_recipes_say_what_is_wrong(text, words):
    with pytest.raises(ConfigError) as err:
        parse_recipe(text)
    for word in words:
        assert word in str(err.value)


def test_json_round_trip_keeps_records(tmp_path):
    r = Recipe("pca:128", "faiss:HNSW32,SQ8", rescore="auto", target_recall=0.98,
               measured={"neighbor_recall_at_10": 0.991}, runners_up=[{"recipe": "pca:96|hnsw"}])
    path = save_recipe(tmp_path / "tuned.json", r)
    back = load_recipe(path)
    assert back == r and back.measured == r.measured and back.runners_up == r.runners_up
    assert resolve_recipe(path) == r
    assert resolve_recipe("pca:128|hnsw") == parse_recipe("pca:128|hnsw")


def test_json_fields_only_and_disagreement(tmp_path):
    assert Recipe.from_json({"reducer": "pca:64", "store": "hnsw", "rescore": 2}).rescore == 2
    with pytest.raises(ConfigError, match="fix one of them"):
        Recipe.from_json({"recipe": "pca:64|hnsw|rescore=2", "rescore": 4})
    with pytest.raises(ConfigError, match="unknown key"):
        Recipe.from_json({"recipe": "pca:64|hnsw", "rescor": 4})
    with pytest.raises(ConfigError, match="newer"):
        Recipe.from_json({"recipe": "pca:64|hnsw", "version": 99})
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match=str(bad)):
        load_recipe(bad)
    bad.write_text(json.dumps({"recipe": "pca:64|hnsw|rescore=0"}), encoding="utf-8")
    with pytest.raises(ConfigError, match="rescore must be >= 1"):
        load_recipe(bad)
