"""Input checks and interruption messages shared by the CLI commands (no tracebacks for users)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import typer
from rich.console import Console

from slimvec.errors import ConfigError

__all__ = ["check_positive", "check_bench_inputs", "interrupt_message"]

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


@contextmanager
def interrupt_message(index: Path, command: str) -> Iterator[None]:
    """Turn Ctrl-C outside the commit loop (sampling, encoding, fitting) into a message + exit 130.

    The commit loop handles SIGINT itself (the command's summary says what was committed); an
    interrupt before it, e.g. during the reducer fit, raises KeyboardInterrupt, which lands here.
    """
    try:
        yield
    except KeyboardInterrupt:
        from slimvec.indexer.index import MANIFEST

        console = Console(stderr=True)
        if (index / MANIFEST).exists():
            console.print(f"[bold yellow]interrupted[/]: work committed to {index} is kept. Resume "
                          f"with the same command: {command}")
        else:
            console.print(f"[bold yellow]interrupted[/] before the first commit (while sampling, "
                          f"encoding or fitting the reducer): nothing is in the index yet. Start "
                          f"over with the same command: {command}; or abort: delete {index}.")
        raise typer.Exit(130) from None
