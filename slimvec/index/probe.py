"""Open and search an index that came from outside in a child process first (issue 39 F3).

Store engines (FAISS, hnswlib, Qdrant Edge) trust their files: a damaged or hostile graph file
passes every checksum its author recomputed, then segfaults on the first search. A restore
therefore opens the index and runs searches on it in ``python -m slimvec.index.probe FOLDER``;
a crash, a signal, an error or a hang there is :class:`ProbeFailed` (with the reason) here, and
the process that asked (a CLI restore, a service answering other indexes) carries on.

The probe searches with random vectors, wide (``k`` up to 256, without rescoring, which widens
the graph walk) and through the index's own recipe (rescoring over the kept full vectors), then
reads the payloads of what it found: every store file is read. It cannot prove that no other
query ever reaches a damaged part of a file; it proves the index opens and answers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from slimvec.errors import PersistenceError

__all__ = ["probe_index", "ProbeFailed", "PROBE_TIMEOUT"]

#: seconds the child may take to open and search the index (a hang counts as a failure)
PROBE_TIMEOUT = 300.0
_MARK = "slimvec-probe-error: "


class ProbeFailed(PersistenceError):
    """The index crashed, failed or hung in the child process; ``reason`` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def probe_index(folder: str | os.PathLike[str], timeout: float = PROBE_TIMEOUT) -> None:
    """Open ``folder`` and search it in a child process; return when that ends cleanly.

    Raises
    ------
    ProbeFailed
        The child was killed by a signal (e.g. ``SIGSEGV``), raised an error, or ran past
        ``timeout`` seconds.
    """

    env = dict(os.environ)
    here = str(Path(__file__).resolve().parents[2])  # the same slimvec in the child
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    cmd = [sys.executable, "-m", "slimvec.index.probe", os.fspath(folder)]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        raise ProbeFailed(f"did not open and answer a search within {timeout:g} s in a checked "
                          "child process (it hangs)") from None
    if done.returncode == 0:
        return
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        raise ProbeFailed(f"crashed a checked child process that opened and searched it "
                          f"(killed by {name}, exit {128 - done.returncode})")
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith(_MARK)]
    why = lines[-1][len(_MARK):] if lines else (done.stderr.strip().splitlines() or ["?"])[-1]
    raise ProbeFailed(f"fails to open or answer a search ({why[:500]})")


def _exercise(folder: Path) -> None:
    """What the child does: open, search wide and through the recipe, read payloads."""
    import numpy as np

    from slimvec.index.folder import open_index

    with open_index(folder) as idx:
        n = int(idx.store.count())
        queries = np.random.default_rng(0).standard_normal((4, idx.dim_in)).astype(np.float32)
        wide = idx.search(queries, k=max(1, min(n, 256)), rescore=0)
        idx.search(queries[:2], k=max(1, min(n, 10)))
        idx.payloads([int(i) for i in wide.ids.ravel() if i >= 0][:200])


def main(argv: list[str] | None = None) -> int:
    """The child: 0 when the index opened and answered, 3 (and a marked line) on an error."""
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash here is expected: no core file
    args = sys.argv[1:] if argv is None else argv
    try:
        _exercise(Path(args[0]))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which refuses the index
        sys.stderr.write(f"{_MARK}{type(exc).__name__}: {' '.join(str(exc).split())}\n")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
