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


def test_the_package_never_imports_the_checkouts_benchmarks_tree():
    """Issue 35 item 4: measurements, page writers and corpus builders live in the repository's
    benchmarks/ (not installed); the wheel must work without it."""
    bad = [f"{p.relative_to(ROOT)}: {mod}" for p in ROOT.rglob("*.py")
           for mod, _ in _imports(p) if mod == "benchmarks" or mod.startswith("benchmarks.")]
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


def _imported_names(tree: ast.AST):
    """(module, name or None) for every import statement anywhere in ``tree``: module level,
    inside functions and methods, and under ``if TYPE_CHECKING:`` (a type-only import is still a
    dependency: the two modules cannot be understood or changed apart)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                yield node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None


def _import_graph() -> dict[str, set[str]]:
    """slimvec module -> the slimvec modules it imports (issue 24 item 7: every import counts,
    not only module-level ones, which hid two cycles). ``from slimvec.pkg import name`` is an
    edge to the submodule the package's ``__init__`` re-exports ``name`` from, so a cycle cannot
    hide behind a package either; ``__init__`` files themselves are not nodes (they re-export)."""
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    packages = {m for m, p in paths.items() if p.name == "__init__.py"}
    trees = {m: ast.parse(p.read_text(encoding="utf-8")) for m, p in paths.items()}
    reexports = {pkg: {name: mod for mod, name in _imported_names(trees[pkg])
                       if name and mod in paths and mod.startswith(pkg + ".")} for pkg in packages}

    def resolve(module: str, name: str | None, seen: int = 0) -> str | None:
        if name and f"{module}.{name}" in paths:
            module = f"{module}.{name}"
        elif name and module in packages and name in reexports[module] and seen < 5:
            return resolve(reexports[module][name], name, seen + 1)
        return module if module in paths and module not in packages else None

    return {m: {t for mod, name in _imported_names(trees[m])
                if mod.startswith("slimvec") and (t := resolve(mod, name)) and t != m}
            for m in paths if m not in packages}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (each holds a cycle)."""
    reach: dict[str, set[str]] = {}
    for start in graph:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        reach[start] = seen
    comps = {frozenset(m for m in graph if m in reach[a] and a in reach[m]) for a in graph}
    return sorted(sorted(c) for c in comps if len(c) > 1)


def test_the_import_graph_sees_function_level_and_package_imports():
    """The cycle check below is only as good as its graph: an import inside a function and a name
    imported through a package ``__init__`` are both edges."""
    graph = _import_graph()
    # cli/bench.py imports the harness inside its command function
    assert "slimvec.benchmarks.inputs" in graph["slimvec.cli.bench"]
    # `from slimvec.reducers import make_reducer` is an edge to the registry that defines it
    assert "slimvec.reducers.registry" in graph["slimvec.indexer.builder"]


def test_no_import_cycle_between_modules():
    """Issue 13: module A importing B while B imports A is a cycle: at import time it works only
    in one import order, and wherever the import sits the two modules are one unit that cannot be
    changed or tested apart. Every import counts (issue 24 item 7); nothing is allowed."""
    cycles = _cycles(_import_graph())
    assert not cycles, "import cycles (strongly connected modules): " + "; ".join(
        " <-> ".join(c) for c in cycles)


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


#: what the connectors sit under (issue 35): a store never knows the pipeline that feeds it
PIPELINE = ("slimvec.sources", "slimvec.index", "slimvec.indexer", "slimvec.ops", "slimvec.engines", "slimvec.service",
            "slimvec.cli", "slimvec.benchmarks", "slimvec.migrate", "slimvec.pruning")


#: the router modules: every module of service/routes/ but the one they share, and the Qdrant API's
ROUTERS = ("slimvec.service.routes.", "slimvec.service.qdrant_api.routes")
SHARED_BY_ROUTERS = "slimvec.service.routes.request_args"


def _router(module: str) -> bool:
    return module.startswith(ROUTERS) and module != SHARED_BY_ROUTERS


def test_routers_never_import_routers():
    """Issue 35: routes_write imported routes_search, which imported routes_indexes (15 floors);
    what two routers share lives in ``service/routes/request_args.py`` below them. The rule
    covers every router module where it lives (``service/routes/*``, the Qdrant API's)."""
    graph = _import_graph()
    routers = [m for m in graph if _router(m)]
    assert len(routers) >= 10 and "slimvec.service.routes.search" in routers  # the rule sees them
    bad = [f"{m} -> {t}" for m in routers for t in graph[m] if _router(t)]
    assert not bad, bad


def test_no_module_imports_the_package_root():
    """Issue 35: no upward import. A module inside the package reads the version from
    ``slimvec._version`` and opens indexes with ``indexer.index.open_index``, never through
    ``import slimvec`` / ``from slimvec import ...`` (only ``slimvec/__init__.py`` is the root)."""
    bad = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py") if p.name != "__init__.py" or p.parent != ROOT
           if any(mod == "slimvec" for mod, _ in _imported_names(ast.parse(p.read_text(encoding="utf-8"))))]
    assert not bad, bad


def _edges(src: tuple[str, ...], dst: tuple[str, ...]) -> list[str]:
    return [f"{m} -> {t}" for m, targets in _import_graph().items() if m.startswith(src)
            for t in targets if t.startswith(dst)]


#: (lower, upper): no module under ``lower`` imports one under ``upper`` (the other way is allowed)
NEVER = [(("slimvec.connectors.",), PIPELINE),  # Document, Reject, fingerprint: slimvec/documents.py
         (("slimvec.sources.", "slimvec.index.", "slimvec.indexer.", "slimvec.ops."), ("slimvec.benchmarks",)),
         (("slimvec.buildspec",), ("slimvec.indexer.",)),  # the encoder is slimvec/encoder.py
         (("slimvec.indexer.",), ("slimvec.ops.",)),  # a sync is slimvec.ops.sync.sync, not an ingest option
         (("slimvec.planner.",), ("slimvec.benchmarks.",)),  # the row type the harness writes: planner/rows.py
         (("slimvec.index.",), ("slimvec.planner.",))]  # the payload indexes' RAM model: index/filter_info.py


def test_no_module_imports_a_floor_above_it():
    """A store never knows the pipeline that feeds it, the ingest side the harness, the spec the
    writer, the writer an operation, the planner the harness (which ranks and sizes with it), nor
    index/ the planner (which sizes payload indexes with index/'s model)."""
    assert [e for lower, upper in NEVER for e in _edges(lower, upper)] == []
    assert all(_edges(upper, lower) for lower, upper in NEVER)  # the rules see the edges


def test_http_never_imports_index_or_indexer_internals():
    """Routes, the Qdrant API and the app reach an index through ``service/indexes/`` (served
    indexes, registry, jobs) and ``slimvec.ops``, and see only ``index/base.py`` (IndexBase) of
    index/ and indexer/: the folder's layout, locks and the writer's options change apart from HTTP."""
    edges = _edges(("slimvec.service.",), ("slimvec.index.", "slimvec.indexer."))
    bad = [e for e in edges if not e.startswith("slimvec.service.indexes.") and not e.endswith(" slimvec.index.base")]
    assert not bad and edges, bad  # edges: the rule sees what service/indexes/ imports
