"""The ``slimvec`` command line: thin wrappers that parse options and call the library.

Commands live in small modules (``index_cmds``: ingest, search, info; ``bench``: bench, plan;
``prune``; ``migrate``) and are registered here.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys

import typer

from slimvec.errors import SlimvecError

__all__ = ["app", "main"]

app = typer.Typer(
    name="slimvec",
    help="Shrink sentence embeddings with a fitted reducer in front of Qdrant, FAISS or hnswlib.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # help texts are plain text: rich markup would eat every hand-written "[default: ...]" and
    # "slimvec[ray]" (issue 27 item 4)
    rich_markup_mode=None,
    context_settings={"max_content_width": 120},
)

#: (module, function, command name); modules that are absent are skipped
_COMMANDS = [
    ("slimvec.cli.index_cmds", "ingest", "ingest"),
    ("slimvec.cli.index_cmds", "search", "search"),
    ("slimvec.cli.index_cmds", "info", "info"),
    ("slimvec.cli.index_cmds", "calibrate", "calibrate"),
    ("slimvec.cli.bench", "bench", "bench"),
    ("slimvec.cli.plan", "plan", "plan"),
    ("slimvec.cli.migrate", "migrate", "migrate"),
    ("slimvec.cli.migrate", "export", "export"),
    ("slimvec.cli.prune", "prune", "prune"),
    ("slimvec.cli.report", "report", "report"),
    ("slimvec.cli.tune", "tune", "tune"),
    ("slimvec.cli.serve", "serve", "serve"),
]


def _register() -> None:
    for module, func, name in _COMMANDS:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                continue
            raise
        app.command(name)(getattr(mod, func))


@app.callback()
def _root(verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging.")) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


_register()


def main() -> None:
    """Entry point: run the app, turning slimvec errors into a one-line message and exit code 2."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        app()
    except SlimvecError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.secho("interrupted", err=True)
        sys.exit(130)
