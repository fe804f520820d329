"""Issue 13's layering rules, checked on the source: the ingest side never imports the harness, and
no module imports another module's private (``_name``) names."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "slimvec"


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []


def test_the_indexer_does_not_import_the_harness():
    bad = [f"{p.relative_to(ROOT)}: {mod}" for p in (ROOT / "indexer").rglob("*.py")
           for mod, _ in _imports(p) if mod.startswith("slimvec.benchmarks")]
    assert not bad, bad


def test_no_module_imports_another_modules_private_names():
    bad = []
    for path in ROOT.rglob("*.py"):
        for mod, names in _imports(path):
            if mod.startswith("slimvec"):
                bad += [f"{path.relative_to(ROOT)}: from {mod} import {n}" for n in names
                        if n.startswith("_") and not n.startswith("__")]
    assert not bad, bad
