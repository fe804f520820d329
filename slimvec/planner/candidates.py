"""Plan candidates: one per configuration of the measured rows, or per recipe, with its quality.

The quality side of :func:`slimvec.planner.plan.make_plan` (and of ``report.html``'s planner):
typed :class:`~slimvec.planner.rows.Row` objects in, :class:`Candidate` objects out. A quality
metric is a row field measured at the row's k (:data:`QUALITY_METRICS`); the old ``*_at_10``
spellings are refused with the field to use (:func:`check_metric_name`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slimvec.connectors import parse_store_spec
from slimvec.errors import ConfigError
from slimvec.planner.rows import LEGACY_KEYS, Row, finite
from slimvec.planner.sizing import rescore_bytes_per_vector, sizing_spec

__all__ = ["Candidate", "QUALITY_METRICS", "check_metric_name", "rows_k", "rows_at_dim",
           "candidates_from_results", "candidates_for_recipes", "sizing_candidates", "row_rescore_bytes"]

#: metrics a plan can target (higher is better): the row fields, measured at the rows' k
QUALITY_METRICS = ("task_recall_at_k", "neighbor_recall_at_k", "task_mrr_at_k", "sts_spearman")


@dataclass
class Candidate:
    """One configuration considered by the plan.

    Attributes
    ----------
    reducer, store : str
        Specs as in the results (``store`` as built for sizing).
    dim_out : int
    rescore : bool
    quality : float or None
        The target metric (the lowest over the datasets it was measured on); None when unknown.
    datasets : list of str
        Where the quality was measured.
    reducer_bytes : int
        Size of the fitted reducer artifact (from the results; 0 when unknown), counted in RAM
        (it transforms every query) and on disk.
    ram_bytes, disk_bytes : float
        Predicted at the plan's N (a rescored candidate adds its full vectors on disk and their
        id lookup in RAM, as ``slimvec tune`` counts them).
    meets_target : bool
    recipe : str or None
        The recipe this candidate stands for (``slimvec plan --recipe``).
    keep_full : str
        dtype of the full vectors a rescored candidate keeps on disk (the default recipe's
        float16 unless its recipe names another).
    """

    reducer: str
    dim_out: int
    store: str
    rescore: bool = False
    quality: float | None = None
    datasets: list[str] = field(default_factory=list)
    reducer_bytes: int = 0
    ram_bytes: float = 0.0
    disk_bytes: float = 0.0
    meets_target: bool = False
    recipe: str | None = None
    keep_full: str = "float16"
    depth: int = 0
    rank_quality: float | None = None
    rank_metric: str | None = None
    buildable: bool = True
    why_not: str = ""
    p50_ms: float | None = None
    p50_n: int | None = None
    p50_at_docs: float | None = None
    p50_note: str = ""
    #: (dataset family, n, p50, p99, quality) of every row folded in (latency / recall against N)
    points: list[tuple[str, int, float | None, float | None, float | None]] = field(default_factory=list)
    p99_at_docs: float | None = None
    #: relative uncertainty of ``p50_at_docs`` (:func:`slimvec.planner.growth.uncertainty`)
    p50_uncertainty: float | None = None
    #: the quality carried to the plan's N (None: measured at one size only), and how
    quality_at_docs: float | None = None
    quality_note: str = ""

    @property
    def command(self) -> str | None:
        """The one command that builds this candidate (``slimvec ingest ... --recipe ...``), or
        ``None`` when ``slimvec ingest`` cannot build it (:attr:`why_not`)."""
        from slimvec.planner.ranking import ingest_command

        if not self.buildable:
            return None
        return ingest_command({"reducer": self.reducer, "store": self.store, "recipe": self.recipe,
                               "rescore": self.depth or self.rescore})

    def rescore_bytes_per_vector(self, dim: int) -> tuple[int, int]:
        """(RAM, disk) bytes per vector a rescored candidate adds
        (:func:`~slimvec.planner.sizing.rescore_bytes_per_vector`); (0, 0) when not rescored."""
        return rescore_bytes_per_vector(dim, self.keep_full) if self.rescore else (0, 0)

    @property
    def label(self) -> str:
        """``pca:96 → hnsw`` (``+rescore`` when rescored), or the recipe string."""
        if self.recipe is not None:
            return self.recipe
        return f"{self.reducer} → {self.store}" + (f" +rescore×{self.depth}" if self.depth
                                                   else " +rescore" if self.rescore else "")


def check_metric_name(metric: str) -> str:
    """``metric`` when it is one of :data:`QUALITY_METRICS`.

    Raises
    ------
    ConfigError
        Unknown, or an old ``*_at_10`` spelling (the message names the field to use).
    """
    if metric in LEGACY_KEYS:
        raise ConfigError(f"Plan metric {metric!r} is the old spelling: metrics are the row fields, "
                          f"measured at the rows' k; use {LEGACY_KEYS[metric]!r}.")
    if metric not in QUALITY_METRICS:
        raise ConfigError(f"Unknown plan metric {metric!r}. Known: {', '.join(QUALITY_METRICS)}.")
    return metric


def rows_k(rows: Sequence[Row], notes: list[str] | None = None) -> int | None:
    """The k the rows were measured at; ``None`` without rows or when they mix several k (noted)."""
    ks = sorted({r.k for r in rows})
    if len(ks) > 1 and notes is not None:
        notes.append(f"the rows were measured at k = {', '.join(map(str, ks))}: their \"at k\" "
                     "figures are compared across different k")
    return ks[0] if len(ks) == 1 else None


def _store_matches(row_store: str, wanted: Sequence[str]) -> bool:
    for spec in wanted:
        if ":" not in spec and "," not in spec:
            if parse_store_spec(sizing_spec(row_store)).name == parse_store_spec(spec).name:  # a recipe's store stage
                return True
        elif sizing_spec(row_store) == sizing_spec(spec):
            return True
    return False


def measured_recipe(row: Row) -> Any:
    """The :class:`~slimvec.recipe.Recipe` a recipe row of ``slimvec bench`` measured (its
    ``store`` is the recipe string), or None for a plain store row."""
    from slimvec.recipe import parse_recipe

    text = str(row.store or "")
    if "|" not in text:
        return None
    try:
        return parse_recipe(text)
    except ConfigError:
        return None


def row_keep_full(row: Row) -> str:
    """dtype of the full vectors the recipe built from ``row`` keeps (what its disk is sized
    with): a recipe row's own ``keep_full``, else the default recipe's (float16: the command the
    plan prints builds that; bench's plain rows re-ranked from float32, scores within ~1e-3)."""
    from slimvec.recipe import DEFAULT_KEEP_FULL

    rec = measured_recipe(row)
    return (rec.keep_full if rec is not None else None) or DEFAULT_KEEP_FULL


def row_rescore_bytes(row: Row, dim: int) -> tuple[int, int]:
    """(RAM, disk) bytes per vector rescoring adds to the index built from ``row``, as the plan's
    candidate of that row counts them (its :func:`row_keep_full` dtype); (0, 0) when not rescored."""
    return rescore_bytes_per_vector(dim, row_keep_full(row)) if row.rescore else (0, 0)


def _depth(row: Row) -> int:
    """The row's rescoring depth R (0 when not rescored)."""
    rescore = row.rescore
    return 0 if isinstance(rescore, bool) else int(finite(rescore) or 0)


def rows_at_dim(rows: Sequence[Row], dim: int) -> list[Row]:
    """The rows measured at encoder dimension ``dim`` (rows without ``dim_in`` count as any)."""
    return [r for r in rows if r.dim_in is None or finite(r.dim_in) == dim]


def candidates_from_results(rows: Sequence[Row], dim: int, stores: Sequence[str] = (),
                            metric: str = "task_recall_at_k",
                            notes: list[str] | None = None) -> list[Candidate]:
    """One candidate per (reducer, store, rescore) of the rows, quality the lowest over datasets.

    Rows measured with another input dimension than ``dim``, remote stores (no local size model)
    and, when ``stores`` is given, other stores are left out (and counted in ``notes``).

    Raises
    ------
    ConfigError
        Rows exist but none was measured at ``dim``, or none uses one of ``stores``.
    """
    from slimvec.planner.ranking import buildable

    notes = notes if notes is not None else []
    check_metric_name(metric)
    at_dim = rows_at_dim(rows, dim)
    if rows and not at_dim:
        dims = sorted({int(d) for r in rows if (d := finite(r.dim_in)) is not None})
        raise ConfigError(f"The results were measured with encoder dimension(s) {dims}, not --dim {dim}: "
                          "quality does not carry over between encoders. Pass the matching --dim or "
                          "bench your encoder first.")
    groups: dict[tuple[str, str, bool, int, str], Candidate] = {}
    skipped_remote: set[str] = set()
    for r in at_dim:
        store_text = str(r.store or "")
        try:
            store = sizing_spec(store_text)
        except ConfigError:
            skipped_remote.add(store_text)
            continue
        if stores and not _store_matches(store_text, stores):
            continue
        reducer, depth, keep = str(r.reducer or "none"), _depth(r), row_keep_full(r)
        key = (reducer, store, bool(r.rescore), depth, keep)
        if key not in groups:
            ok, why = buildable(r)
            groups[key] = Candidate(reducer, int(finite(r.dim_out) or dim), store, bool(r.rescore),
                                    depth=depth, buildable=ok, why_not=why, keep_full=keep)
        _add_row(groups[key], r, metric)
    if skipped_remote:
        notes.append(f"no local size model for {', '.join(sorted(skipped_remote))}: left out")
    if at_dim and not groups:
        known = sorted({str(r.store) for r in at_dim})
        raise ConfigError(f"No result row uses store(s) {', '.join(stores)}; the results hold {', '.join(known)}. "
                          "Bench that store or pick one of those.")
    if len({d for c in groups.values() for d in c.datasets}) > 1:
        notes.append(f"{metric} is the lowest over the datasets it was measured on")
    return list(groups.values())


def _add_row(cand: Candidate, row: Row, metric: str) -> None:
    """Fold one row into its candidate: the lowest quality, the largest reducer, the slowest p50."""
    value = finite(row.get(metric))
    if value is not None:
        cand.quality = value if cand.quality is None else min(cand.quality, value)
        cand.datasets.append(str(row.dataset or "?"))
    cand.reducer_bytes = max(cand.reducer_bytes, int(finite(row.reducer_bytes) or 0))
    p50 = finite(row.latency_p50_ms)
    if p50 is not None and (cand.p50_ms is None or p50 > cand.p50_ms):  # the slowest dataset
        cand.p50_ms, cand.p50_n = p50, int(finite(row.n_corpus) or 0) or None
    n = int(finite(row.n_corpus) or 0)
    if n:
        from slimvec.planner.growth import family

        cand.points.append((family(str(row.dataset or "?")), n, p50, finite(row.latency_p99_ms), value))


def candidates_for_recipes(recipes: Sequence[Any], dim: int, rows: Sequence[Row] = (),
                           metric: str = "neighbor_recall_at_k",
                           notes: list[str] | None = None) -> list[Candidate]:
    """One candidate per recipe (:class:`~slimvec.recipe.Recipe`), quality from ``rows``.

    A row counts for a recipe when its reducer, store (as sized) and rescoring depth are the
    recipe's; for ``rescore=auto`` the depth calibration would pick is used: per dataset, the
    smallest measured depth whose quality reaches the recipe's target, else the deepest. The
    quality is the lowest over datasets; a recipe no row measured keeps ``quality=None`` (noted).
    """
    from slimvec.recipe import AUTO_LADDER

    notes = notes if notes is not None else []
    check_metric_name(metric)
    out = []
    for rec in recipes:
        store = sizing_spec(rec.store)
        cand = Candidate(rec.reducer, rec.dim_out(dim), store, rec.rescore is not None,
                         recipe=str(rec), keep_full=rec.keep_full or "float32")
        wanted = {0} if rec.rescore is None else set(AUTO_LADDER) if rec.auto_rescore else {int(rec.rescore)}
        by_dataset: dict[str, dict[int, Row]] = {}
        mine = [r for r in rows_at_dim(rows, dim) if str(r.reducer or "none") == rec.reducer
                and _sized(r) == store]
        own = [r for r in mine if _same_build(measured_recipe(r), rec)]
        calibrated: dict[str, Row] = {}  # a built recipe's row at the depth its index calibrated
        for r in own or mine:  # the recipe's own rows when there are any (canonical match)
            if _depth(r) in wanted:
                by_dataset.setdefault(str(r.dataset or "?"), {})[_depth(r)] = r
            if rec.auto_rescore and own and r.extra.get("calibrated_depth") == _depth(r):
                calibrated[str(r.dataset or "?")] = r
                by_dataset.setdefault(str(r.dataset or "?"), {})
            cand.reducer_bytes = max(cand.reducer_bytes, int(finite(r.reducer_bytes) or 0))
        for ds, per_depth in by_dataset.items():
            if ds in calibrated:  # what the index searches at, measured: no depth to infer
                picked = calibrated[ds]
            elif rec.auto_rescore:  # the depth calibration picks: it targets neighbour recall
                reached = [d for d in sorted(per_depth) if float(
                    finite(per_depth[d].neighbor_recall_at_k) or 0) >= rec.target_recall]
                picked = per_depth[reached[0] if reached else max(per_depth)]
            else:
                picked = next(iter(per_depth.values()))
            _add_row(cand, picked, metric)
        if rows and not by_dataset:
            notes.append(f"{rec}: no result row measures it (add it with slimvec bench --recipe)")
        elif cand.quality is None:
            notes.append(f"{rec}: its result rows do not measure {metric}")
        out.append(cand)
    return out


def _same_build(a: Any, b: Any) -> bool:
    """Two recipes build the same index (reducer, store, kept precision; depth and target aside)."""
    return a is not None and (a.reducer, a.store, a.keep_full) == (b.reducer, b.store, b.keep_full)


def _sized(row: Row) -> str | None:
    """The row's store as sized, or None for a store without a local size model."""
    try:
        return sizing_spec(str(row.store or ""))
    except ConfigError:
        return None


def sizing_candidates(dim: int, stores: Sequence[str]) -> list[Candidate]:
    """Without rows: each store at the full dimension and PCA at 1/2, 1/4, 1/8 of it, sized only."""
    dims = [dim] + [d for d in (dim // 2, dim // 4, dim // 8) if d >= 8]
    return [Candidate("none" if d == dim else f"pca:{d}", d, sizing_spec(s)) for s in stores for d in dims]
