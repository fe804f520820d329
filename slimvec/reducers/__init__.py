"""Reducers: fitted maps from encoder vectors to smaller vectors.

Build one from a spec string with :func:`make_reducer` (``pca:96``), load a saved one with
:func:`load_reducer`. See :mod:`slimvec.reducers.base` for the contract.
"""

from __future__ import annotations

import os

from slimvec.reducers.base import Reducer
from slimvec.reducers.registry import known_reducers, make_reducer, reducer_class

__all__ = ["Reducer", "make_reducer", "load_reducer", "known_reducers", "reducer_class"]


def load_reducer(path: str | os.PathLike[str]) -> Reducer:
    """Load a reducer artifact folder saved with :meth:`Reducer.save`."""
    return Reducer.load(path)
