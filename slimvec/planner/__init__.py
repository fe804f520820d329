"""The planner: store size models (:mod:`.sizing`), the one ranking rule (:mod:`.ranking`), plan
candidates (:mod:`.candidates`), latency at another size (:mod:`.latency`), ``slimvec plan``
(:mod:`.plan`) and ``slimvec tune`` (:mod:`.tune`).

It holds the row type the harness writes and it plans from (:mod:`.rows`), and is what
``report.md``, the checkout's ``report.html`` and the Ray engine's plan rank and size with; it is
not the harness (``slimvec/benchmarks/``, above it) and never imports it.
"""
