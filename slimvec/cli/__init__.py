"""The ``slimvec`` command line: thin wrappers that parse options and call the library.

Commands live in small modules (``index_cmds``: ingest, search, info; ``bench``: bench, plan;
``prune``; ``migrate``) and are registered here.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import sys
from typing import Any

import typer
from typer.core import TyperCommand

from slimvec.errors import SlimvecError

__all__ = ["app", "main", "PlainUsage"]

_app = typer.Typer(
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

class PlainUsage(TyperCommand):
    """A command whose usage line names its arguments as help texts do (``INPUT``, ``[QUERY]...``):
    typer wraps a required one in braces (``{input}``), which reads as an unrendered template
    (issue 52)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:  # typer vendors the click Context
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name != "argument":
                pieces += param.get_usage_pieces(ctx)
                continue
            name = str(param.metavar or param.name).upper()
            pieces.append((name if param.required else f"[{name}]") + ("..." if param.nargs != 1 else ""))
        return pieces


#: (module, function, command name); an absent module makes every command fail (see _MISSING)
_COMMANDS = [
    ("slimvec.cli.index_cmds", "ingest", "ingest"),
    ("slimvec.cli.index_cmds", "search", "search"),
    ("slimvec.cli.index_cmds", "info", "info"),
    ("slimvec.cli.index_cmds", "calibrate", "calibrate"),
    ("slimvec.cli.bench", "bench", "bench"),
    ("slimvec.cli.plan", "plan", "plan"),
    ("slimvec.cli.migrate", "migrate", "migrate"),
    ("slimvec.cli.migrate", "export", "export"),
    ("slimvec.cli.rebuild", "rebuild", "rebuild"),
    ("slimvec.cli.prune", "prune", "prune"),
    ("slimvec.cli.tune", "tune", "tune"),
    ("slimvec.cli.serve", "serve", "serve"),
    ("slimvec.cli.snapshot", "snapshot", "snapshot"),
    ("slimvec.cli.snapshot", "restore", "restore"),
    ("slimvec.cli.lifecycle", "delete", "delete"),
    ("slimvec.cli.lifecycle", "update", "update"),
    ("slimvec.cli.lifecycle", "get", "get"),
    ("slimvec.cli.lifecycle", "scroll", "scroll"),
    ("slimvec.cli.lifecycle", "compact", "compact"),
]


#: commands whose module is absent: a broken installation, refused loudly by every command
_MISSING: list[tuple[str, str]] = []
_REGISTERED: set[str] = set()


def _register(names: set[str] | None = None) -> None:
    """Add the commands ``names`` (None: all) to the app, importing their modules."""
    for module, func, name in _COMMANDS:
        if name in _REGISTERED:
            continue
        if names is not None and name not in names:  # not imported; an absent one still refused
            try:
                found = importlib.util.find_spec(module) is not None
            except ModuleNotFoundError:
                found = False
            if not found and (name, module) not in _MISSING:
                _MISSING.append((name, module))
            continue
        _REGISTERED.add(name)
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            _MISSING.append((name, module))
            continue
        command = getattr(mod, func)
        if isinstance(command, typer.Typer):  # a group (bench: the suite run and its measurements)
            _app.add_typer(command, name=name)
            continue
        _app.command(name, cls=PlainUsage)(command)


def _asked(args: list[str]) -> set[str] | None:
    """The command ``args`` name, when they name one (None: all, for --help, no command or an
    unknown name). typer builds every registered command's options on each call, and their
    modules import what they need: ``slimvec info`` spent 0.3 s of its 1 s on the others."""
    words = [a for a in args if not a.startswith("-")]
    return {words[0]} if words and words[0] in {c[2] for c in _COMMANDS} else None


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # the whole app (tests, docs): every command registered
        _register()
        return _app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _missing_message() -> str | None:
    if not _MISSING:
        return None
    which = ", ".join(f"'{name}' ({module})" for name, module in _MISSING)
    return (f"slimvec is installed incompletely: the module of command {which} is missing. "
            "Reinstall slimvec (pip install --force-reinstall slimvec, or pip install -e . in a "
            "checkout).")


@_app.callback()
def _root(verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging.")) -> None:
    missing = _missing_message()
    if missing:
        raise SlimvecError(missing)
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


def main(argv: list[str] | None = None) -> None:  # argv: after `slimvec` [default: sys.argv[1:]]
    """Entry point: run the app, turning slimvec errors into a one-line message and exit code 2."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args = sys.argv[1:] if argv is None else list(argv)
    _register(_asked(args))
    missing = _missing_message()
    if missing:  # before typer: --help would list the other commands and exit 0
        typer.secho(f"error: {missing}", fg=typer.colors.RED, err=True)
        sys.exit(2)
    try:
        _app(args=args)
    except SlimvecError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.secho("interrupted", err=True)
        sys.exit(130)
