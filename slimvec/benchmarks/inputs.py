"""What a benchmark run reads (pairs, vectors, datasets), validated once, and the run as one call.

``slimvec bench``, ``slimvec bench --suite`` and the planner's quick sweep all go through
:func:`bench_to_folder`, so they validate the same way and write the same ``results.json`` and
``report.md``::

    inputs = BenchInputs(vectors=Path("vecs.npy"))
    config = BenchConfig(reducers=["pca:96"], stores=["hnsw"], work_dir=Path("/tmp/w"))
    rows, meta, results = bench_to_folder(inputs, config, "out")
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slimvec.benchmarks.datasets import BenchDataset
from slimvec.benchmarks.runner import BenchConfig, Progress, run_bench, write_results
from slimvec.errors import ConfigError
from slimvec.planner.rows import Row

__all__ = ["BenchInputs", "bench_to_folder"]

log = logging.getLogger(__name__)


@dataclass
class BenchInputs:
    """The data of one run (the ``--pairs`` / ``--vectors`` / ``--dataset`` options of ``bench``).

    Attributes
    ----------
    pairs, train_pairs : list of Path
        ``sentence1<TAB>sentence2<TAB>score`` files: the corpus, and pairs that train
        pair-learning reducers.
    vectors, queries : Path or None
        Precomputed corpus vectors (.npy / Parquet) and optional query vectors.
    datasets : list of Path
        ann-benchmarks .hdf5 files or VectorDBBench folders.
    encoders : list of str
        Encoders for ``pairs`` (``minilm`` or a model folder); empty: the packaged MiniLM.
    dup_threshold, skip_bad_rows, sts_file, metric, max_queries, cache, seed
        As the ``bench`` options of the same names.
    """

    pairs: list[Path] = field(default_factory=list)
    train_pairs: list[Path] = field(default_factory=list)
    vectors: Path | None = None
    queries: Path | None = None
    datasets: list[Path] = field(default_factory=list)
    encoders: list[str] = field(default_factory=list)
    dup_threshold: float = 4.0
    skip_bad_rows: bool = False
    sts_file: str | None = None
    metric: str = "cosine"
    max_queries: int = 2000
    cache: Path | None = None
    seed: int = 0

    def validate(self) -> None:
        """Fail with a clear message before any encoding.

        Raises
        ------
        ConfigError
            Nothing to bench, ``queries`` without ``vectors``, encoders without pairs, a bad
            metric or query count.
        """
        if not self.pairs and self.vectors is None and not self.datasets:
            raise ConfigError("Nothing to bench: give --pairs FILE.tsv (repeatable), --vectors FILE or "
                              "--dataset FILE.hdf5|FOLDER.")
        if self.queries is not None and self.vectors is None:
            raise ConfigError("--queries needs --vectors (the corpus the queries search).")
        if self.encoders and not self.pairs:
            raise ConfigError("--encoder applies to --pairs (texts to encode); --vectors and --dataset "
                              "are already vectors.")
        if self.metric not in ("cosine", "l2"):
            raise ConfigError(f"--metric must be cosine or l2, got {self.metric!r}.")
        if self.max_queries < 1:
            raise ConfigError(f"--max-queries must be at least 1, got {self.max_queries}.")

    def load(self, on_progress: Callable[[int], None] | None = None) -> list[BenchDataset]:
        """Read (and encode, through the encoding cache) every dataset."""
        from slimvec.benchmarks.datasets import from_vectors, load_dataset_path, pairs_datasets

        self.validate()
        out: list[BenchDataset] = []
        if self.pairs:
            out += pairs_datasets(
                self.pairs, self.encoders or [None], train_pairs=self.train_pairs,
                dup_threshold=self.dup_threshold, skip_bad_rows=self.skip_bad_rows, cache_dir=self.cache,
                max_queries=self.max_queries, seed=self.seed, sts_file=self.sts_file, on_progress=on_progress)
        if self.vectors is not None:
            out.append(from_vectors(self.vectors, self.queries, metric=self.metric,
                                    max_queries=self.max_queries, seed=self.seed))
        for path in self.datasets:
            out.append(load_dataset_path(path, max_queries=self.max_queries))
        return out


def bench_to_folder(inputs: BenchInputs, config: BenchConfig, out: str | Path, *,
                    progress: Progress | None = None, on_encode: Callable[[int], None] | None = None,
                    on_datasets: Callable[[list[BenchDataset]], None] | None = None,
                    command: str | None = None, report: bool = True,
                    extra_meta: dict[str, Any] | None = None) -> tuple[list[Row], dict[str, Any], Path]:
    """Validate, load, measure, and write ``out/results.json`` (and ``report.md``).

    Parameters
    ----------
    inputs : BenchInputs
    config : BenchConfig
    out : path
        Output folder (created).
    progress : callable, optional
        The runner's progress callback (see :func:`run_bench`).
    on_encode : callable, optional
        Called with the number of texts encoded, while encoding.
    on_datasets : callable, optional
        Called with the loaded datasets before measuring (e.g. to print them).
    command : str, optional
        Recorded in ``meta["command"]`` (the command that reproduces the run).
    report : bool
        Also write ``report.md`` (the web page and the plots: ``python -m benchmarks report``
        in a checkout).
    extra_meta : dict, optional
        Merged into the meta (e.g. the suite file).

    Returns
    -------
    rows, meta, results_path
    """
    started = time.time()
    inputs.validate()
    config.validate()  # an unknown spec fails before any encoding
    datasets = inputs.load(on_encode)
    if on_datasets is not None:
        on_datasets(datasets)
    rows, meta = run_bench(datasets, config, progress)
    if command:
        meta["command"] = command
    meta.update(extra_meta or {})
    # wall_s is the whole run's (issue 27 item 8: the page said 46.6 s for a 2 min 56 s run, as it
    # stopped before the report and the planner's size builds); measure_s is the measuring alone
    meta["measure_s"] = round(time.time() - started, 1)
    meta["wall_s"] = meta["measure_s"]
    Path(out).mkdir(parents=True, exist_ok=True)
    results = write_results(rows, meta, out)
    if report:
        from slimvec.benchmarks.report import write_report

        write_report(results, out)
    meta["wall_s"] = round(time.time() - started, 1)
    write_results(rows, meta, out)
    return rows, meta, results
