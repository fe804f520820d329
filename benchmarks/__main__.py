"""``python -m benchmarks KIND ...``: the repository's measurements and page writers (:mod:`benchmarks.cli`)."""

from benchmarks.cli import app

app(prog_name="python -m benchmarks")
