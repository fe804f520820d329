"""Sentence-pair TSV files: strict row validation and the corpus / duplicate / STS views of them.

A pairs file is UTF-8 ``sentence1<TAB>sentence2<TAB>score`` with an optional header line, like the
files in ``slimvec/data``. A malformed row (wrong column count, non-numeric or non-finite score,
empty sentence) raises :class:`~slimvec.errors.ConfigError` naming the file and line, or is skipped
and counted when ``skip_bad_rows`` is true.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from slimvec.errors import ConfigError

__all__ = ["PairsFile", "PairsCorpus", "load_pairs", "build_corpus", "build_train_pairs", "TrainPairs"]

log = logging.getLogger(__name__)

_HEADER_SCORE_NAMES = {"score", "label", "similarity", "gold", "quality"}


@dataclass
class PairsFile:
    """The valid rows of one pairs file.

    Attributes
    ----------
    path : Path
    name : str
        File stem, used as a label in results (``stsb-test``).
    s1, s2 : list of str
        The two sides of every valid pair.
    scores : ndarray of float64
        Gold score of every valid pair.
    skipped : int
        Malformed rows skipped (only with ``skip_bad_rows``).
    """

    path: Path
    name: str
    s1: list[str]
    s2: list[str]
    scores: np.ndarray
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.s1)


def _is_header(parts: list[str]) -> bool:
    if len(parts) != 3:
        return False
    try:
        float(parts[2])
        return False
    except ValueError:
        return parts[2].strip().lower() in _HEADER_SCORE_NAMES


def load_pairs(path: str | os.PathLike[str], *, skip_bad_rows: bool = False) -> PairsFile:
    """Read a ``sentence1<TAB>sentence2<TAB>score`` file.

    Parameters
    ----------
    path : path-like
        The TSV file. A first line whose third column is ``score`` (or ``label``...) is a header.
    skip_bad_rows : bool, default False
        Skip and count malformed rows instead of raising.

    Returns
    -------
    PairsFile

    Raises
    ------
    ConfigError
        The file is missing or unreadable, a row is malformed (message: ``FILE:LINE: ...``), or
        no valid row remains.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"Pairs file {path} does not exist. Pass an existing "
                          "sentence1<TAB>sentence2<TAB>score file to --pairs / --train-pairs.")
    s1: list[str] = []
    s2: list[str] = []
    scores: list[float] = []
    skipped = 0
    hint = " Fix the row, or pass --skip-bad-rows to skip and count malformed rows."
    try:
        fh = open(path, encoding="utf-8", newline="")
    except OSError as exc:
        raise ConfigError(f"Cannot read pairs file {path}: {exc}.") from exc
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            parts = line.split("\t")
            if lineno == 1 and _is_header(parts):
                continue
            problem = None
            if len(parts) != 3:
                problem = (f"expected 3 tab-separated columns (sentence1, sentence2, score), "
                           f"got {len(parts)}")
            else:
                a, b, sc = parts[0].strip(), parts[1].strip(), parts[2].strip()
                try:
                    value = float(sc)
                except ValueError:
                    value = None
                if value is None or not math.isfinite(value):
                    problem = f"score {sc!r} is not a finite number"
                elif not a or not b:
                    problem = f"sentence{1 if not a else 2} is empty"
            if problem is not None:
                if skip_bad_rows:
                    skipped += 1
                    log.debug("%s:%d: skipped: %s", path, lineno, problem)
                    continue
                raise ConfigError(f"{path}:{lineno}: {problem}.{hint}")
            s1.append(a)
            s2.append(b)
            scores.append(value)
    if skipped:
        log.warning("%s: skipped %d malformed row(s)", path, skipped)
    if not s1:
        raise ConfigError(f"Pairs file {path} holds no valid sentence1<TAB>sentence2<TAB>score row.")
    return PairsFile(path, path.stem, s1, s2, np.asarray(scores, dtype=np.float64), skipped)


@dataclass
class PairsCorpus:
    """The evaluation view of one or more pairs files.

    Attributes
    ----------
    texts : list of str
        The corpus: unique sentences of all files, in first-seen order.
    pair_a, pair_b : ndarray of int64
        Corpus rows of the two sides of every pair (all files, file order).
    scores : ndarray of float64
        Gold score of every pair.
    pair_file : ndarray of int64
        Index into ``files`` of every pair.
    files : list of str
        File names (stems).
    dup_threshold : float
        Pairs with ``score >= dup_threshold`` and two different sentences are duplicates.
    skipped : int
        Malformed rows skipped over all files.
    """

    texts: list[str]
    pair_a: np.ndarray
    pair_b: np.ndarray
    scores: np.ndarray
    pair_file: np.ndarray
    files: list[str]
    dup_threshold: float
    skipped: int = 0
    paths: list[str] = field(default_factory=list)

    @property
    def dup_mask(self) -> np.ndarray:
        """Boolean mask of duplicate pairs (score over the threshold, two distinct sentences)."""
        return (self.scores >= self.dup_threshold) & (self.pair_a != self.pair_b)

    def dup_pairs(self) -> np.ndarray:
        """(n_dup, 2) corpus rows of the duplicate pairs."""
        m = self.dup_mask
        return np.stack([self.pair_a[m], self.pair_b[m]], axis=1)

    def file_pairs(self, name: str) -> np.ndarray:
        """Indices of the pairs that come from file ``name``."""
        try:
            i = self.files.index(name)
        except ValueError as exc:
            raise ConfigError(f"No pairs file named {name!r}. Loaded: {', '.join(self.files)}.") from exc
        return np.flatnonzero(self.pair_file == i)


def build_corpus(files: Sequence[PairsFile], dup_threshold: float = 4.0) -> PairsCorpus:
    """Union of unique sentences of ``files`` and the pairs as corpus rows."""
    if not files:
        raise ConfigError("No pairs files given: pass at least one --pairs FILE.tsv.")
    row: dict[str, int] = {}
    pa: list[int] = []
    pb: list[int] = []
    pf: list[int] = []
    scores: list[np.ndarray] = []
    for fi, pfile in enumerate(files):
        for a, b in zip(pfile.s1, pfile.s2):
            pa.append(row.setdefault(a, len(row)))
            pb.append(row.setdefault(b, len(row)))
            pf.append(fi)
        scores.append(pfile.scores)
    return PairsCorpus(
        texts=list(row),
        pair_a=np.asarray(pa, dtype=np.int64),
        pair_b=np.asarray(pb, dtype=np.int64),
        scores=np.concatenate(scores),
        pair_file=np.asarray(pf, dtype=np.int64),
        files=[f.name for f in files],
        dup_threshold=float(dup_threshold),
        skipped=sum(f.skipped for f in files),
        paths=[str(f.path) for f in files],
    )


@dataclass
class TrainPairs:
    """Training pairs for reducers that learn from pairs (never the evaluation pairs).

    Attributes
    ----------
    texts : list of str
        Unique sentences of the training files.
    pairs : ndarray of int64, shape (n, 2)
        Rows of ``texts`` forming positive (score >= threshold) pairs.
    dropped_overlap : int
        Training pairs removed because the same pair is also an evaluation pair.
    """

    texts: list[str]
    pairs: np.ndarray
    dropped_overlap: int = 0


def build_train_pairs(files: Sequence[PairsFile], threshold: float,
                      eval_corpus: PairsCorpus | None = None) -> TrainPairs:
    """Positive pairs of the training files, minus any pair that is also an evaluation pair."""
    eval_keys: set[frozenset[str]] = set()
    if eval_corpus is not None:
        t = eval_corpus.texts
        eval_keys = {frozenset((t[a], t[b])) for a, b in zip(eval_corpus.pair_a, eval_corpus.pair_b)}
    row: dict[str, int] = {}
    pairs: list[tuple[int, int]] = []
    dropped = 0
    for pfile in files:
        for a, b, s in zip(pfile.s1, pfile.s2, pfile.scores):
            if s < threshold or a == b:
                continue
            if frozenset((a, b)) in eval_keys:
                dropped += 1
                continue
            pairs.append((row.setdefault(a, len(row)), row.setdefault(b, len(row))))
    if dropped:
        log.warning("dropped %d training pair(s) that are also evaluation pairs", dropped)
    arr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return TrainPairs(list(row), arr, dropped)
