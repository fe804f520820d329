"""Range checks of numeric options, shared by the library functions and the command line.

Library functions (:func:`slimvec.planner.plan.make_plan`, :func:`slimvec.planner.tune.tune`,
:func:`slimvec.engines.plan.engine_plan`) call these on their arguments before any work, so a
Python caller gets a :class:`~slimvec.errors.ConfigError`; the command line runs the same checks
as option callbacks (:mod:`slimvec.cli.checks`), so a bad number fails while the options are
parsed with one line naming the option, the allowed range and the value given::

    check_int("--workers", 0, low=1)
    # ConfigError: --workers must be an integer >= 1, got 0.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from slimvec.errors import ConfigError

__all__ = ["check_int", "check_number", "describe_range"]


def _fmt(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def describe_range(low: float | None = None, high: float | None = None, *, low_open: bool = False,
                   high_open: bool = False) -> str:
    """``">= 1"``, ``"> 0"``, ``"in [0, 1]"``, ``"in (0, 1]"`` or ``""`` (no bound)."""
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{_fmt(low)}, {_fmt(high)}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {_fmt(low)}"
    if high is not None:
        return f"{'<' if high_open else '<='} {_fmt(high)}"
    return ""


def _refuse(name: str, kind: str, rng: str, value: Any, hint: str) -> ConfigError:
    return ConfigError(f"{name} must be {kind}{' ' + rng if rng else ''}, got {value!r}"
                       + (f" ({hint})" if hint else "") + ".")


def check_int(name: str, value: Any, *, low: int | None = None, high: int | None = None,
              hint: str = "") -> int:
    """``value`` as an ``int`` when it is an integer within ``[low, high]``.

    Parameters
    ----------
    name : str
        The option or argument named in the message (``"--workers"``, ``"docs"``).
    value : int
        The value given (a bool or a float is refused, even ``2.0``).
    low, high : int, optional
        Inclusive bounds.
    hint : str
        What the value means or what to do, added to the message.

    Raises
    ------
    ConfigError
        ``"{name} must be an integer >= 1, got 0."``
    """
    rng = describe_range(low, high)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _refuse(name, "an integer", rng, value, hint)
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        raise _refuse(name, "an integer", rng, v, hint)
    return v


def check_number(name: str, value: Any, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False, hint: str = "") -> float:
    """``value`` as a ``float`` when it is a finite real number within the bounds.

    NaN and infinities are always refused (every comparison with NaN is false, so a bare range
    check would let it through).

    Parameters
    ----------
    name : str
        The option or argument named in the message.
    value : float
        The value given (a bool is refused).
    low, high : float, optional
        Bounds, inclusive unless ``low_open`` / ``high_open``.
    hint : str
        What the value means or what to do, added to the message.

    Raises
    ------
    ConfigError
        ``"--min-recall must be a finite number in [0, 1], got 1.5."``
    """
    rng = describe_range(low, high, low_open=low_open, high_open=high_open)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _refuse(name, "a finite number", rng, value, hint)
    v = float(value)
    bad = not math.isfinite(v)
    if not bad and low is not None:
        bad = v <= low if low_open else v < low
    if not bad and high is not None:
        bad = v >= high if high_open else v > high
    if bad:
        raise _refuse(name, "a finite number", rng, v, hint)
    return v
