"""Which recipe should be the default, by corpus size (``python -m benchmarks default-recipe``, issue 28
item 4): candidate recipes against full-precision HNSW, through the product, in one run.

For each size ``N`` (a prefix of a ``.npy`` of sentence vectors, so a smaller size is a uniform
sample when the file is one seeded permutation, as ``scripts/make_real_corpus.py --encode``
writes it):

- every candidate recipe and the reference ``none|hnsw`` (hnswlib M=16, ef_construction=200 on
  the full vectors) are built by :func:`slimvec.migrate.migrate`, the path users take; a
  ``rescore=auto`` recipe calibrates its depth in that build, as ``slimvec ingest`` does;
- the reference's search beam ``ef`` is raised along :data:`EF_LADDER` until its neighbour
  recall@10 on the held-out queries reaches the target (the issue's "raise the HNSW's ef until it
  gets there");
- quality: neighbour recall@10 of ``Index.search`` (at each index's own depth) against exact
  search over the full vectors, on every held-out query. A ``rescore=auto`` index calibrates its
  depth blind, on corpus vectors; the held-out queries may need more. So each such candidate is
  also measured at the smallest depth of the calibration ladder whose held-out recall reaches the
  target, a row of its own: equal footing with the reference, whose ``ef`` is chosen the same way;
- latency: ``Index.search`` of one query at a time on one thread (FAISS's OpenMP and the BLAS
  pools are limited to one while timing; builds use every core), each index in a block of every query after a warm-up, the blocks in one order and then the
  reverse (``--rounds``); p50 per round, and the ratio to the reference's p50 *of the same round*;
- serving memory: a fresh process imports the libraries, reads ``VmRSS``, opens the index with
  ``slimvec.open`` and answers 200 queries one at a time, and reads ``VmRSS`` again. The resident
  pages of the kept full vectors (``full/``: memory-mapped, clean, reclaimable page cache that
  re-ranking reads) are reported apart from the rest, which is what the index holds in memory
  to search;
- disk: allocated blocks of the index folder, and of its full vectors.

A candidate *meets the goal* when its recall reaches the target, its p50 is at most
``--latency-ratio`` (1.5) times the reference's in every round, and its serving memory (full
vectors' page cache apart) is at most ``--ram-ratio`` (0.25) of the reference's.

Usage::

    python -m benchmarks default-recipe --n 20000 --n 100000 --n 300000 \\
        --out docs/benchmarks/default-recipe.json
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.benchmarks.recipes import serving_memory

__all__ = ["CANDIDATES", "REFERENCE", "EF_LADDER", "ChoiceConfig", "measure_choice", "serving_memory",
           "reference_ef", "choice_markdown", "render_choice_runs"]

log = logging.getLogger(__name__)

#: the recipes compared by default: the default before issue 28 and Qdrant Edge with a wider
#: reduction; reduce -> quantize -> rescore in FAISS HNSW graphs (built with hnswlib's beam,
#: efc=200); the same graphs over quantized full-dimension vectors (SQ4: the bytes of pca:192 ->
#: SQ8; RaBitQ); Qdrant Edge's own SQ8 with its own rescoring from originals on disk
CANDIDATES: tuple[str, ...] = (
    "pca:96|qdrant-edge|rescore=auto,keep_full=float16",
    "pca:192|qdrant-edge|rescore=auto,keep_full=float16",
    "pca:192|faiss:HNSW16,SQ8,efc=200|rescore=auto,keep_full=float16",
    "pca:192|faiss:HNSW16,SQ4,efc=200|rescore=auto,keep_full=float16",
    "none|faiss:HNSW16,SQ4,efc=200|rescore=auto,keep_full=float16",
    "none|faiss:HNSW16,RaBitQ,efc=200|rescore=auto,keep_full=float16",
    "none|qdrant-edge:quant=sq8,memory=cold",
)
#: full-precision HNSW, the reference every candidate is compared with
REFERENCE = "none|hnsw:M=16,ef_construction=200"
#: the reference's search beams, tried in order until recall reaches the target
EF_LADDER: tuple[int, ...] = (32, 48, 64, 96, 128, 192, 256, 384, 512)
K = 10


@dataclass
class ChoiceConfig:
    """What :func:`measure_choice` measures.

    Attributes
    ----------
    data, queries : Path
        Corpus vectors (``.npy``, rows in a seeded random order) and held-out query vectors.
    sizes : list of int
        Corpus prefixes measured.
    candidates : list of str
        Recipes compared with the reference.
    work : Path
        Where the prefixes, truths and indexes are kept (reused when already built).
    n_queries : int
        Held-out queries for recall and latency.
    target : float
        Neighbour recall@10 every configuration must reach.
    rounds : int
        Latency rounds (block order alternates).
    latency_ratio, ram_ratio : float
        The goal: p50 at most ``latency_ratio`` x the reference's, serving memory at most
        ``ram_ratio`` x.
    """

    data: Path
    queries: Path
    sizes: list[int]
    candidates: list[str] = field(default_factory=lambda: list(CANDIDATES))
    work: Path = Path("bench-out/default-recipe")
    n_queries: int = 1000
    target: float = 0.99
    rounds: int = 2
    latency_ratio: float = 1.5
    ram_ratio: float = 0.25


def _allocated(path: Path) -> int:
    from slimvec.persistence import allocated_bytes

    return int(allocated_bytes(path)) if path.exists() else 0


def _folder_name(recipe: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in recipe).strip("_")


def _prefix(data: Path, n: int, work: Path) -> Path:
    """``work/corpus-N.npy``: the first ``n`` rows of ``data`` (written once)."""
    path = work / f"corpus-{n}.npy"
    if not path.exists():
        rows = np.load(data, mmap_mode="r")
        if len(rows) < n:
            from slimvec.errors import ConfigError

            raise ConfigError(f"{data} holds {len(rows):,} vectors, fewer than --n {n:,}: encode "
                              "more (python scripts/make_real_corpus.py --encode) or pass a smaller --n.")
        tmp = path.with_name(path.name + ".tmp.npy")
        np.save(tmp, np.ascontiguousarray(rows[:n], dtype=np.float32), allow_pickle=False)
        os.replace(tmp, path)
    return path


def _truth(source: Path, queries: np.ndarray) -> np.ndarray:
    """Exact cosine top-10 row numbers (a ``.npy`` source's ids are its row numbers), cached."""
    from slimvec.measure import exact_knn

    path = source.with_name(source.stem + f"-truth{len(queries)}.npy")
    if path.exists():
        return np.load(path)
    truth = exact_knn(np.load(source, mmap_mode="r"), queries, K, metric="cosine")[0]
    np.save(path, truth, allow_pickle=False)
    return truth


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _build(recipe: str, source: Path, folder: Path) -> tuple[float, float] | None:
    """Build ``recipe`` from ``source`` into ``folder``: wall and CPU seconds (every thread, and
    child processes waited for); None when already built."""
    from slimvec.migrate import MigrateOptions, migrate

    if (folder / "manifest.json").exists():
        return None
    shutil.rmtree(folder, ignore_errors=True)
    t0, c0 = time.perf_counter(), _cpu_s()
    migrate(str(source), folder, MigrateOptions(recipe=recipe, metric="cosine", progress=False))
    seconds, cpu = time.perf_counter() - t0, _cpu_s() - c0
    log.info("built %s in %.0f s (%.0f CPU s)", recipe, seconds, cpu)
    return seconds, cpu


def _recall(found: np.ndarray, truth: np.ndarray) -> float:
    from slimvec.measure import recall_at_k

    return round(float(recall_at_k(found, truth, K)), 4)


def reference_ef(index: Any, queries: np.ndarray, truth: np.ndarray, target: float,
                 ladder: Sequence[int] = EF_LADDER) -> tuple[int, dict[int, float]]:
    """The smallest ``ef`` of ``ladder`` whose recall@10 reaches ``target`` (the largest when none
    does) and the recall of every ``ef`` tried."""
    tried: dict[int, float] = {}
    for ef in ladder:
        tried[ef] = _recall(np.asarray(index.search(queries, K, ef=ef).ids), truth)
        if tried[ef] >= target:
            return ef, tried
    return ladder[-1], tried


def _held_out_depth(idx: Any, queries: np.ndarray, truth: np.ndarray, target: float,
                    row: dict[str, Any]) -> dict[str, Any] | None:
    """The smallest depth of the calibration ladder whose recall on the held-out queries reaches
    ``target`` (what the reference's ``ef`` is raised to: equal footing), as a row of its own;
    the recall of every depth tried is added to ``row``. None when no depth up to 64 reaches it."""
    from slimvec.indexer.calibrate import depth_ladder

    tried: dict[int, float] = {}
    for depth in depth_ladder(64):
        tried[depth] = _recall(np.asarray(idx.search(queries, K, rescore=depth).ids), truth)
        if tried[depth] >= target:
            break
    row["depth_recalls"] = {str(d): r for d, r in tried.items()}
    reached = [d for d, r in tried.items() if r >= target]
    if not reached:
        return None
    depth = reached[0]
    return {**row, "name": f"{row['recipe']} at depth {depth} (held-out queries)", "depth": depth,
            "recall_at_10": tried[depth], "params": {"rescore": depth}}


def _p50_block(search: Callable[[np.ndarray], Any], queries: np.ndarray) -> dict[str, float]:
    from slimvec.measure import latency_summary

    for q in queries[:50]:  # warm-up
        search(q[None, :])
    times = np.empty(len(queries))
    for i, q in enumerate(queries):
        t0 = time.perf_counter()
        search(q[None, :])
        times[i] = (time.perf_counter() - t0) * 1000.0
    return latency_summary(times)


def _size_row(name: str, recipe: str, folder: Path, idx: Any, build: tuple[float, float] | None,
              recall: float, params: dict[str, Any]) -> dict[str, Any]:
    m = idx.manifest
    full = _allocated(folder / "full")
    return {"name": name, "recipe": recipe, "store": m.store, "reducer": m.reducer or "none",
            "depth": int(m.rescore.depth) if m.rescore is not None else None,
            "calibrated_recall": m.rescore.recall if m.rescore is not None else None,
            "params": params, "build_s": None if build is None else round(build[0], 1),
            "build_cpu_s": None if build is None else round(build[1], 1),
            "recall_at_10": recall, "disk_bytes": _allocated(folder),
            "disk_bytes_full_vectors": full}


def measure_size(cfg: ChoiceConfig, n: int, queries: np.ndarray,
                 progress: Callable[[str], None] = log.info) -> dict[str, Any]:
    """Every candidate and the reference at corpus size ``n`` (see the module docstring)."""
    from slimvec.index.folder import open_index

    work = cfg.work / f"n{n}"
    work.mkdir(parents=True, exist_ok=True)
    source = _prefix(cfg.data, n, work)
    truth = _truth(source, queries)
    rows: list[dict[str, Any]] = []
    opened: list[tuple[dict[str, Any], Any]] = []
    try:
        for name, recipe in [("reference", REFERENCE)] + [(r, r) for r in cfg.candidates]:
            folder = work / _folder_name(recipe)
            progress(f"n={n:,}: building {recipe}")
            build = _build(recipe, source, folder)
            idx = open_index(folder)
            params: dict[str, Any] = {}
            if name == "reference":
                ef, tried = reference_ef(idx, queries, truth, cfg.target)
                params = {"ef": ef}
                row = _size_row(f"hnswlib ef {ef}", recipe, folder, idx, build, tried[ef], params)
                row["ef_recalls"] = {str(e): r for e, r in tried.items()}
            else:
                found = np.asarray(idx.search(queries, K).ids)
                row = _size_row(recipe, recipe, folder, idx, build, _recall(found, truth), params)
                if row["depth"] is not None:
                    held_out = _held_out_depth(idx, queries, truth, cfg.target, row)
                    if held_out is not None and held_out["params"]["rescore"] != row["depth"]:
                        rows.append(row)
                        opened.append((row, idx))
                        row = held_out
            rows.append(row)
            opened.append((row, idx))
        _time_rounds(opened, queries, cfg.rounds, progress)
    finally:
        for idx in {id(i): i for _, i in opened}.values():  # a candidate timed at two depths is one index
            idx.close()
    for row in rows:
        progress(f"n={n:,}: memory of {row['recipe']}")
        row["memory"] = serving_memory(work / _folder_name(row["recipe"]), queries[:200], row["params"])
    _verdicts(rows, cfg)
    return {"n": n, "n_queries": int(len(queries)), "rows": rows}


def _searcher(idx: Any, params: dict[str, Any]) -> Callable[[np.ndarray], Any]:
    def search(q: np.ndarray) -> Any:
        return idx.search(q, K, **params)
    return search


def _time_rounds(opened: list[tuple[dict[str, Any], Any]], queries: np.ndarray, rounds: int,
                 progress: Callable[[str], None]) -> None:
    """p50 rounds of every index, on one thread (FAISS's OpenMP and the BLAS pools limited to one
    for the timing only: the builds above use every core)."""
    import faiss

    from slimvec.reducers.decompose import one_thread

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        with one_thread():
            _timed_rounds(opened, queries, rounds, progress)
    finally:
        faiss.omp_set_num_threads(threads)


def _timed_rounds(opened: list[tuple[dict[str, Any], Any]], queries: np.ndarray, rounds: int,
                  progress: Callable[[str], None]) -> None:
    for row, _ in opened:
        row["p50_ms"], row["p95_ms"] = [], []
    for rnd in range(rounds):
        order = opened if rnd % 2 == 0 else opened[::-1]
        for row, idx in order:
            progress(f"round {rnd + 1}: timing {row['recipe']}")
            lat = _p50_block(_searcher(idx, row["params"]), queries)
            row["p50_ms"].append(round(lat["latency_p50_ms"], 4))
            row["p95_ms"].append(round(lat["latency_p95_ms"], 4))


def _verdicts(rows: list[dict[str, Any]], cfg: ChoiceConfig) -> None:
    ref = rows[0]
    for row in rows:
        ratios = [a / b for a, b in zip(row["p50_ms"], ref["p50_ms"])]
        row["p50_ratio"] = [round(r, 3) for r in ratios]
        row["memory_ratio"] = round(row["memory"]["serving"] / max(ref["memory"]["serving"], 1), 3)
        row["meets"] = (row is not ref and row["recall_at_10"] >= cfg.target
                        and max(ratios) <= cfg.latency_ratio and row["memory_ratio"] <= cfg.ram_ratio)


def measure_choice(cfg: ChoiceConfig, progress: Callable[[str], None] = log.info) -> dict[str, Any]:
    """Every size of ``cfg``: the figures :func:`choice_markdown` turns into the page."""
    queries = np.ascontiguousarray(np.load(cfg.queries)[:cfg.n_queries], dtype=np.float32)
    sizes = [measure_size(cfg, n, queries, progress) for n in cfg.sizes]
    return {"data": str(cfg.data), "queries": str(cfg.queries), "target": cfg.target,
            "latency_ratio": cfg.latency_ratio, "ram_ratio": cfg.ram_ratio, "rounds": cfg.rounds,
            "reference": REFERENCE, "sizes": sizes}


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def _build_cell(row: dict[str, Any]) -> str:
    """Build wall / CPU seconds; the wall alone in records before CPU was counted, — when the
    index was reused from an earlier run."""
    wall, cpu = row.get("build_s"), row.get("build_cpu_s")
    return "—" if wall is None else f"{wall:,.0f}" + ("" if cpu is None else f" / {cpu:,.0f}")


def choice_markdown(result: dict[str, Any]) -> str:
    """The tables of docs/benchmarks/default-recipe.md from :func:`measure_choice`'s result."""
    out = []
    for size in result["sizes"]:
        out += [f"### {size['n']:,} vectors, {size['n_queries']:,} held-out queries", "",
                "| configuration | depth | nbr R@10 | p50 ms (rounds) | p50 / reference | serving RAM "
                "| RAM / reference | full vectors resident | disk / vector | build s (wall / CPU) | meets the goal |",
                "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---|"]
        for row in size["rows"]:
            mem = row["memory"]
            out.append(
                f"| {row['name'].replace('|', chr(92) + '|')} | {row['depth'] or '—'} | {row['recall_at_10']:.4f} | "
                f"{' / '.join(f'{p:.3f}' for p in row['p50_ms'])} | "
                f"{' / '.join(f'{r:.2f}' for r in row['p50_ratio'])} | {_mb(mem['serving'])} | "
                f"{row['memory_ratio']:.2f} | {_mb(mem['full_resident'])} | "
                f"{row['disk_bytes'] / size['n']:,.0f} B | {_build_cell(row)} | {'**yes**' if row['meets'] else 'no'} |")
        out.append("")
    return "\n".join(out)


def render_choice_runs(records: list[Path], root: Path) -> str:
    """The page of ``python -m benchmarks table default-recipe``: each record's tables under its command
    and machine facts (nothing typed by hand)."""
    rel = [p.resolve().relative_to(root).as_posix() if p.resolve().is_relative_to(root) else str(p)
           for p in records]
    out = ["# Default-recipe runs: candidates against full HNSW by corpus size (issue 28 item 4)", "",
           f"Generated by `python -m benchmarks table default-recipe {' '.join(rel)}`; nothing typed by hand. "
           "What the columns are and how each figure is measured: `benchmarks/kinds/recipe_choice.py` "
           "and [default-recipe.md](default-recipe.md), which reads these tables.", ""]
    for path, name in zip(records, rel):
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        machine = data.get("machine") or {}
        others = machine.get("others_cores")
        facts = (f"load average {machine.get('load_average_start', ['?'])[0]} at the start, "
                 f"{(machine.get('load_average_end') or ['?'])[0]} at the end (this run's own work included)"
                 + ("" if others is None else f"; other processes used {others:.2f} cores on average"))
        # the recorded command as it is spelled today (`slimvec bench KIND` moved to the checkout)
        command = str(data.get("command", "")).replace("slimvec bench ", "python -m benchmarks ", 1)
        out += [f"## [`{name}`]({Path(name).name})", "", "```", command, "```", "",
                f"{data.get('when', '')}, {machine.get('cpus', '?')} cores; {facts}.", "",
                choice_markdown(data["result"])]
    return "\n".join(out)
