"""One build spec (issue 24 item 1): the defaults table, the BuildSpec round trip, the parsed
``rescore=auto`` check and the one "default recipe when nothing was named" rule."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from slimvec.buildspec import DEFAULTS, BuildSpec, default_recipe, default_reducer
from slimvec.errors import ConfigError
from slimvec.index.manifest import Manifest
from slimvec.indexer.builder import IndexBuilder, IndexSpec
from slimvec.recipe import DEFAULT_RECIPE, Recipe, parse_recipe, recipe_or_default, recipe_rescore


def test_one_defaults_table():
    assert DEFAULT_RECIPE == default_recipe() == "none|faiss:HNSW16,SQ4,ef=128,efc=200|rescore=auto,keep_full=float16"
    assert (Recipe().reducer, Recipe().store) == (DEFAULTS["reducer"], DEFAULTS["store"])
    for metric in ("cosine", "ip", "l2"):  # every default recipe parses, reducer stage canonical
        assert parse_recipe(default_recipe(metric)).reducer == default_reducer(metric)
    assert default_reducer("l2") == default_reducer("ip") == "none:normalize=false"


def test_buildspec_round_trips_and_is_the_builders_spec(tmp_path):
    assert IndexSpec is BuildSpec
    spec = BuildSpec(reducer="pca:8", store="hnsw", encoder=None, keep_full="float16",
                     text_column=None, source="x.npy", recipe="pca:8|hnsw|rescore=4,keep_full=float16",
                     metric="l2", id_rule=2)
    data = json.loads(json.dumps(spec.to_dict()))
    assert BuildSpec.from_dict(data) == spec
    assert set(data) == {f.name for f in dataclasses.fields(BuildSpec)}
    assert recipe_rescore(spec.recipe) == 4
    assert recipe_rescore(BuildSpec(recipe="pca:8|hnsw|rescore=auto").recipe) == "auto"
    with pytest.raises(ConfigError, match="unknown key.*metrik"):
        BuildSpec.from_dict({"metrik": "l2"})
    with pytest.raises(ConfigError, match="metric"):
        BuildSpec(metric="dot")
    with pytest.raises(ConfigError, match="'reducer'.*int"):
        BuildSpec.from_dict({"reducer": 96})
    assert BuildSpec(encoder=tmp_path / "model").encoder == str(tmp_path / "model")  # paths
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.metric = "ip"  # type: ignore[misc]


def test_buildspec_from_the_manifest_of_a_built_index_rebuilds_the_same_spec(tmp_path):
    X = np.random.default_rng(0).normal(size=(60, 12)).astype(np.float32)
    asked = BuildSpec(reducer="pca:4,normalize=false", store="faiss:Flat", encoder=None,
                      text_column=None, source="v.npy", metric="l2", keep_full="float32",
                      recipe="pca:4,normalize=false|faiss:Flat|rescore=2")
    with IndexBuilder(tmp_path / "idx") as b:
        b.open(asked, 12, fit=lambda: X)
        b.run([])
    built = BuildSpec.from_manifest(Manifest.read(tmp_path / "idx"))
    assert dataclasses.replace(built, id_rule=None) == asked
    with IndexBuilder(tmp_path / "idx") as b:  # the manifest's spec matches the existing index
        assert b.resolve(built) == built


def test_auto_rescore_is_parsed_not_a_substring():
    """``"rescore=auto" in recipe`` missed a recipe spelled with spaces or capitals."""
    m = Manifest(dim_in=4, dim_out=2, reducer="pca:2", store="hnsw", recipe="pca:2|hnsw|rescore = AUTO")
    assert m.auto_rescore
    assert recipe_rescore("pca:2|hnsw|rescore=8") == 8 and recipe_rescore(None) is None
    assert not Manifest(dim_in=4, dim_out=2, reducer="pca:2", store="hnsw",
                        recipe="pca:2|hnsw|rescore=8").auto_rescore


def test_default_recipe_only_when_nothing_is_named():
    assert recipe_or_default(None, None, None, None, "D") == "D"
    assert recipe_or_default("R", None, None, None, "D") == "R"
    assert recipe_or_default(None, "pca:8", None, None, "D") is None
    assert recipe_or_default(None, None, None, "float16", "D") is None


def test_migrate_and_the_service_take_the_dimension_by_one_rule():
    """issue 24 item 3: the service's first vectors and a Parquet source both use
    ``ranked_lengths`` (most common length; a tie: the shorter), not two copies."""
    from slimvec.sources.checks import most_common_length, ranked_lengths

    assert most_common_length([7, 384, 384, 5]) == 384
    assert most_common_length([8, 8, 4, 4]) == 4  # a tie: the shorter, in both places
    assert most_common_length([]) is None
    assert ranked_lengths({3: [0], 9: [1, 2]}) == [(9, [1, 2]), (3, [0])]
