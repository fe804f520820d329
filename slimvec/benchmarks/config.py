"""What one ``slimvec bench`` run measures: :class:`BenchConfig` (moved out of
:mod:`slimvec.benchmarks.runner`, which re-exports it), and which peers it measures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from slimvec.benchmarks.baselines import ST_VARIANTS, StoreVariant, peer_store_variants
from slimvec.errors import ConfigError

__all__ = ["BenchConfig", "lossy"]


@dataclass
class BenchConfig:
    """What one ``slimvec bench`` run measures.

    Attributes
    ----------
    reducers : list of str
        Reducer specs; ``none`` (full dimension) is always measured first.
    stores : list of str
        Store specs (default ``hnsw``).
    work_dir : Path
        Where indexes and reducer artifacts are built.
    baselines : bool
        Measure the peer quantization baselines on full-dimension vectors.
    rescore : list of int
        Candidate multipliers R: each reduced row also measured with ``k * R`` candidates re-ranked
        by the full vectors.
    kmeans : int or None
        K of the cluster-routed retrieval rows (FAISS k-means on each reducer's output).
    route_probes : list of int
        Clusters p a query is routed to.
    k : int
        Results per query (metrics are @k; 10 in the issue).
    latency_queries, latency_repeats : int
        Single queries timed (after a warm-up), each timed this many times (median kept).
    fit_max : int
        Rows an unsupervised reducer is fitted on (random sample beyond this).
    fit_on : str
        ``corpus`` (default: unsupervised reducers fit on a sample of the corpus searched) or
        ``train``: every reducer fits on the training sentences only (``--train-pairs``), so no
        reducer has seen the evaluation corpus. Pair-learning reducers always fit on the training
        pairs when there are some.
    threads : int
        Threads for FAISS / torch while searching (1 = single-thread latency).
    build_threads : int
        Threads for FAISS while building stores (0 = every core; hnswlib and Qdrant Edge use
        their own settings).
    peers : list of str or None
        Which peer baselines to measure: the built-in ones by name (``faiss:HNSW32,SQ8``,
        ``faiss:OPQ48,PQ48np``, ``qdrant-edge:quant=sq8``, ``st:int8``, ``st:binary``...) or any
        other store spec (e.g. ``faiss:IVF4096,PQ48,nprobe=64``) built on the full vectors; None
        measures the built-in ones.
    rescore_peers : bool
        Also measure the FAISS peers (and custom peer specs) with ``k * R`` candidates re-ranked
        by the full vectors on disk, as the reducer rows are (FAISS's "refine", from disk), and
        the Qdrant Edge peers with their own rescoring at ``oversampling=R``, at every depth R of
        ``rescore``. On by default (issue 28: a re-ranked recipe is only compared with re-ranked
        peers); off measures the peers without re-ranking only.
    filtered : list of float
        Filtered-search suite (:mod:`slimvec.benchmarks.filtered`): selectivities in percent of
        the corpus (e.g. 50, 10, 1, 0.1); each recipe of ``filter_recipes`` and the reference
        ``none|qdrant-edge`` is built and searched with ``Index.search(filter=...)``, recall
        against exact filtered truth. Empty (default): not measured.
    filter_recipes : list of str
        Recipes of the filtered-search suite; empty: the default recipe.
    index_recipes : list of str
        Recipes built as index folders by ``migrate`` and measured with ``Index.search`` at their
        own depth and every ``rescore`` R (:mod:`slimvec.benchmarks.recipes`, rows of kind
        ``recipe``): the product measured as users run it.
    measure_rss : bool
        Also measure memory: the process's peak RSS growth during each build and, in a fresh
        child process, the RSS of opening the built store and answering the queries.
    keep_indexes : bool
        Leave the built indexes in ``work_dir``.
    seed : int
    """

    reducers: list[str]
    stores: list[str]
    work_dir: Path
    baselines: bool = True
    rescore: list[int] = field(default_factory=list)
    kmeans: int | None = None
    route_probes: list[int] = field(default_factory=lambda: [1, 4])
    k: int = 10
    latency_queries: int = 200
    latency_repeats: int = 3
    fit_max: int = 20000
    fit_on: str = "corpus"
    threads: int = 1
    build_threads: int = 0
    peers: list[str] | None = None
    rescore_peers: bool = True
    filtered: list[float] = field(default_factory=list)
    filter_recipes: list[str] = field(default_factory=list)
    index_recipes: list[str] = field(default_factory=list)
    measure_rss: bool = False
    keep_indexes: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        self.reducers = ["none"] + [r for r in self.reducers if r.strip().lower() != "none"]
        self.stores = list(self.stores) or ["hnsw"]
        self.work_dir = Path(self.work_dir)
        if any(int(r) < 1 for r in self.rescore):
            raise ConfigError(f"--rescore takes multipliers >= 1, got {self.rescore}.")
        if self.kmeans is not None and self.kmeans < 2:
            raise ConfigError(f"--kmeans takes K >= 2 clusters, got {self.kmeans}.")

    def validate(self) -> None:
        """Check the numbers and parse every spec up front, so a typo fails before hours of work.

        :func:`run_bench` calls this; callers that encode texts first (``slimvec bench``, suites,
        the planner's quick sweep) call it before encoding.

        Raises
        ------
        ConfigError
            A number out of range, an unknown reducer or store spec (the message lists valid names).
        """
        from slimvec.connectors import parse_store_spec
        from slimvec.reducers import make_reducer

        for name, value, low in (("k", self.k, 1), ("latency_queries", self.latency_queries, 1),
                                 ("latency_repeats", self.latency_repeats, 1), ("threads", self.threads, 1),
                                 ("fit_max", self.fit_max, 2)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"Bench option {name} must be an integer >= {low}, got {value!r}.")
        if self.fit_on not in ("corpus", "train"):
            raise ConfigError(f"--fit-on must be corpus or train, got {self.fit_on!r}.")
        if any(int(p) < 1 for p in self.route_probes):
            raise ConfigError(f"--route-probes takes cluster counts >= 1, got {self.route_probes}.")
        if isinstance(self.build_threads, bool) or not isinstance(self.build_threads, int) \
                or self.build_threads < 0:
            raise ConfigError(f"Bench option build_threads must be an integer >= 0 (0 = every core), "
                              f"got {self.build_threads!r}.")
        if self.peers is not None:
            st_labels = {label for label, _, _ in ST_VARIANTS}
            for peer in self.peers:
                if peer.startswith("st:") and peer not in st_labels:
                    raise ConfigError(f"Unknown sentence-transformers peer {peer!r}; known: "
                                      f"{', '.join(sorted(st_labels))}.")
                if not peer.startswith("st:"):
                    parse_store_spec(peer)

        for sel in self.filtered:
            if isinstance(sel, bool) or not isinstance(sel, (int, float)) or not 0.1 <= sel <= 100:
                raise ConfigError(f"Bench option filtered takes selectivities in percent, 0.1 to 100 "
                                  f"(e.g. [50, 10, 1, 0.1]), got {sel!r}.")
        if self.filter_recipes or self.index_recipes:
            from slimvec.recipe import parse_recipe

            for recipe in [*self.filter_recipes, *self.index_recipes]:
                parse_recipe(recipe)
        for spec in self.reducers:
            make_reducer(spec)
        for spec in self.stores:
            parse_store_spec(spec)

    def n_steps(self, n_datasets: int) -> int:
        """Units of work for the progress bar: one per (dataset, reducer, store/extra)."""
        per_reducer = len(self.stores) + (1 if self.kmeans else 0)
        peers = (len(self._peer_variants(384)) + len(self._st_variants())) if self.baselines else 0
        filtered = (len(self.filter_recipes) or 1) + 1 if self.filtered else 0
        return n_datasets * (len(self.reducers) * per_reducer + peers + filtered + len(self.index_recipes))


    def _peer_variants(self, dim: int) -> list[StoreVariant]:
        """The peer store variants this run measures for vectors of ``dim`` (a built-in PQ peer
        named for another dimension, ``faiss:PQ48np`` on 50-d vectors, is that peer at ``dim``)."""
        builtin = peer_store_variants(dim, self.rescore if self.rescore_peers else ())
        if self.peers is None:
            return builtin
        by_spec = {v.spec: v for v in builtin}
        by_family = {_pq_family(v.spec): v for v in builtin}
        out = []
        for peer in self.peers:
            if peer.startswith("st:"):
                continue
            # a built-in peer by its name; a PQ peer whose m does not divide ``dim`` is the
            # built-in one of that family at ``dim`` (OPQ24 on 384-d stays OPQ24)
            fits = not peer.startswith("faiss:") or _pq_fits(peer, dim)
            out.append(by_spec.get(peer) or (None if fits else by_family.get(_pq_family(peer)))
                       or StoreVariant(peer, rescorable=True))
        return _share_builds(out)

    def _st_variants(self) -> list[tuple[str, str, int | None]]:
        """The sentence-transformers quantization peers this run measures."""
        return [v for v in ST_VARIANTS if self.peers is None or v[0] in self.peers]


#: search-time options of each store: peers that differ only in these are one build searched
#: several ways (``hnsw``, ``hnsw:ef=128`` and ``hnsw:ef=256`` build one graph)
_SEARCH_TIME = {"hnsw": ("ef",), "faiss": ("ef", "nprobe", "qb")}


def _share_builds(variants: list[StoreVariant]) -> list[StoreVariant]:
    """Variants whose specs differ only in search-time options, merged into the first of them:
    one build, one row label per search (each label keeps its spec, so rows read as before)."""
    from slimvec.connectors import parse_store_spec
    from slimvec.specs import format_spec

    out: list[StoreVariant] = []
    first: dict[str, StoreVariant] = {}
    for v in variants:
        parsed = parse_store_spec(v.spec)
        keys = _SEARCH_TIME.get(parsed.name)
        if not keys or v.searches != [(v.spec, {})]:  # built-in Qdrant variants search their own way
            out.append(v)
            continue
        build = format_spec(parsed.name, parsed.arg, {k: x for k, x in parsed.options.items() if k not in keys})
        params = {k: x for k, x in parsed.options.items() if k in keys}
        if build in first:
            first[build].searches.append((v.spec, params))
            continue
        merged = StoreVariant(build, [(v.spec, params)], v.rescorable)
        first[build] = merged
        out.append(merged)
    return out


def _pq_family(spec: str) -> str:
    """``faiss:PQ48np`` and ``faiss:PQ32np`` are the same peer at another dimension."""
    import re

    return re.sub(r"\d+", "#", spec) if spec.startswith("faiss:") and "PQ" in spec else spec


def lossy(store: str) -> bool:
    """The store keeps lossy codes of the vectors (SQ, PQ, RaBitQ, Qdrant ``quant=``): a
    full-dimension row on it is re-ranked from the full vectors too, like the reduced rows (only
    an exact store at full dimension has nothing to gain)."""
    from slimvec.connectors import parse_store_spec, store_class

    parsed = parse_store_spec(store)
    return store_class(parsed).quantization_label(parsed.arg, dict(parsed.options or {})) not in ("float32", "none")


def _pq_fits(spec: str, dim: int) -> bool:
    """Every PQ / OPQ sub-quantizer count of a FAISS peer spec divides ``dim``."""
    import re

    return all(dim % int(m) == 0 for m in re.findall(r"PQ(\d+)", spec))
