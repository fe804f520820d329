"""Graceful Ctrl-C: the first SIGINT (or SIGTERM) asks the batch loop to stop at the next batch
boundary and commit; a second SIGINT interrupts at once (the last commit still stands)."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType
from typing import Any

__all__ = ["StopFlag", "stop_requested"]

log = logging.getLogger(__name__)

#: the flags of the commit loops running now (signals are the process's: any of them asked)
_ACTIVE: list[StopFlag] = []


def stop_requested() -> bool:
    """Whether a running commit loop was asked to stop: a producer waiting on work in another
    thread (the encoder's window) polls it to hand the loop no further batch instead of making
    it wait for that work (issue 52: Ctrl-C waited 52 s for a window of long texts)."""
    return any(flag.requested for flag in _ACTIVE)


class StopFlag:
    """Context manager installing the handlers (main thread only; elsewhere it is inert).

    Attributes
    ----------
    requested : bool
        A stop was asked for.
    signum : int or None
        Which signal asked.
    """

    def __init__(self) -> None:
        self.requested = False
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        self.signum = signum
        log.warning("stop requested: finishing the current batch and committing "
                    "(press Ctrl-C again to stop at once)")

    def __enter__(self) -> StopFlag:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()
