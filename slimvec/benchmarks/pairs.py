"""Pair files for the harness: re-exported from :mod:`slimvec.sources.pairs`.

Pair files (``sentence1, sentence2, score``) are a data source that ingest (``--train-pairs``)
and the harness both read, so they live with the sources; this module keeps the old import path.
"""

from slimvec.sources.pairs import *  # noqa: F401,F403
from slimvec.sources.pairs import __all__  # noqa: F401
