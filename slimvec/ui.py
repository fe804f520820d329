"""Progress for long commands: a rich bar on a terminal, plain lines in a log.

``slimvec ingest``, ``migrate``, ``bench`` and ``prune`` run for minutes to hours. On a terminal
they draw a rich progress bar; when stderr is a file, a pipe, CI or a service job a bar draws
nothing useful, so :func:`make_progress` returns :class:`PlainProgress` instead, which writes one
line per task at a bounded rate::

    progress: ingesting corpus.jsonl: 12,288/50,000 docs (24.6%), 812 docs/s, elapsed 0:00:15, ETA 0:00:46

Both objects have the subset of :class:`rich.progress.Progress` the commands use (context
manager, ``add_task``, ``update``, ``advance``), so callers do not care which one they got.

The interval between lines is :data:`DEFAULT_INTERVAL` seconds, or ``$SLIMVEC_PROGRESS_SECONDS``.
Used as a context manager, :class:`PlainProgress` also writes a line every interval while one step
runs without advancing (a 10-minute FAISS OPQ build, a size-model build): no silent minutes.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

__all__ = ["make_progress", "PlainProgress", "DEFAULT_INTERVAL", "INTERVAL_ENV", "is_terminal"]

#: seconds between two plain progress lines of one task
DEFAULT_INTERVAL = 10.0
#: environment variable overriding :data:`DEFAULT_INTERVAL`
INTERVAL_ENV = "SLIMVEC_PROGRESS_SECONDS"


def is_terminal(stream: IO[str] | None = None) -> bool:
    """Whether ``stream`` (default: stderr) is an interactive terminal."""
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or not a real file
        return False


def _interval() -> float:
    text = os.environ.get(INTERVAL_ENV, "").strip()
    if not text:
        return DEFAULT_INTERVAL
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_INTERVAL
    return max(0.0, value)


def _clock(seconds: float) -> str:
    seconds = int(max(0.0, seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


@dataclass
class _Task:
    description: str
    total: float | None
    completed: float
    started: float
    last_line: float
    line_at: float | None = None  # completed count at the last line
    done_reported: bool = False
    fields: dict[str, Any] = field(default_factory=dict)
    step_started: float = 0.0  # when the description last changed (the current step began)


class PlainProgress:
    """Progress as plain lines on a stream, at most one line per task every ``interval`` seconds.

    A line is written when a task starts, at most every ``interval`` seconds while it advances,
    and once when it completes (or when the context exits with the task unfinished), so a log
    shows every stage of a run with done/total, rate and ETA, without flooding.

    Parameters
    ----------
    unit : str
        What is counted (``docs``, ``vectors``, ``steps``...); a task's ``unit=`` field overrides it.
    stream : file, optional
        Where lines go [default: ``sys.stderr`` at write time].
    interval : float, optional
        Seconds between lines of one task [default: ``$SLIMVEC_PROGRESS_SECONDS`` or 10].
    disable : bool
        Write nothing.
    """

    def __init__(self, unit: str = "items", stream: IO[str] | None = None,
                 interval: float | None = None, disable: bool = False) -> None:
        self.unit = unit
        self.stream = stream
        self.interval = _interval() if interval is None else float(interval)
        self.disable = disable
        self.tasks: dict[int, _Task] = {}
        self._lock = threading.RLock()
        self._quit = threading.Event()
        self._beat: threading.Thread | None = None

    # -------------------------------------------------------------- context
    def __enter__(self) -> PlainProgress:
        if not self.disable and self.interval > 0:
            self._beat = threading.Thread(target=self._heartbeat, name="slimvec-progress", daemon=True)
            self._beat.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _heartbeat(self) -> None:
        """A line for every unfinished task silent for an interval (a long step still runs)."""
        while not self._quit.wait(self.interval):
            now = time.monotonic()
            with self._lock:
                for task in list(self.tasks.values()):
                    if not task.done_reported and now - task.last_line >= self.interval:
                        self._write(task, now)

    def start(self) -> None:
        """Nothing to start (rich compatibility)."""

    def stop(self) -> None:
        """Write the last state of every task that advanced since its last line."""
        self._quit.set()
        if self._beat is not None and self._beat is not threading.current_thread():
            self._beat.join(timeout=5)
            self._beat = None
        for task in self.tasks.values():
            if not task.done_reported and task.completed != task.line_at:
                self._write(task, time.monotonic())

    # ---------------------------------------------------------------- tasks
    def add_task(self, description: str, total: float | None = None, completed: float = 0,
                 start: bool = True, **fields: Any) -> int:
        """Start a task; writes its first line. Returns the task id."""
        now = time.monotonic()
        task_id = len(self.tasks)
        task = _Task(description, total, float(completed), now, now, fields=dict(fields),
                     step_started=now)
        with self._lock:
            self.tasks[task_id] = task
            self._write(task, now)
        return task_id

    def update(self, task_id: int, *, total: float | None = None, completed: float | None = None,
               advance: float | None = None, description: str | None = None,
               **fields: Any) -> None:
        """Change a task like :meth:`rich.progress.Progress.update`."""
        task = self.tasks[task_id]
        if total is not None:
            task.total = total
        if completed is not None:
            task.completed = float(completed)
        if advance:
            task.completed += advance
        if description is not None and description != task.description:
            task.description = description
            task.step_started = time.monotonic()
            task.line_at = None  # a new stage is worth a line
        task.fields.update(fields)
        with self._lock:
            self._maybe_write(task)

    def advance(self, task_id: int, advance: float = 1) -> None:
        """Add ``advance`` to a task's completed count."""
        self.update(task_id, advance=advance)

    # -------------------------------------------------------------- output
    def _maybe_write(self, task: _Task) -> None:
        now = time.monotonic()
        finished = task.total is not None and task.completed >= task.total
        if finished and not task.done_reported:
            self._write(task, now)
        elif not finished and now - task.last_line >= self.interval:
            self._write(task, now)

    def line(self, task: _Task, now: float) -> str:
        """The progress line of ``task`` at time ``now``."""
        elapsed = now - task.started
        done = task.completed
        unit = task.fields.get("unit", self.unit)
        parts = [f"{done:,.0f}/{task.total:,.0f} {unit}" if task.total else f"{done:,.0f} {unit}"]
        if task.total:
            parts[0] += f" ({100.0 * min(done / task.total, 1.0):.1f}%)"
        rate = done / elapsed if elapsed > 0 else 0.0
        if rate > 0:
            parts.append(f"{rate:,.0f} {unit}/s" if rate >= 10 else f"{rate:,.2f} {unit}/s")
        parts.append(f"elapsed {_clock(elapsed)}")
        if task.step_started > task.started and now - task.step_started >= max(self.interval, 1.0):
            parts.append(f"this step {_clock(now - task.step_started)}")  # a long step, still running
        if task.total and done >= task.total:
            parts.append("done")
        elif task.total and rate > 0:
            parts.append(f"ETA {_clock((task.total - done) / rate)}")
        return f"progress: {task.description}: " + ", ".join(parts)

    def _write(self, task: _Task, now: float) -> None:
        task.last_line = now
        task.line_at = task.completed
        if task.total is not None and task.completed >= task.total:
            task.done_reported = True
        if self.disable:
            return
        stream = self.stream if self.stream is not None else sys.stderr
        try:
            stream.write(self.line(task, now) + "\n")
            stream.flush()
        except (OSError, ValueError):  # a closed log must not stop the work
            pass


def make_progress(enabled: bool = True, *, unit: str = "items", console: Any = None,
                  stream: IO[str] | None = None, interval: float | None = None) -> Any:
    """A progress display for a long command: a rich bar on a terminal, plain lines otherwise.

    Parameters
    ----------
    enabled : bool
        False: show nothing (e.g. under ``--json``).
    unit : str
        What is counted, for the rate (``docs``, ``vectors``, ``steps``).
    console : rich.console.Console, optional
        Console of the rich bar [default: one on stderr]; its file decides terminal or not.
    stream : file, optional
        Stream to judge and write plain lines to [default: the console's file, else stderr].
    interval : float, optional
        Seconds between plain lines [default: ``$SLIMVEC_PROGRESS_SECONDS`` or 10].

    Returns
    -------
    rich.progress.Progress or PlainProgress
        Use as a context manager; ``add_task`` / ``update`` / ``advance``.
    """
    if stream is None and console is not None:
        stream = getattr(console, "file", None)
    if not enabled:
        return PlainProgress(unit, stream, interval, disable=True)
    if not is_terminal(stream):
        return PlainProgress(unit, stream, interval)
    if _LIVE:  # a bar is already on screen (e.g. bench's while its report builds): add rows to it
        return _Nested(_LIVE[-1])
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from rich.text import Text

    class _Rate(TextColumn):
        def __init__(self) -> None:
            super().__init__("")

        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.0f} {unit}/s" if speed else "")

    class _Tracked(Progress):
        def __enter__(self) -> _Tracked:
            out = super().__enter__()
            _LIVE.append(self)
            return out

        def __exit__(self, *exc: Any) -> None:
            if self in _LIVE:
                _LIVE.remove(self)
            super().__exit__(*exc)

    return _Tracked(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    _Rate(), TimeElapsedColumn(), TimeRemainingColumn(),
                    console=console or Console(stderr=True), transient=False)


#: rich bars of :func:`make_progress` on screen now (one live display per terminal)
_LIVE: list[Any] = []


class _Nested:
    """A progress made while another rich bar is live: its tasks are rows of that bar (rich
    allows one live display at a time); they are removed when it exits."""

    def __init__(self, outer: Any) -> None:
        self._outer = outer
        self._tasks: list[Any] = []

    def __enter__(self) -> _Nested:
        return self

    def __exit__(self, *exc: Any) -> None:
        for task in self._tasks:
            try:
                self._outer.remove_task(task)
            except KeyError:
                pass

    def add_task(self, description: str, **kwargs: Any) -> Any:
        task = self._outer.add_task(description, **kwargs)
        self._tasks.append(task)
        return task

    def update(self, task: Any, **kwargs: Any) -> None:
        self._outer.update(task, **kwargs)

    def advance(self, task: Any, advance: float = 1) -> None:
        self._outer.advance(task, advance)


# ---------------------------------------------------------------------------- FAISS's C++ noise
#: FAISS clustering warnings swallowed by :func:`quiet_faiss` in this process (issue 27 item 8)
_FAISS_WARNINGS = [0]
_FAISS_PREFIX = "WARNING clustering "


def faiss_warning_count() -> int:
    """How many FAISS "WARNING clustering N points to K centroids" lines :func:`quiet_faiss` has
    swallowed in this process (``slimvec bench`` prints them as one summary line)."""
    return _FAISS_WARNINGS[0]


class quiet_faiss:
    """Context manager around a FAISS training call: its C++ ``WARNING clustering N points to K
    centroids`` lines (written straight to file descriptor 2, one per IVF / PQ sub-quantizer /
    k-means training on fewer than 39 points per centroid) are counted instead of printed.

    File descriptor 2 is pointed at a temporary file for the duration of the call; anything else
    written there meanwhile is written back to stderr afterwards, so no other message is lost.
    A small corpus trained on fewer points than FAISS recommends is expected in benchmarks and
    tests; ``slimvec bench`` prints the count once (:func:`faiss_warning_count`).
    """

    def __enter__(self) -> quiet_faiss:
        import tempfile

        self._saved: int | None = None
        try:
            sys.stderr.flush()
            self._tmp = tempfile.TemporaryFile()
            self._saved = os.dup(2)
            os.dup2(self._tmp.fileno(), 2)
        except (OSError, ValueError, AttributeError):  # no fd 2 (embedded): leave it alone
            self._saved = None
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._saved is None:
            return
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._tmp.seek(0)
        text = self._tmp.read().decode("utf-8", errors="replace")
        self._tmp.close()
        other = []
        for line in text.splitlines(keepends=True):
            if line.startswith(_FAISS_PREFIX):
                _FAISS_WARNINGS[0] += 1
            else:
                other.append(line)
        if other:
            os.write(2, "".join(other).encode("utf-8", errors="replace"))
