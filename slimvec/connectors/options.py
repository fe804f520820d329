"""Option checking and quantization spec parsing shared by the connectors.

Every store declares, next to its ``DEFAULTS``, a :class:`Rule` per option: the type and the
range a value must have. :func:`check_options` applies them when a spec is parsed (store
construction, which :func:`slimvec.connectors.canonical_store_spec` does before anything is
built), so a value that would crash or exhaust an engine (``hnsw:M=0`` segfaults hnswlib at the
first insert) is refused with the parameter, the allowed range and the value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slimvec.errors import ConfigError

__all__ = ["check_options", "check_value", "parse_quantization", "QUANTIZATIONS", "Rule", "whole",
           "number", "FLAG", "TEXT", "MAX_DIM"]

#: the largest vector dimension any store is asked to hold (Qdrant's own limit)
MAX_DIM = 65536


@dataclass(frozen=True)
class Rule:
    """What one store option accepts.

    Attributes
    ----------
    kind : str
        ``"int"`` (a whole number), ``"float"`` (a finite number), ``"bool"`` or ``"str"``.
    lo, hi : float or None
        Inclusive bounds of a number.
    why : str
        What a value outside the range does, or what to choose instead (ends the message).
    """

    kind: str
    lo: float | None = None
    hi: float | None = None
    why: str = ""

    def expected(self) -> str:
        """The accepted values in words (``a whole number from 2 to 512``)."""
        if self.kind == "bool":
            return "true or false"
        if self.kind == "str":
            return "a non-empty text"
        what = "a whole number" if self.kind == "int" else "a number"
        lo, hi = (None if b is None else (int(b) if float(b).is_integer() else b) for b in (self.lo, self.hi))
        if lo is not None and hi is not None:
            return f"{what} from {lo} to {hi}"
        if lo is not None:
            return f"{what} from {lo} to any"
        return what


def whole(lo: int, hi: int, why: str = "") -> Rule:
    """A whole-number option in ``lo..hi`` (inclusive)."""
    return Rule("int", lo, hi, why)


def number(lo: float, hi: float, why: str = "") -> Rule:
    """A finite-number option in ``lo..hi`` (inclusive)."""
    return Rule("float", lo, hi, why)


FLAG = Rule("bool")
TEXT = Rule("str")


def check_value(store: str, key: str, value: Any, rule: Rule) -> Any:
    """``value`` of option ``key`` if ``rule`` accepts it, else a :class:`ConfigError` naming the
    store, the option, the allowed range and the value.

    Whole numbers given as ``16.0`` are returned as ``16``; booleans are not numbers.
    """
    ok = True
    if rule.kind == "bool":
        ok = isinstance(value, bool)
    elif rule.kind == "str":  # "collection=2024" is parsed as a number: still a name
        ok = not isinstance(value, bool) and bool(str(value).strip())
    else:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            ok = False
        elif rule.kind == "int":
            ok = float(value).is_integer()
            value = int(value) if ok else value
        else:
            ok = math.isfinite(float(value))
        if ok:
            ok = ((rule.lo is None or value >= rule.lo) and (rule.hi is None or value <= rule.hi))
    if not ok:
        shown = repr(value) if isinstance(value, str) else str(value)
        raise ConfigError(f"Store {store!r}: option {key}={shown} is out of range: expected "
                          f"{rule.expected()}, got {shown}." + (f" {rule.why}" if rule.why else ""))
    return value


def check_options(store: str, options: dict[str, Any], defaults: dict[str, Any],
                  rules: Mapping[str, Rule] | None = None) -> dict[str, Any]:
    """Return ``defaults`` updated by ``options``, refusing unknown keys and, when ``rules`` are
    given, values outside their rule (see :func:`check_value`).

    Raises
    ------
    ConfigError
        An option the store does not know (the message lists the accepted ones), or a value
        of the wrong type or out of range (the message names the option, the range and the value).
    """
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise ConfigError(f"Store {store!r} has no option(s) {', '.join(unknown)}. "
                          f"Accepted: {', '.join(sorted(defaults))}.")
    merged = dict(defaults)
    for key, value in options.items():
        rule = (rules or {}).get(key)
        merged[key] = check_value(store, key, value, rule) if rule is not None else value
    return merged

#: Qdrant quantization names accepted by ``quant=``: scalar int8, binary (1, 1.5, 2 bits),
#: TurboQuant (1, 1.5, 2, 4 bits) and product quantization (compression ratio x4..x64).
QUANTIZATIONS = ("none", "sq8", "bq1", "bq1.5", "bq2", "tq1", "tq1.5", "tq2", "tq4",
                 "pq4", "pq8", "pq16", "pq32", "pq64")


def parse_quantization(value: Any) -> tuple[str, str | None]:
    """Split a ``quant=`` value into (family, level): ``"bq1.5"`` -> ``("bq", "1.5")``.

    Raises
    ------
    ConfigError
        Not one of :data:`QUANTIZATIONS`.
    """
    text = "none" if value in (None, False) else str(value).lower()
    if text not in QUANTIZATIONS:
        raise ConfigError(f"Unknown quantization {value!r}. Known: {', '.join(QUANTIZATIONS)}.")
    if text == "none":
        return "none", None
    return text[:2], text[2:]
