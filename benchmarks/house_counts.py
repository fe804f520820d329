"""The house's counts (issue 35), reproducible: lines of the package, modules per package folder
(the goal: none over 20), upward imports (a module inside the package importing the package root:
the goal is 0) and function-level imports.

Usage: python benchmarks/house_counts.py [--json]   (from the repository root)
"""

from __future__ import annotations

import ast
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "slimvec"


def counts() -> dict[str, object]:
    """Lines, modules per folder, upward and function-level imports of ``slimvec/``."""
    lines, modules, upward, local = 0, Counter[str](), [], 0
    for path in sorted(ROOT.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines += len(text.splitlines())
        modules[path.parent.relative_to(ROOT.parent).as_posix()] += 1
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                local += sum(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(node))
            root = (isinstance(node, ast.ImportFrom) and node.module == "slimvec" and node.level == 0) or (
                isinstance(node, ast.Import) and any(a.name == "slimvec" for a in node.names))
            if root and path != ROOT / "__init__.py" and isinstance(node, (ast.Import, ast.ImportFrom)):
                upward.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    return {"lines": lines, "modules": sum(modules.values()), "folders_over_20": {
        k: v for k, v in sorted(modules.items()) if v > 20}, "modules_per_folder": dict(sorted(modules.items())),
        "upward_imports": upward, "function_level_imports": local}


if __name__ == "__main__":
    c = counts()
    if "--json" in sys.argv:
        print(json.dumps(c, indent=1))
    else:
        for key in ("lines", "modules", "folders_over_20", "upward_imports", "function_level_imports"):
            print(f"{key}: {c[key]}")
