"""Issue 23 item 11: a hand-edited manifest value is refused on read, naming the key, not shown.

Types were checked already; values were not: ``slimvec info`` printed a negative count, a
reducer the saved artifact is not, an unknown metric or id rule, negative calibration sizes
("-9 corpus vectors") and terminal escape sequences in an encoder name.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import slimvec
from slimvec.errors import PersistenceError
from slimvec.migrate import MigrateOptions, migrate


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("manifest")
    np.save(tmp / "v.npy", np.random.default_rng(0).standard_normal((60, 16)).astype(np.float32))
    migrate(str(tmp / "v.npy"), tmp / "idx", MigrateOptions(reducer="pca:4", store="hnsw",
                                                            progress=False))
    return tmp / "idx"


def _edited(built, tmp_path, edit) -> os.PathLike:
    import shutil

    folder = tmp_path / "idx"
    shutil.copytree(built, folder)
    m = json.loads((folder / "manifest.json").read_text())
    edit(m)
    (folder / "manifest.json").write_text(json.dumps(m))
    return folder


EDITS = {
    "count": (lambda m: m.update(count=-5), "'count' should be >= 0"),
    "dim_out": (lambda m: m.update(dim_out=0), "'dim_out' should be >= 1"),
    "metric": (lambda m: m.update(metric="bogus"), "'metric' should be one of"),
    "id_rule": (lambda m: m.update(id_rule=7), "'id_rule' should be one of"),
    "encoder": (lambda m: m.update(encoder="\x1b[31mred"), "'encoder' holds control characters"),
    "next_row": (lambda m: m["progress"].update(next_row=-3), "'progress.next_row' should be >= 0"),
    "rescore": (lambda m: m.update(rescore={"depth": 4, "calibrated": True, "recall": 0.9,
                                            "k": 10, "n_queries": -9, "n_corpus": 60}),
                "'rescore.n_queries' should be >= 0"),
    "full": (lambda m: m.update(full={"dtype": "int8", "dir": "full"}), "'full.dtype' should be"),
    "reducer": (lambda m: m.update(reducer="pca:99"), "the saved reducer is 'pca:4'"),
}


@pytest.mark.parametrize("key", sorted(EDITS))
def test_a_hand_edited_value_is_refused_naming_the_key(built, tmp_path, key):
    edit, message = EDITS[key]
    folder = _edited(built, tmp_path, edit)
    with pytest.raises(PersistenceError, match="(?s)" + message.replace("[", r"\[")):
        slimvec.open(folder)


def test_info_refuses_a_negative_count_with_one_line(built, tmp_path):
    folder = _edited(built, tmp_path, lambda m: m.update(count=-5))
    proc = subprocess.run([sys.executable, "-m", "slimvec", "info", "--index", str(folder)],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert proc.returncode != 0
    assert "'count' should be >= 0, got -5" in proc.stderr and "Traceback" not in proc.stderr
    assert "-5" not in proc.stdout


def test_an_unedited_manifest_still_opens(built):
    with slimvec.open(built) as idx:
        assert idx.info()["count"] == 60
