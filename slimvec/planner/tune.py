"""``slimvec tune``: the recipe (reducer × store × rescoring depth) that fits the user's budget.

Successive halving over a grid of :class:`~slimvec.recipe.Recipe` candidates, on samples of the
user's own vectors:

1. every candidate's RAM and disk at the target corpus size N are predicted with the store size
   models (:mod:`slimvec.planner.sizing`, fitted on real builds at 1,000 and 2,000 vectors),
   plus the reducer matrix and, when rescoring, the full vectors' id column (16 B/vector in RAM;
   the full vectors themselves are memory-mapped from disk and counted on disk). Candidates over
   ``ram_budget`` are dropped before anything is measured;
2. the others are measured on a small sample (rung 1): each (reducer, store) is built once and
   searched with every rescoring depth; neighbour recall@k against exact full-dimension search on
   held-out sample queries, single-query p50 latency;
3. the better half of the builds (reducer × store, ranked by their best candidate's objective)
   and the best quarter by recall go on, with all their rescoring depths, to a sample four times
   larger, and so on up to the largest rung; the winner is the best candidate of the last rung.
   Halving runs over builds because a build is what costs: halving candidates kept 8 of 9 builds
   to the last rung of a 54-candidate grid and saved nothing.

Objective: with ``min_recall``, the smallest predicted RAM among candidates meeting it (and
``max_p50_ms``); without it, the best recall within the budget. The p50 ceiling is checked at N,
not at the sample size (issue 52 item 4): each candidate's p50 measured on the rungs is carried to
N by its store family's growth form (:mod:`slimvec.planner.growth`: a scan linearly, a graph
along ``a + b ln N`` fitted on two or more rungs; a graph measured on one rung only is checked as
measured, and says so); without ``max_p50_ms`` the ceiling is :data:`DEFAULT_MAX_P50_MS`. The
default recipe's build is in every grid, so the pick is always compared with it.
"""

from __future__ import annotations

import logging
import math
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.errors import ConfigError
from slimvec.measure import IndexUnderTest, recall_at_k, time_single
from slimvec.planner.sizing import rescore_bytes_per_vector
from slimvec.planner.tune_rules import DEFAULT_MAX_P50_MS, check_args, judge
from slimvec.recipe import AUTO_LADDER, DEFAULT_RECIPE, DEFAULT_TARGET, Recipe, parse_recipe

__all__ = ["TuneCandidate", "TuneResult", "default_grid", "tune", "ranking_rule", "DEFAULT_MAX_P50_MS"]


log = logging.getLogger(__name__)


@dataclass
class TuneCandidate:
    """One recipe and what was measured / predicted for it."""

    recipe: Recipe
    dim_out: int
    ram_bytes: float = 0.0
    disk_bytes: float = 0.0
    recall: float | None = None
    p50_ms: float | None = None
    rung: int = 0
    n_sample: int = 0
    meets: bool = False
    note: str = ""
    k: int = 10
    #: (sample size, p50) of every rung it was measured on, and the p50 carried to ``docs``
    points: list[tuple[int, float]] = field(default_factory=list)
    p50_at_docs: float | None = None

    def row(self) -> dict[str, Any]:
        """A JSON row of the runner-up table (recall named as the bench row's field, with its k)."""
        return {"recipe": str(self.recipe), "dim_out": self.dim_out, "ram_bytes": int(self.ram_bytes),
                "disk_bytes": int(self.disk_bytes), "k": self.k,
                "neighbor_recall_at_k": None if self.recall is None else round(self.recall, 4),
                "latency_p50_ms": None if self.p50_ms is None else round(self.p50_ms, 4),
                "latency_p50_ms_at_docs": None if self.p50_at_docs is None else round(self.p50_at_docs, 4),
                "rung": self.rung, "n_sample": self.n_sample, "meets": self.meets, "note": self.note}


@dataclass
class TuneResult:
    """Winner (None when nothing fits), every candidate best first, and notes."""

    best: TuneCandidate | None
    candidates: list[TuneCandidate]
    notes: list[str] = field(default_factory=list)
    min_recall: float | None = None
    rule: str = ""  #: the ranking rule in words (:func:`ranking_rule`): printed, and tuned.json's ranked_by
    default: TuneCandidate | None = None  #: the default recipe as rescore=auto would set it here

    def versus_default(self) -> str | None:
        """How the pick compares with the default recipe on the same sample (None: not measured)."""
        d, b = self.default, self.best
        if d is None or d.recall is None:
            return None
        said = (f"default recipe {DEFAULT_RECIPE}: recall@{d.k} {d.recall:.4f} at depth "
                f"{d.recipe.rescore} (what rescore=auto would pick on this sample), RAM "
                f"{_mib(d.ram_bytes)}, disk {_mib(d.disk_bytes)}, p50 {d.p50_ms:.3f} ms"
                f"{'' if d.meets else ' (misses the constraints)'}")
        if b is None:
            return said + "; no candidate meets the constraints"
        if b is d or (str(b.recipe.reducer), b.recipe.store) == (d.recipe.reducer, d.recipe.store):
            return said + "; the pick is the default recipe: keep it"
        return (said + f"; the pick: recall {b.recall:.4f} ({b.recall - d.recall:+.4f}), RAM "  # type: ignore[operator]
                f"{_mib(b.ram_bytes)} ({b.ram_bytes / max(d.ram_bytes, 1):.2f}x), disk "
                f"{_mib(b.disk_bytes)} ({b.disk_bytes / max(d.disk_bytes, 1):.2f}x), p50 "
                f"{b.p50_ms:.3f} ms")

    def recipe(self) -> Recipe:
        """The winning recipe with its measurements and the runner-up table attached.

        A rescored winner under a recall floor is written with ``rescore=auto`` and the floor as
        its target: the depth measured on the sample (``measured["rescore_at_sample"]``) is a
        lower bound at N, since the depth needed grows with the corpus; the index writer
        calibrates it on the real corpus.
        """
        if self.best is None:
            raise ConfigError("No candidate meets the constraints: " + "; ".join(self.notes)
                              + ". Raise --ram-budget, lower --min-recall or --max-p50-ms.")
        b = self.best
        measured = {k: v for k, v in b.row().items() if k not in ("recipe", "note")}
        measured["notes"] = self.notes
        measured["ranked_by"] = self.rule or ranking_rule(self.min_recall, None, None, b.k)
        if self.default is not None:
            measured["default_recipe"] = {**self.default.row(), "recipe": DEFAULT_RECIPE}
        rescore, target = b.recipe.rescore, b.recipe.target_recall
        if rescore is not None and self.min_recall is not None:
            measured["rescore_at_sample"] = rescore
            rescore, target = "auto", self.min_recall
        return Recipe(b.recipe.reducer, b.recipe.store, rescore, b.recipe.keep_full,
                      target, measured=measured,
                      runners_up=[c.row() for c in self.candidates if c is not b][:20])


#: stores of the default grid: graphs at full precision and SQ8, and FAISS RaBitQ (1 bit per
#: coordinate plus its factors, always re-ranked: issue 28); the default recipe's build is added
DEFAULT_STORES = ("hnsw", "faiss:HNSW32", "faiss:HNSW32,SQ8", "faiss:RaBitQ")

#: the default recipe: its build is in the default grid, kept to the last rung and compared with
_DEFAULT = parse_recipe(DEFAULT_RECIPE)


def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def _is_default_build(c: TuneCandidate) -> bool:
    r = c.recipe
    return (r.reducer, r.store, r.keep_full) == (_DEFAULT.reducer, _DEFAULT.store, _DEFAULT.keep_full) \
        and r.rescore is not None


def ranking_rule(min_recall: float | None, max_p50_ms: float | None, ram_budget: int | None,
                 k: int = 10) -> str:
    """The rule tune ranks by, in words (:func:`_objective`, one rule with plan and report.md)."""
    last = ("; candidates measured on the largest sample rank before those halved away on "
            "smaller ones")
    p50 = (f" and p50 carried to N <= {DEFAULT_MAX_P50_MS if max_p50_ms is None else max_p50_ms:g} ms"
           + (" (the default ceiling)" if max_p50_ms is None else ""))
    budget = f" within the RAM budget of {_mib(ram_budget)}" if ram_budget is not None else ""
    if min_recall is not None:
        return (f"smallest predicted RAM at N among candidates with neighbor_recall_at_{k} >= "
                f"{min_recall:g}{p50}{budget}; then higher recall, then lower p50{last}")
    return (f"highest neighbor_recall_at_{k}{budget}{p50}; then smaller predicted RAM, then lower "
            f"p50{last}")


def _quantized(store: str) -> bool:
    """The store keeps lossy codes (its quantization label is not float32): SQ, PQ, RaBitQ,
    Qdrant ``quant=``..."""
    from slimvec.connectors import parse_store_spec, store_class

    parsed = parse_store_spec(store)
    label = store_class(parsed).quantization_label(parsed.arg, dict(parsed.options or {}))
    return label not in ("float32", "none")


def default_grid(dim: int, reducers: Sequence[str] = (), stores: Sequence[str] = ()) -> list[Recipe]:
    """Full dimension and PCA at 1/2, 1/4, 1/8 (or ``reducers``) × hnswlib / FAISS HNSW32 / FAISS
    HNSW32,SQ8 / FAISS RaBitQ (or ``stores``) × no rescoring and R = 2, 4, 8, 16, 32, the depths
    ``rescore=auto`` tries (the full dimension rescored only when quantized). Rescored
    candidates keep the full vectors at the default recipe's precision (float16), and every
    grid holds the default recipe's build too (also with ``stores`` given: the pick is compared
    with it), at every depth of its ladder."""
    reducers = list(reducers) or ["none"] + [f"pca:{d}" for d in (dim // 2, dim // 4, dim // 8) if d >= 8]
    stores = list(stores) or list(DEFAULT_STORES)
    builds = [(red, store) for red in reducers for store in stores]
    if (_DEFAULT.reducer, _DEFAULT.store) not in builds:
        builds.insert(0, (_DEFAULT.reducer, _DEFAULT.store))
    out = []
    for red, store in builds:
        lossless = red == "none" and not _quantized(store)
        for R in [None] + ([] if lossless else list(AUTO_LADDER)):
            out.append(Recipe(red, store, R, _DEFAULT.keep_full if R is not None else None))
    return out


def _objective(c: TuneCandidate, min_recall: float | None) -> tuple:
    """The one ranking rule (:func:`slimvec.planner.ranking.rank_key`, as plan and report.md):
    under a recall floor the smallest RAM meeting it, else the best recall; p50 breaks ties."""
    from slimvec.planner.ranking import rank_key

    return rank_key(c.meets, c.recall, c.ram_bytes, floor=min_recall, tiebreak=c.p50_ms)


def _survivors(alive: list[TuneCandidate], min_recall: float | None,
               n_scored: int = 0) -> list[TuneCandidate]:
    """The candidates that go on to the next rung: halving over builds, not candidates.

    A build (reducer × store) is what costs; its rescoring depths are measured almost for free.
    So builds are ranked by their best candidate: the better half by the objective go on, plus
    the best quarter by recall (a cheap build that only just met the floor on a small sample may
    miss it on the next one), plus every build whose best recall is within two standard errors of
    the best build's (``n_scored`` = queries × k neighbour checks; a recall measured on 200
    queries is ±0.005 at 0.95, so a near-tie on a small sample says nothing), each with all its
    depths. ``alive`` is sorted by the objective.
    """
    best_recall: dict[tuple[str, str], float] = {}  # builds in objective order
    for c in alive:
        key = (c.recipe.reducer, c.recipe.store)
        best_recall[key] = max(best_recall.get(key, -1.0), c.recall if c.recall is not None else -1.0)
    order = list(best_recall)
    keep = order[:max(1, math.ceil(len(order) / 2))]
    by_recall = sorted(order, key=lambda g: -best_recall[g])[:max(1, math.ceil(len(order) / 4))]
    kept = set(keep) | set(by_recall)
    if n_scored > 0:
        top = max(best_recall.values())
        margin = 2.0 * math.sqrt(max(top * (1.0 - top), 1e-6) / n_scored)
        kept |= {g for g in order if best_recall[g] >= top - margin}
    return [c for c in alive if (c.recipe.reducer, c.recipe.store) in kept]


def _predict_sizes(cands: list[TuneCandidate], docs: int, dim: int, workdir: Path,
                   show: bool = False, payload_index: dict[str, str] | None = None) -> list[str]:
    from slimvec.index.filter_info import payload_index_bytes
    from slimvec.planner.sizing import calibrate, sizing_sizes, sizing_spec
    from slimvec.ui import make_progress

    notes = []
    pidx = payload_index_bytes(payload_index, docs) if payload_index else None
    by_store: dict[str, list[TuneCandidate]] = {}
    for c in cands:
        by_store.setdefault(sizing_spec(c.recipe.store), []).append(c)
    with make_progress(show, unit="stores") as bar:
        task = bar.add_task(f"size models of {len(by_store)} store kind(s) (real builds at 1,000 and "
                            "2,000 vectors)", total=len(by_store))
        models = {}
        for spec, group in by_store.items():
            dims = sorted({c.dim_out for c in group})
            models[spec], _ = calibrate(spec, sizing_sizes(spec), sorted({dims[0], dims[-1]}),
                                        workdir=workdir)
            bar.advance(task)
    for spec, group in by_store.items():
        model = models[spec]
        for c in group:
            reducer_bytes = 0 if c.recipe.reducer == "none" else 4 * dim * (c.dim_out + 1)
            c.ram_bytes = model.ram_bytes(docs, c.dim_out) + reducer_bytes
            c.disk_bytes = model.disk_bytes(docs, c.dim_out) + reducer_bytes
            if c.recipe.rescore is not None:
                full_ram, full_disk = rescore_bytes_per_vector(dim, c.recipe.keep_full)
                c.ram_bytes += full_ram * docs
                c.disk_bytes += full_disk * docs
            if payload_index:
                got = payload_index_bytes(payload_index, docs, store=spec)
                c.ram_bytes += got["ram"]
                c.disk_bytes += got["disk"]
    if pidx:
        notes.append(f"payload indexes {', '.join(f'{f}:{k}' for f, k in (payload_index or {}).items())}: "
                     f"{pidx['ram'] / 2**20:,.1f} MiB RAM, {pidx['disk'] / 2**20:,.1f} MiB disk at "
                     f"{docs:,} in every FAISS / hnswlib row ({pidx['source']}); Qdrant rows add "
                     "their own payload indexes' figure")
    notes.append(f"RAM and disk predicted at {docs:,} vectors by size models fitted at 1,000 and 2,000 "
                 "vectors (more for stores that train: twice what they need)")
    return notes


def _measure_group(group: list[TuneCandidate], corpus: np.ndarray, queries: np.ndarray,
                   truth: np.ndarray, k: int, fit: np.ndarray, workdir: Path, latency_queries: int) -> None:
    """Build one (reducer, store) on ``corpus`` and measure every rescoring depth of ``group``."""
    from slimvec.connectors import make_store
    from slimvec.connectors.fullvectors import FullVectors
    from slimvec.reducers import make_reducer

    first = group[0].recipe
    reducer = make_reducer(first.reducer).fit(fit)
    folder = Path(tempfile.mkdtemp(prefix="tune-", dir=workdir))
    try:
        store = make_store(first.store, folder / "store").create(reducer.n_components_)
        ids = np.arange(1, len(corpus) + 1)
        for lo in range(0, len(corpus), 4096):
            store.upsert(ids[lo:lo + 4096], reducer.transform(corpus[lo:lo + 4096]))
        store.finalize()
        full = None
        if any(c.recipe.rescore is not None for c in group):
            full = FullVectors.create(folder / "full", corpus.shape[1],
                                      dtype=next(c.recipe.keep_full for c in group if c.recipe.keep_full))
            full.append(ids, corpus)
            full.commit()
        under_test = IndexUnderTest(store, reducer, full)  # Index.search's path (slimvec.measure)
        for c in group:
            n_cand = None if c.recipe.rescore is None else k * int(c.recipe.rescore)

            def search(i: slice, n_cand: int | None = n_cand) -> np.ndarray:
                return under_test.search(queries[i], k, n_cand).ids

            c.recall = recall_at_k(search(slice(None)) - 1, truth, k)
            c.p50_ms = time_single(lambda j: search(slice(j, j + 1)), len(queries), latency_queries,
                                   1)["latency_p50_ms"]
        store.close()
        if full is not None:
            full.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def tune(vectors: np.ndarray, *, docs: int, ram_budget: int | None = None, min_recall: float | None = None,
         max_p50_ms: float | None = None, grid: Sequence[Recipe] | None = None,
         rungs: Sequence[int] = (2000, 8000, 32000), n_queries: int = 200, k: int = 10, seed: int = 0,
         latency_queries: int = 50, workdir: str | Path | None = None,
         progress: Callable[[str], None] | None = None, search: str = "halving",
         payload_index: dict[str, str] | None = None) -> TuneResult:
    """Choose a recipe for ``docs`` vectors like ``vectors`` under the constraints.

    Parameters
    ----------
    vectors : ndarray (n, dim)
        A sample of the user's vectors (cosine; queries are held out from it).
    docs : int
        Corpus size to plan for (RAM and disk are predicted at this N).
    ram_budget : int, optional
        Bytes of RAM the searchable index may use at ``docs``.
    min_recall : float, optional
        Neighbour recall@k floor.
    max_p50_ms : float, optional
        Single-query p50 ceiling (measured at the sample size).
    grid : list of Recipe, optional
        Candidates (default :func:`default_grid`).
    rungs : list of int
        Corpus sample sizes of the successive-halving rungs (capped at what ``vectors`` holds).
    payload_index : dict, optional
        Declared payload indexes (field -> kind): their RAM / disk are added (plan's model).
    search : {"halving", "exhaustive", "auto"}
        ``exhaustive`` measures every candidate within the budget on the largest rung only;
        ``auto`` does so when at least half of those builds train a quantizer (IVF, PQ: their
        training costs the same on every rung, so the small rungs save nothing; measured at 100k,
        docs/recipes.md), and halves otherwise.

    Returns
    -------
    TuneResult

    Raises
    ------
    ConfigError
        A number out of range (``docs``, ``rungs``, ``n_queries``, ``k``, ``latency_queries`` >= 1,
        ``seed`` >= 0, ``min_recall`` in [0, 1], ``max_p50_ms`` > 0, ``ram_budget`` >= 1 byte; NaN
        refused), no target, or too few vectors: before any size build or search.
    """
    docs, ram_budget, min_recall, max_p50_ms, n_queries, k, seed, latency_queries = check_args(
        docs, ram_budget, min_recall, max_p50_ms, rungs, n_queries, k, seed, latency_queries, search)
    ceiling = DEFAULT_MAX_P50_MS if max_p50_ms is None else max_p50_ms
    X = np.asarray(vectors, dtype=np.float32)
    X = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
    if len(X) < n_queries + 100:
        raise ConfigError(f"tune needs at least {n_queries + 100} vectors, got {len(X)}.")
    say = progress or (lambda text: log.info(text))
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(X))
    queries, pool = X[perm[:n_queries]], X[perm[n_queries:]]
    sizes = sorted({min(int(r), len(pool)) for r in rungs})
    cands = [TuneCandidate(r, r.dim_out(X.shape[1]), k=k) for r in (grid or default_grid(X.shape[1]))]
    from slimvec.connectors import store_dim_problem

    dropped = {}
    for c in cands:
        problem = store_dim_problem(c.recipe.store, c.dim_out)
        if problem:
            dropped[(c.recipe.reducer, c.recipe.store)] = problem
    cands = [c for c in cands if (c.recipe.reducer, c.recipe.store) not in dropped]
    if not cands:
        raise ConfigError("No reducer × store combination of the grid can be built: "
                          + "; ".join(sorted(set(dropped.values()))) + ".")
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="slimvec-tune-"))
    work.mkdir(parents=True, exist_ok=True)
    notes = [f"left out {red} → {store}: {why}" for (red, store), why in sorted(dropped.items())]
    notes += _predict_sizes(cands, docs, X.shape[1], work, progress is not None, payload_index)
    alive = [c for c in cands if ram_budget is None or c.ram_bytes <= ram_budget]
    for c in cands:
        if c not in alive:
            c.note = "over the RAM budget (predicted)"
    if not alive:
        notes.append(f"every candidate is predicted over the RAM budget of {ram_budget:,} bytes")
        return TuneResult(None, sorted(cands, key=lambda c: c.ram_bytes), notes, min_recall)
    if search == "auto":
        from slimvec.connectors import store_min_train_vectors

        builds = {(c.recipe.reducer, c.recipe.store) for c in alive}
        trained = sum(store_min_train_vectors(store) > 0 for _, store in builds)
        search = "exhaustive" if 2 * trained >= len(builds) else "halving"
        notes.append(f"search: {search} ({trained} of {len(builds)} builds within the budget train a "
                     "quantizer)")
    if search == "exhaustive":
        sizes = sizes[-1:]
    from slimvec.measure import exact_knn
    from slimvec.ui import make_progress

    for rung, n in enumerate(sizes, start=1):
        corpus = pool[:n]
        truth = exact_knn(corpus, queries, k, metric="ip")[0]  # X is normalised above
        fit = corpus[: min(n, 20000)]
        groups: dict[tuple[str, str], list[TuneCandidate]] = {}
        for c in alive:
            groups.setdefault((c.recipe.reducer, c.recipe.store), []).append(c)
        say(f"rung {rung}: {len(alive)} candidates ({len(groups)} builds) on {n:,} vectors")
        with make_progress(progress is not None, unit="builds") as bar:  # issue 40 item 5
            task = bar.add_task(f"rung {rung} builds", total=len(groups))
            for (red, store), group in groups.items():
                bar.update(task, description=f"rung {rung}: {red} -> {store}")
                _measure_group(group, corpus, queries, truth, k, fit, work, latency_queries)
                bar.advance(task)
                for c in group:
                    c.rung, c.n_sample = rung, n
                    c.points.append((n, float(c.p50_ms or 0.0)))
                    judge(c, docs, min_recall, ceiling)
        alive.sort(key=lambda c: _objective(c, min_recall))
        if rung < len(sizes):  # the default recipe's build goes on too: the pick is compared with it
            kept = _survivors(alive, min_recall, n_scored=len(queries) * k)
            alive = kept + [c for c in alive if _is_default_build(c) and c not in kept]
    if workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    notes.append(f"successive halving on {', '.join(f'{s:,}' for s in sizes)} sample vectors, "
                 f"{n_queries} held-out queries; recall measured at the sample size (it falls and the "
                 "rescoring depth needed grows with N: rescore=auto calibrates it); p50 carried to "
                 f"{docs:,} by each store's growth and held under {ceiling:g} ms"
                 + (" (the default ceiling; --max-p50-ms sets it)" if max_p50_ms is None else ""))
    notes.append(f"{sum(c.rung > 0 for c in cands)} candidates measured in {len(sizes)} rung(s), "
                 f"{time.perf_counter() - started:.0f} s")
    ranked = sorted(cands, key=lambda c: (-c.rung,) + _objective(c, min_recall))
    best = ranked[0] if ranked and ranked[0].meets else None
    if best is None:
        notes.append("no candidate meets the constraints on the largest sample")
    return TuneResult(best, ranked, notes, min_recall,
                      ranking_rule(min_recall, max_p50_ms, ram_budget, k), _default_as_auto(cands, min_recall))


def _default_as_auto(cands: list[TuneCandidate], min_recall: float | None) -> TuneCandidate | None:
    """The default recipe's candidate that ``rescore=auto`` would pick on the largest sample it
    was measured on: the smallest depth reaching its target (``min_recall``, else the default
    0.99), else the best recall."""
    mine = [c for c in cands if _is_default_build(c) and c.recall is not None]
    if not mine:
        return None
    last = max(c.rung for c in mine)
    mine = sorted((c for c in mine if c.rung == last), key=lambda c: int(c.recipe.rescore or 0))
    target = min_recall if min_recall is not None else DEFAULT_TARGET
    return next((c for c in mine if float(c.recall or 0.0) >= target),
                max(mine, key=lambda c: float(c.recall or 0.0)))
