"""``python -m benchmarks KIND ...``: the repository's measurements and page writers (:mod:`benchmarks.cli`)."""

import sys

import typer

from benchmarks.cli import app
from slimvec.errors import SlimvecError

try:
    app(prog_name="python -m benchmarks", standalone_mode=True)
except SlimvecError as exc:  # one line and exit code 2, as `slimvec` prints its errors
    typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
    sys.exit(2)
