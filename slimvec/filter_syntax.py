"""The syntax-level parts of :mod:`slimvec.filters`: key paths and the bounds a filter keeps.

A key is Qdrant's JSON path (:func:`key_path`; :func:`qdrant_key` writes it the way Qdrant
reads it). The limits below are checked by :func:`slimvec.filters.parse_filter` before any work,
so no filter reaches SQLite (64 tables a join, expression depth 1000, its parser's stack) or
Qdrant Edge in a shape they cannot execute, and parsing never recurses into a RecursionError.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from slimvec.errors import ConfigError

__all__ = ["KEY_HELP", "MAX_CONDITIONS", "MAX_DEPTH", "MAX_KEY_LENGTH", "MAX_KEY_PARTS",
           "MAX_VALUES", "INT64", "Budget", "PathItem", "check_int64", "check_key", "check_nesting",
           "datetime_micros", "iso_utc", "key_path", "qdrant_key", "show"]

#: nested filters (``must`` / ``should`` / ``must_not`` levels) one filter may hold
MAX_DEPTH = 16
#: conditions (leaves and nested filters) of one filter
MAX_CONDITIONS = 1000
#: values of all ``match any`` / ``except`` lists and ``has_id`` lists of one filter together
MAX_VALUES = 65536
#: characters of one key
MAX_KEY_LENGTH = 512
#: parts of one key (``a.b[].c[0]`` has 5)
MAX_KEY_PARTS = 32
INT64 = (-(1 << 63), (1 << 63) - 1)
#: a key part Qdrant reads unquoted (its raw_str, restricted to ASCII)
_PLAIN = re.compile(r"[A-Za-z0-9_-]+")

#: the datetime forms Qdrant reads (as qdrant-client's local mode mirrors them): RFC 3339, a space
#: for ``T``, fractions of a second, an offset (``Z``, ``+01``, ``+0100``, ``+01:00``, a space
#: before it) after the seconds; no offset is UTC; the minutes or the date alone
_DATETIME = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d+))?"
                       r"(?: ?(Z|[+-]\d{2}(?::?\d{2})?))?)?)?")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

KEY_HELP = ("A key is a path such as lang, meta.lang, tags[] (every element of the array tags), "
            "tags[0] (its first element) or items[].name; write a part holding '.', '[' or ']' "
            'in double quotes ("k[0]"). A part cannot hold \'"\' or a backslash.')


#: one step of a key path: a member name, an array index, or None for every element (``[]``)
PathItem = str | int | None


@lru_cache(maxsize=4096)
def key_path(key: str) -> tuple[PathItem, ...]:
    """The parsed path of a key: ``'a[].b[0]'`` -> ``('a', None, 'b', 0)``.

    Member names are ``str``, array indexes ``int``, ``None`` is ``[]`` (every element). The first
    step is always a member name.

    Raises
    ------
    ValueError
        A key that is not a path (the message says why); :func:`parse_filter` turns it into a
        :class:`~slimvec.errors.ConfigError`.
    """
    items: list[PathItem] = []
    i, n, want_name = 0, len(key), True
    while want_name or i < n:
        if want_name:
            quoted = i < n and key[i] == '"'  # '""' is the blank key, as Qdrant's
            if quoted:
                j = key.find('"', i + 1)
                if j < 0:
                    raise ValueError("a quote is not closed")
                part, i = key[i + 1:j], j + 1
            else:
                j = i
                while j < n and key[j] not in '.[]"\\':
                    j += 1
                part, i = key[i:j], j
            if not part and not quoted:
                raise ValueError("a part is empty" if i >= n or key[i] == "." else
                                 f"{key[i]!r} at character {i + 1} cannot start a part")
            if "\\" in part:
                raise ValueError("a part holds a backslash")
            items.append(part)
            want_name = False
        elif key[i] == ".":
            i, want_name = i + 1, True
        elif key[i] == "[":
            j = key.find("]", i)
            inner = key[i + 1:j] if j > 0 else "?"
            if inner and not (inner.isascii() and inner.isdigit() and len(inner) < 10):
                raise ValueError(f"[{inner[:20]} is neither [] nor an array index [0]..[999999999]")
            items.append(int(inner) if inner else None)
            i = j + 1
        else:
            raise ValueError(f"{key[i]!r} at character {i + 1} cannot follow a part")
    return tuple(items)


def qdrant_key(key: str) -> str:
    """``key`` as Qdrant's JSON path syntax: every part that is not a plain identifier quoted
    (``a b.c[0]`` -> ``"a b".c[0]``), which Qdrant Edge and the Qdrant server accept."""
    out = []
    for step in key_path(key):
        if step is None:
            out.append("[]")
        elif isinstance(step, int):
            out.append(f"[{step}]")
        else:
            out.append(("." if out else "") + (step if _PLAIN.fullmatch(step) else f'"{step}"'))
    return "".join(out)


def check_nesting(spec: Any, where: str) -> None:
    """Refuse JSON nested deeper than :data:`MAX_DEPTH` filters can be, without recursion (so the
    recursive parse below never meets a RecursionError; a cycle of dicts is refused too)."""
    limit = 2 * MAX_DEPTH + 6  # a filter level is an object and a list; a leaf up to 4 more
    stack: list[tuple[Any, int]] = [(spec, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise ConfigError(f"{where} nests deeper than a filter of {MAX_DEPTH} nested filters "
                              f"can (the limit MAX_DEPTH = {MAX_DEPTH}); flatten it (must of "
                              "musts is one must).")
        children = node.values() if isinstance(node, Mapping) else node if isinstance(node, list) else ()
        stack.extend((c, depth + 1) for c in children if isinstance(c, (Mapping, list)))


@dataclass
class Budget:
    """What one filter has used of the limits while it is parsed."""

    conditions: int = 0
    values: int = 0

    def take(self, path: str, conditions: int = 0, values: int = 0) -> None:
        self.conditions += conditions
        self.values += values
        if self.conditions > MAX_CONDITIONS:
            raise ConfigError(f"{path}: the filter holds more than {MAX_CONDITIONS} conditions "
                              f"(the limit MAX_CONDITIONS); use match any for many values of "
                              "one key, has_id for many ids.")
        if self.values > MAX_VALUES:
            raise ConfigError(f"{path}: the filter lists more than {MAX_VALUES} values in its "
                              "match any / except and has_id lists together (the limit "
                              "MAX_VALUES); split the request.")


def show(v: Any, width: int = 80) -> str:
    """``repr`` cut to ``width`` characters, safe for integers too long to print."""
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 64:
        return f"an integer of {v.bit_length()} bits"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(show(x, 20) for x in v[:4]) + (", ...]" if len(v) > 4 else "]")
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{show(k, 20)}: {show(x, 20)}" for k, x in list(v.items())[:4]) + "}"
    text = repr(v)
    return text if len(text) <= width else text[:width] + "..."


def check_int64(v: Any, path: str) -> None:
    if isinstance(v, int) and not isinstance(v, bool) and not INT64[0] <= v <= INT64[1]:
        raise ConfigError(f"{path}: {show(v, 40)} is outside the signed 64-bit integers that "
                          "payloads hold (the limit: -2**63 .. 2**63-1, as in Qdrant).")


def check_key(key: Any, path: str) -> str:
    """``key`` if it is a payload key within the limits, else a :class:`ConfigError` naming
    ``path``, what is wrong and how keys are written."""
    if not isinstance(key, str) or not key:
        raise ConfigError(f"{path} must be a payload field name such as 'lang' or 'meta.lang', got "
                          f"{show(key)}.")
    if len(key) > MAX_KEY_LENGTH:
        raise ConfigError(f"{path}: a key of {len(key)} characters; the limit is "
                          f"{MAX_KEY_LENGTH} (MAX_KEY_LENGTH).")
    try:
        parts = key_path(key)
    except ValueError as exc:
        raise ConfigError(f"{path}: {show(key, 60)} is not a payload key: {exc}. "
                          f"{KEY_HELP}") from None
    if len(parts) > MAX_KEY_PARTS:
        raise ConfigError(f"{path}: a key of {len(parts)} parts; the limit is {MAX_KEY_PARTS} "
                          "(MAX_KEY_PARTS).")
    return key


@lru_cache(maxsize=1 << 16)
def datetime_micros(text: str) -> int | None:
    """Microseconds since 1970-01-01 UTC of a datetime string in a form Qdrant reads
    (``2024-05-01T12:00:00Z``, ``2024-05-01 12:00:00.5 +02:00``, ``2024-05-01 12:00``,
    ``2024-05-01``; no offset means UTC; leading spaces, a lowercase ``z`` and `` UTC`` too), else
    None: what a datetime range compares."""
    text = text.lstrip()
    text = text[:-4] + "Z" if text.endswith(" UTC") else text[:-1] + "Z" if text.endswith("z") else text
    m = _DATETIME.fullmatch(text) if len(text) <= 64 else None
    if m is None:
        return None
    year, month, day, hour, minute, second, frac, tz = m.groups()
    try:
        d = datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0),
                     int((frac or "")[:6].ljust(6, "0")), tzinfo=UTC)
    except ValueError:  # a month 13, a day 32
        return None
    offset = 0 if tz in (None, "Z") else (-1 if tz[0] == "-" else 1) * (
        int(tz[1:3]) * 60 + int(tz[3:].lstrip(":") or 0))
    delta = d - _EPOCH
    return (delta.days * 86400 + delta.seconds - offset * 60) * 1_000_000 + delta.microseconds


def iso_utc(micros: int) -> str:
    """:func:`datetime_micros`'s inverse: RFC 3339 in UTC with microseconds."""
    return (_EPOCH + timedelta(microseconds=int(micros))).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
