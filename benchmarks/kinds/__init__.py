"""Measurements beyond ``slimvec bench``'s recall grid: one module per family (in the checkout).

``slimvec bench --suite FILE`` measures reducers × stores on vectors (:mod:`slimvec.benchmarks.runner`).
What it cannot measure — whole commands against each other, a running server, the encoder's
ceiling, store sizes, the Ray engine, pruned encoders — is measured here, each family in its own
module and each reachable as ``python -m benchmarks KIND`` (:mod:`benchmarks.cli`):

========================  ==============================================  ==========================
``python -m benchmarks``  what it measures                                module
========================  ==============================================  ==========================
``ingest``                ingest docs/s per store, bytes, p50 search       :mod:`.ingest`
``ingest-ceiling``        ingest against the best encoder-only run         :mod:`.ingest`
``rebuild``               ``slimvec rebuild`` against a re-ingest           :mod:`.lifecycle`
``sync``                  ``ingest --sync`` against a full re-ingest        :mod:`.lifecycle`
``service``               ``slimvec serve`` under bounded load              :mod:`.service`
``qdrant-compat``         the Qdrant-compatible API through qdrant-client   :mod:`.service`
``sizing``                store size models: constants and errors           :mod:`.sizing_page`
``scaleout``              the Ray engine against one process                :mod:`.scaleout`
``pruning``               SparseCSE sparsity sweep                          :mod:`.pruning`
``table KIND RESULTS``    a docs page / table from a run's results          :mod:`benchmarks.pages.tables`
``vectors KIND NPY``      the vector corpus a suite reads                   :mod:`benchmarks.corpora.sentences`
``search-profile``        the default recipe's search, stage by stage       :mod:`.search_profile`
``default-recipe``        candidate recipes against full HNSW by size       :mod:`.recipe_choice`
========================  ==============================================  ==========================

Every measurement writes one JSON record (:mod:`slimvec.benchmarks.record`): the figures plus the machine facts
(cores, load average before and after, the CPU other processes used meanwhile, a ``quiet`` flag)
and the command that produced them; a suite run's ``results.json`` carries the same facts in
``meta["machine"]``.
"""

from __future__ import annotations

__all__: list[str] = []
