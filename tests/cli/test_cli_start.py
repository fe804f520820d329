"""The CLI's start (issue 40 items 2 and 9): verbs that encode nothing import neither the model
(torch, sentence-transformers) nor scikit-learn, a wrong column is reported before any of them is
imported, and no ``--help`` prints an un-rendered ``{...}`` placeholder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import typer
from typer.testing import CliRunner

from slimvec.buildspec import default_recipe
from slimvec.cli import app

ROOT = Path(__file__).resolve().parents[2]

#: an f-string that lost its ``f``: ``{DEFAULTS['reducer']}``, ``{name}``; JSON examples such as
#: ``{"lang": "en"}`` start with a quote and are not placeholders
PLACEHOLDER = re.compile(r"\{[A-Za-z_][^{}\s:\"]*\}")


def _help_paths(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [path]
    if getattr(command, "commands", None):  # a group (typer vendors click: no isinstance)
        for name, sub in command.commands.items():
            out += _help_paths(sub, path + (name,))
    return out


def test_no_help_prints_a_placeholder():
    from benchmarks.cli import app as bench_app  # the checkout's measurements (issue 35 item 4)

    paths = _help_paths(typer.main.get_command(app))
    kinds = _help_paths(typer.main.get_command(bench_app))
    assert ("ingest",) in paths and ("bench",) in paths and ("sync",) in kinds
    bad = {}
    for program, path in [(app, p) for p in paths] + [(bench_app, p) for p in kinds]:
        res = CliRunner().invoke(program, [*path, "--help"], terminal_width=200)
        assert res.exit_code == 0, (path, res.output)
        found = PLACEHOLDER.findall(res.output)  # the usage line too: typer's {input} (issue 52)
        if found:
            bad[" ".join(path)] = found
    assert not bad, f"--help texts with un-rendered placeholders: {bad}"
    usage = {cmd: CliRunner().invoke(app, [cmd, "--help"], terminal_width=200).output.splitlines()[0]
             for cmd in ("ingest", "search", "restore")}
    assert usage["ingest"].endswith("ingest [OPTIONS] INPUT"), usage
    assert usage["search"].endswith("search [OPTIONS] [QUERY]..."), usage
    assert usage["restore"].endswith("restore [OPTIONS] ARCHIVE"), usage
    # issue 40 item 2: search says how to keep the model warm between searches
    text = " ".join(CliRunner().invoke(app, ["search", "--help"], terminal_width=200).output.split())
    assert "--queries" in text and "slimvec serve" in text and "model stays loaded" in text


#: runs the non-encoding verbs in one interpreter and prints which heavy modules they imported
_PROBE = """
import json, sys
from typer.testing import CliRunner
from slimvec.cli import app
idx, ids, corpus = sys.argv[1:4]
codes = {}
for args in (["info", "--index", idx], ["get", "--index", idx, "--ids", ids],
             ["scroll", "--index", idx, "--limit", "3"],
             ["update", "--index", idx, "--ids", ids, "--set", '{"seen": true}'],
             ["delete", "--index", idx, "--ids", ids],
             ["search", "--index", idx],  # an argument error: no query given
             ["ingest", corpus, "--index", idx + "-new", "--text-column", "body"]):
    res = CliRunner().invoke(app, args)
    codes[args[0]] = [res.exit_code, str(res.exception or "")[:300]]
heavy = ("torch", "sentence_transformers", "transformers", "sklearn")
print(json.dumps({"codes": codes, "imported": [m for m in heavy if m in sys.modules]}))
"""


def test_verbs_that_encode_nothing_import_no_model_nor_sklearn(tmp_path):
    from slimvec.migrate import MigrateOptions, migrate

    vecs = np.random.default_rng(0).standard_normal((200, 384)).astype(np.float32)
    np.save(tmp_path / "v.npy", vecs / np.linalg.norm(vecs, axis=1, keepdims=True))
    migrate(str(tmp_path / "v.npy"), tmp_path / "idx", MigrateOptions(progress=False))
    (tmp_path / "ids.json").write_text("[0, 1]")
    (tmp_path / "docs.jsonl").write_text('{"id": 1, "text": "a guitar"}\n')
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path / "idx"),
                          str(tmp_path / "ids.json"), str(tmp_path / "docs.jsonl")],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    codes = out["codes"]
    assert all(codes[verb][0] == 0 for verb in ("info", "get", "scroll", "update", "delete")), codes
    assert codes["search"][0] != 0 and "query texts" in codes["search"][1]
    assert codes["ingest"][0] != 0 and "'body' not found" in codes["ingest"][1], codes
    assert out["imported"] == [], (f"verbs that encode nothing imported {out['imported']}; the "
                                   f"index's recipe is {default_recipe()}")


def test_pyproject_gives_setuptools_nothing_to_warn_about(monkeypatch):
    """scripts/setup.sh and scripts/test.sh opened with setuptools' deprecation banners (a
    ``project.license`` table), printed at every editable build (issue 40 item 9)."""
    import warnings

    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    monkeypatch.chdir(ROOT)  # the configuration names files (README.md) relative to the project
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        apply_configuration(Distribution(), ROOT / "pyproject.toml")
    assert not [str(w.message)[:200] for w in caught]
