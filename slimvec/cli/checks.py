"""Input checks and interruption messages shared by the CLI commands (no tracebacks for users)."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from slimvec.errors import ConfigError
from slimvec.ranges import check_int, check_number

__all__ = ["check_positive", "check_bench_inputs", "interrupt_message", "int_range", "number_range",
           "byte_size", "rerun_command"]


def _option_name(param: typer.CallbackParam) -> str:
    longs = [o for o in param.opts if o.startswith("--")]
    return longs[0] if longs else (param.opts[0] if param.opts else str(param.name))


def int_range(low: int | None = None, high: int | None = None, hint: str = "") -> Callable[..., Any]:
    """A typer option callback refusing an integer outside ``[low, high]`` while the options are
    parsed (before the command does any work): a one-line :class:`ConfigError` naming the option,
    the range and the value (``slimvec.cli.main`` prints it, exit code 2). ``None`` (an optional
    option not given) passes; a list option (repeatable) is checked item by item."""
    def callback(param: typer.CallbackParam, value: Any) -> Any:
        name = _option_name(param)
        for v in (value if isinstance(value, (list, tuple)) else [value]):
            if v is not None:
                check_int(name, v, low=low, high=high, hint=hint)
        return value
    return callback


def number_range(low: float | None = None, high: float | None = None, *, low_open: bool = False,
                 high_open: bool = False, hint: str = "") -> Callable[..., Any]:
    """As :func:`int_range` for a float option; NaN and infinities are refused too."""
    def callback(param: typer.CallbackParam, value: Any) -> Any:
        name = _option_name(param)
        for v in (value if isinstance(value, (list, tuple)) else [value]):
            if v is not None:
                check_number(name, v, low=low, high=high, low_open=low_open, high_open=high_open, hint=hint)
        return value
    return callback


def byte_size(param: typer.CallbackParam, value: Any) -> Any:
    """Typer option callback: a size option (``2GiB``) must parse
    (:func:`~slimvec.planner.plan.parse_bytes`) while the options are parsed."""
    if value is not None:
        from slimvec.planner.plan import parse_bytes

        parse_bytes(value, what=_option_name(param))
    return value


def check_positive(option: str, value: int, hint: str = "") -> None:
    """Refuse ``value < 1`` for ``option`` with a one-line :class:`ConfigError`."""
    if value < 1:
        raise ConfigError(f"{option} must be a positive integer, got {value}"
                          + (f" {hint}" if hint else "") + ".")


def check_bench_inputs(vectors: Path | None) -> None:
    """Point ``--vectors FILE.hdf5`` (or a folder) to ``--dataset``, which reads those."""
    if vectors is None:
        return
    if vectors.suffix.lower() in (".hdf5", ".h5") or vectors.is_dir():
        raise ConfigError(
            f"--vectors {vectors}: --vectors takes a .npy or Parquet file of corpus vectors; an "
            "ann-benchmarks .hdf5 file or a VectorDBBench folder is read with --dataset "
            f"{vectors} (it brings its own queries and ground truth)."
        )


def rerun_command(ctx: typer.Context, drop: Iterable[str] = ()) -> str:
    """The running command as the user gave it, shell-quoted: what "resume with the same command"
    prints.

    Built from the command's context (``ctx``): every argument and every option given on the
    command line or through the environment, in the command's own order, each value quoted with
    :mod:`shlex`, so pasting it reruns the same build (``--text-column``, ``--payload-index``,
    ...). Options named in ``drop`` (parameter names, e.g. ``rebuild``: a resume must not delete
    what was committed) are left out.
    """
    names: list[str] = []
    outer: Any = ctx  # "slimvec ingest", also under ``python -m slimvec``
    while outer.parent is not None:
        names.insert(0, str(outer.info_name))
        outer = outer.parent
    words = ["slimvec", *names]
    for param in ctx.command.params:
        name = str(param.name)
        source = ctx.get_parameter_source(name)
        if name in drop or getattr(source, "name", None) not in ("COMMANDLINE", "ENVIRONMENT"):
            continue
        value = ctx.params.get(name)
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if param.param_type_name == "argument":
            words += [str(v) for v in values]
            continue
        flag = _option_name(param)  # type: ignore[arg-type]  # an option: the names it reads
        if getattr(param, "is_flag", False):
            words.append(flag if value else (getattr(param, "secondary_opts", None) or [flag])[0])
            continue
        for v in values:
            words += [flag, str(v)]
    return shlex.join(words)


@contextmanager
def interrupt_message(index: Path, command: str) -> Iterator[None]:
    """Turn Ctrl-C outside the commit loop (sampling, encoding, fitting) into a message + exit 130.

    The commit loop handles SIGINT itself (the command's summary says what was committed); an
    interrupt before it, e.g. during the reducer fit, raises KeyboardInterrupt, which lands here.
    """
    try:
        yield
    except KeyboardInterrupt:
        from slimvec.index.folder import MANIFEST

        console = Console(stderr=True)
        command = escape(command)
        if (index / MANIFEST).exists():
            console.print(f"[bold yellow]interrupted[/]: work committed to {index} is kept. Resume "
                          f"with the same command: {command}", soft_wrap=True, highlight=False)
        else:
            console.print(f"[bold yellow]interrupted[/] before the first commit (while sampling, "
                          f"encoding or fitting the reducer): nothing is in the index yet. Start "
                          f"over with the same command: {command} ; or abort: delete {index}.",
                          soft_wrap=True, highlight=False)
        raise typer.Exit(130) from None
