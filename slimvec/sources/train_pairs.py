"""Training pairs for pair-learning reducers (``slimvec ingest --train-pairs FILE.tsv``)."""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np

from slimvec.errors import ConfigError

__all__ = ["fit_reducer", "POSITIVE_FRACTION"]

log = logging.getLogger(__name__)

#: A pair is positive when its score is at least this fraction of the file's highest score
#: (4.0 of 5 for STS-B / SICK, 0.8 -> 1 for MSRP's 0/1 labels).
POSITIVE_FRACTION = 0.8


def fit_reducer(reducer: Any, X: np.ndarray, train_pairs: str | os.PathLike[str] | None,
                encoder: Any, batch_size: int = 256) -> Any:
    """Fit ``reducer`` on ``X``, adding the positive pairs of ``train_pairs`` when given.

    Parameters
    ----------
    reducer : Reducer
        Unfitted reducer.
    X : ndarray of shape (n, dim)
        Encoded fit sample.
    train_pairs : path or None
        ``sentence1<TAB>sentence2<TAB>score`` file (header optional). Its positive pairs are
        encoded and appended to ``X``; the reducer is fitted with ``pairs=`` their row indices.
    encoder : Encoder
        Encodes the pair sentences (the same encoder as the documents).
    batch_size : int

    Returns
    -------
    Reducer
        The fitted reducer.

    Raises
    ------
    ConfigError
        Pairs given to a reducer that does not learn from pairs, or a file without positives.
    """
    if train_pairs is None:
        return reducer.fit(X)
    if not getattr(reducer, "learns_from_pairs", False):
        raise ConfigError(
            f"--train-pairs {train_pairs}: reducer {reducer.name!r} does not learn from pairs. "
            "Drop --train-pairs or choose a pair-learning reducer (mcr2)."
        )
    from slimvec.sources.pairs import build_train_pairs, load_pairs

    pfile = load_pairs(train_pairs, skip_bad_rows=True)
    top = float(np.max(pfile.scores)) if len(pfile) else 0.0
    tp = build_train_pairs([pfile], threshold=POSITIVE_FRACTION * top)
    if len(tp.pairs) < 2:
        raise ConfigError(
            f"--train-pairs {train_pairs}: {len(tp.pairs)} positive pair(s) (score >= "
            f"{POSITIVE_FRACTION} x the highest score {top:g}); at least 2 are needed. "
            "Use a file of similar-sentence pairs with scores."
        )
    texts = tp.texts
    P = np.concatenate([encoder.encode(texts[i:i + batch_size])
                        for i in range(0, len(texts), batch_size)])
    log.info("fitting %s on %d sample vectors + %d pair sentences (%d positive pairs)",
             reducer.name, len(X), len(P), len(tp.pairs))
    return reducer.fit(np.concatenate([X, P]), pairs=tp.pairs + len(X))
