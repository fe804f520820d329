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


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(path: Path, modules: set[str]):
    """Modules of slimvec a module imports when it is imported: module-level statements only
    (imports inside functions and under ``if TYPE_CHECKING:`` run later or never)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body = list(tree.body)
    while body:
        node = body.pop(0)
        if isinstance(node, ast.If):
            test = node.test
            if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
                    (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
                body.extend(node.orelse)
                continue
            body.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            body.extend(node.body + [s for h in node.handlers for s in h.body] + node.orelse + node.finalbody)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module in modules:
                yield node.module
            for alias in node.names:  # `from slimvec.x import submodule`
                if f"{node.module}.{alias.name}" in modules:
                    yield f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    yield alias.name


def test_no_import_cycle_between_modules():
    """Issue 13: module A importing B at import time while B imports A is a cycle (it works only
    in one import order). Package ``__init__`` files re-exporting their submodules are left out."""
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    modules = set(paths)
    graph = {m: {t for t in _top_level_imports(p, modules) if t != m and paths[t].name != "__init__.py"}
             for m, p in paths.items() if p.name != "__init__.py"}
    cycles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    assert not cycles, cycles


#: string comparisons with a store's name outside slimvec/connectors that are not about stores
_NOT_STORES = {
    "migrate/sources.py": "migrate source kinds (--from faiss:PATH) are parsed there: spec parsing",
    "migrate/export.py": "export formats (--format faiss) share a word with a store",
}


def test_no_store_name_compared_as_a_string_outside_the_connectors():
    """Issue 13: what differs between stores is declared on the store classes (capabilities);
    code outside slimvec/connectors asks the class instead of comparing names."""
    from slimvec.connectors import store_names

    names = set(store_names())

    def mentions(node: ast.AST) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value} & names
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return set().union(*(mentions(e) for e in node.elts)) if node.elts else set()
        return set()

    bad = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("connectors/") or rel in _NOT_STORES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                found = set().union(*(mentions(n) for n in [node.left, *node.comparators]))
                if found:
                    bad.append(f"{rel}:{node.lineno} compares with {sorted(found)}")
    assert not bad, bad
