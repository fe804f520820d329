"""Declared benchmark suites: a small TOML file naming the data, reducers, stores and options.

A suite is the reproducible form of a ``slimvec bench`` command line; the figures in
BENCHMARKS.md name the suite that produced them (``benchmarks/suites/*.toml``)::

    # benchmarks/suites/tiny.toml
    out = "bench-results/tiny"            # relative paths: relative to the repository root,
                                          # i.e. the folder holding pyproject.toml above the suite
    [data]
    vectors = "tests/data/vecs.npy"       # or pairs = [...], train_pairs = [...], datasets = [...],
                                          # encoders = ["minilm", "~/models/pruned"]
    max_queries = 200
    [run]
    reducers = ["pca:32"]
    stores = ["faiss:Flat"]
    baselines = false
    rescore = [4]

Run it with ``slimvec bench --suite benchmarks/suites/tiny.toml`` (``--out`` overrides ``out``).
Unknown keys are refused with the list of known ones, so a typo never silently drops an option.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slimvec.benchmarks.inputs import BenchInputs
from slimvec.benchmarks.runner import BenchConfig
from slimvec.errors import ConfigError

__all__ = ["Suite", "load_suite"]

#: [data] key -> (BenchInputs field, kind); kind "paths", "path" or a Python type
_DATA_KEYS: dict[str, tuple[str, Any]] = {
    "pairs": ("pairs", "paths"), "train_pairs": ("train_pairs", "paths"), "vectors": ("vectors", "path"),
    "queries": ("queries", "path"), "datasets": ("datasets", "paths"), "encoders": ("encoders", "encoders"),
    "dup_threshold": ("dup_threshold", float), "skip_bad_rows": ("skip_bad_rows", bool),
    "sts_file": ("sts_file", str), "metric": ("metric", str), "max_queries": ("max_queries", int),
    "cache": ("cache", "path"), "seed": ("seed", int),
}
#: [run] key -> (BenchConfig field, type)
_RUN_KEYS: dict[str, tuple[str, Any]] = {
    "reducers": ("reducers", list), "stores": ("stores", list), "baselines": ("baselines", bool),
    "rescore": ("rescore", list), "kmeans": ("kmeans", int), "route_probes": ("route_probes", list),
    "k": ("k", int), "latency_queries": ("latency_queries", int), "latency_repeats": ("latency_repeats", int),
    "fit_max": ("fit_max", int), "fit_on": ("fit_on", str), "threads": ("threads", int), "seed": ("seed", int),
    "build_threads": ("build_threads", int), "peers": ("peers", list), "measure_rss": ("measure_rss", bool),
    "rescore_peers": ("rescore_peers", bool), "filtered": ("filtered", list),
    "filter_recipes": ("filter_recipes", list), "index_recipes": ("index_recipes", list),
}
_TOP_KEYS = {"out", "description", "data", "run"}


@dataclass
class Suite:
    """A loaded suite: where it came from, its output folder, its data and its run options."""

    path: Path
    description: str
    out: Path | None
    inputs: BenchInputs
    run: dict[str, Any]

    def config(self, work_dir: Path, keep_indexes: bool = False) -> BenchConfig:
        """The :class:`BenchConfig` of the suite, building in ``work_dir``."""
        run = dict(self.run)
        return BenchConfig(reducers=list(run.pop("reducers", [])), stores=list(run.pop("stores", [])),
                           work_dir=work_dir, keep_indexes=keep_indexes, **run)


def _root_of(path: Path) -> Path:
    """The folder relative paths in a suite are resolved against: the nearest ancestor holding
    ``pyproject.toml`` (the repository), else the suite's own folder."""
    for parent in path.resolve().parents:
        if (parent / "pyproject.toml").is_file():
            return parent
    return path.resolve().parent


def _typed(where: str, key: str, value: Any, kind: Any, root: Path) -> Any:
    def bad(expected: str) -> ConfigError:
        return ConfigError(f"Suite {where}: key '{key}' expects {expected}, got {value!r}. Fix the "
                           "suite file and run again.")
    if kind == "encoders":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad("a list of encoder names or model folders")
        return [os.path.expanduser(v) if v.startswith("~") else v for v in value]
    if kind == "path":
        if not isinstance(value, str):
            raise bad("a path string")
        return (root / value) if not Path(value).is_absolute() else Path(value)
    if kind == "paths":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad("a list of path strings")
        return [(root / v) if not Path(v).is_absolute() else Path(v) for v in value]
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("a number")
        return float(value)
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer")
        return value
    if not isinstance(value, kind):
        raise bad(f"a {kind.__name__}")
    return value


def _section(path: Path, table: Any, name: str, keys: dict[str, tuple[str, Any]], root: Path) -> dict[str, Any]:
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise ConfigError(f"Suite {path}: [{name}] must be a table, got {type(table).__name__}.")
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise ConfigError(f"Suite {path}: unknown key(s) {', '.join(unknown)} in [{name}]; known: "
                          f"{', '.join(sorted(keys))}.")
    return {keys[k][0]: _typed(f"{path} [{name}]", k, v, keys[k][1], root) for k, v in table.items()}


def load_suite(path: str | Path) -> Suite:
    """Read and check a suite file (every spec is parsed, no data is read yet).

    Raises
    ------
    ConfigError
        Not TOML, unknown keys, wrong types, nothing to bench, an unknown reducer or store spec.
    PersistenceError
        The file cannot be read.
    """
    from slimvec.errors import PersistenceError

    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise PersistenceError(f"No suite file at {p}: see benchmarks/suites/ for examples.") from exc
    except OSError as exc:
        raise PersistenceError(f"Cannot read suite file {p}: {exc}.") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"Suite {p} is not valid TOML: {exc}.") from exc
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise ConfigError(f"Suite {p}: unknown top-level key(s) {', '.join(unknown)}; known: "
                          f"{', '.join(sorted(_TOP_KEYS))} ([data] and [run] are tables).")
    root = _root_of(p)
    inputs = BenchInputs(**_section(p, data.get("data"), "data", _DATA_KEYS, root))
    run = _section(p, data.get("run"), "run", _RUN_KEYS, root)
    out = data.get("out")
    if out is not None and not isinstance(out, str):
        raise ConfigError(f"Suite {p}: 'out' expects a folder path string, got {out!r}.")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(f"Suite {p}: 'description' expects a string, got {description!r}.")
    suite = Suite(p, description, (root / out) if out else None, inputs, run)
    inputs.validate()
    suite.config(root / ".slimvec-bench-work").validate()  # specs parsed now; nothing is created
    return suite

