"""One payload filter language for every store: the subset of Qdrant's filter JSON users write.

A filter is Qdrant's JSON (a ``dict`` or its JSON text)::

    {"must": [{"key": "lang", "match": {"value": "en"}},
              {"key": "year", "range": {"gte": 2020}}],
     "should": [{"key": "tags", "match": {"any": ["news", "blog"]}}],
     "must_not": [{"is_null": {"key": "author"}}, {"has_id": [7, 9]}]}

Supported conditions: ``must`` / ``should`` / ``must_not`` (nested filters anywhere a condition
goes); a field condition ``{"key": K, "match": {"value": V}}`` (V a string, integer or boolean),
``{"match": {"any": [...]}}``, ``{"match": {"except": [...]}}`` (a list of strings or of
integers), ``{"range": {"gt", "gte", "lt", "lte"}}`` (numbers, or datetime strings);
``{"is_null": {"key": K}}``, ``{"is_empty": {"key": K}}`` and ``{"has_id": [...]}``. Anything
else of Qdrant's (geo, nested, values_count, full-text match, min_should, has_vector) is refused with a
:class:`~slimvec.errors.ConfigError` naming the feature and where it was, never ignored.

Semantics (one set of documents on every store; Qdrant's, checked against Qdrant Edge in
``tests/test_filters.py`` and by the generated battery of ``tests/test_filters_differential.py``):

* **Keys** are Qdrant's JSON paths: parts joined by ``.``; ``a[]`` is every element of the array
  ``a``, ``a[2]`` its element 2. A key part names an object member only: ``a.b`` where ``a`` is
  an array reaches nothing (write ``a[].b``), ``a[]`` / ``a[0]`` where ``a`` is not an array
  reach nothing. A part holding ``.``, ``[`` or ``]`` is written in double quotes
  (``"k[0]"`` is the member ``k[0]``, ``k[0]`` element 0 of ``k``). Other characters (spaces,
  ``'``, ``$``, unicode) may be written as they are (Qdrant wants them quoted; slimvec quotes
  them for Qdrant). A part cannot hold ``"`` or ``\\`` (Qdrant's paths cannot spell them): such
  a key is refused.
* **Values at a key**: the values the path reaches; a value that is itself an array counts by its
  elements (one level: ``[[1]]`` holds ``[1]``, not ``1``) for ``match``, ``range`` and
  ``is_null``. A field matches when any of its values does.
* ``match value / any``: typed equality: a boolean never equals an integer, an integer never a
  float or a string. ``except``: some non-null value is not one of the list (an object or an
  array counts as not in it); a missing, ``null`` or empty field never matches.
* ``range``: numbers (not booleans), compared exactly (an integer above 2**53 against a bound
  as it is, not as float64; Qdrant compares as float64, so ranges with a bound of magnitude
  2**53 or more are evaluated in Python on Qdrant Edge). A datetime range (every bound a
  datetime string, :func:`~slimvec.filter_syntax.datetime_micros`) compares the string values
  that read as datetimes, to the microsecond, as Qdrant does.
* ``is_null``: some value is ``null`` (also an element ``null`` of an array value).
  ``is_empty``: every value reached is ``null`` or ``[]`` (so a key that reaches nothing is
  empty; ``[null]`` and ``{}`` are not).
* ``must`` = all, ``should`` = at least one (an empty or absent ``should`` is no constraint),
  ``must_not`` = none.

Qdrant Edge's Python binding turns a boolean match value into an integer
(``MatchValue(True).value == 1``), so :func:`slimvec.connectors.qdrant_filter.edge_native` says
whether a filter can go to it as is; the Qdrant Edge store evaluates other filters with
:meth:`Filter.matches`.

**Bounds** (checked by :func:`parse_filter` before any work, each refusal a
:class:`~slimvec.errors.ConfigError` naming the limit; the service answers 4xx): at most
:data:`MAX_DEPTH` nested filters, :data:`MAX_CONDITIONS` conditions, :data:`MAX_VALUES` values
in all ``any`` / ``except`` / ``has_id`` lists, keys of at most :data:`MAX_KEY_LENGTH` characters
and :data:`MAX_KEY_PARTS` parts; integer match values and ids within signed 64 bits, range bounds
finite. Within them every store (SQLite, Qdrant Edge) executes every filter.

:func:`parse_filter` gives a frozen :class:`Filter`; :meth:`Filter.matches` evaluates it on a
payload in Python (the reference every store is tested against), :func:`field_values` reads the
values at a key and :func:`key_path` its parsed path.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Union

from slimvec.errors import ConfigError
from slimvec.filter_syntax import (  # noqa: F401 (the limits are re-exported)
    INT64,
    MAX_CONDITIONS,
    MAX_DEPTH,
    MAX_KEY_LENGTH,
    MAX_KEY_PARTS,
    MAX_VALUES,
    Budget,
    check_int64,
    check_key,
    check_nesting,
    datetime_micros,
    iso_utc,
    key_path,
    show,
)

__all__ = [
    "MAX_CONDITIONS",
    "MAX_DEPTH",
    "MAX_KEY_LENGTH",
    "MAX_KEY_PARTS",
    "MAX_VALUES",
    "Condition",
    "Filter",
    "HasId",
    "IsEmpty",
    "IsNull",
    "Match",
    "Range",
    "field_values",
    "key_path",
    "parse_filter",
]

_SUPPORTED = ("must, should, must_not; key + match {value | any | except}; key + range "
              "{gt, gte, lt, lte} (numbers or datetimes); is_null {key}; is_empty {key}; has_id [ids]")
#: Qdrant conditions and match kinds we refuse by name (never silently ignored)
_UNSUPPORTED = {"nested": "nested object filters", "geo_bounding_box": "geo filters", "geo_radius": "geo filters",
                "geo_polygon": "geo filters", "values_count": "values_count", "has_vector": "has_vector",
                "min_should": "min_should"}
_UNSUPPORTED_MATCH = {"text": "full-text match", "text_any": "full-text match",
                      "phrase": "phrase match", "prefix": "prefix match",
                      "substring": "substring match"}


@dataclass(frozen=True)
class Match:
    """``{"key": key, "match": {kind: values}}``; ``kind`` is ``value``, ``any`` or ``except``."""

    key: str
    kind: str
    values: tuple[Any, ...]

    def test(self, payload: Mapping[str, Any]) -> bool:
        """True when the payload's values at :attr:`key` satisfy the match (Qdrant semantics)."""
        vals = field_values(payload, self.key)
        if self.kind == "except":
            # Qdrant: a missing / null / empty field never matches except; an array matches when
            # at least one element is outside the excluded values
            return any(not _equals_any(v, self.values) for v in vals if v is not None)
        return any(_equals_any(v, self.values) for v in vals)


@dataclass(frozen=True)
class Range:
    """``{"key": key, "range": {...}}``: numbers, or when :attr:`datetime` the strings that read
    as datetimes (bounds in microseconds since the epoch, UTC); an array matches if any element
    does."""

    key: str
    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None
    datetime: bool = False

    def test(self, payload: Mapping[str, Any]) -> bool:
        """True when some numeric (datetime) value at :attr:`key` lies in the range."""
        for v in field_values(payload, self.key):
            if self.datetime:
                v = datetime_micros(v) if isinstance(v, str) else None
            if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            if ((self.gt is None or v > self.gt) and (self.gte is None or v >= self.gte)
                    and (self.lt is None or v < self.lt) and (self.lte is None or v <= self.lte)):
                return True
        return False


@dataclass(frozen=True)
class IsNull:
    """``{"is_null": {"key": key}}``: the key is present and holds ``null`` (or an array with a
    ``null``)."""

    key: str

    def test(self, payload: Mapping[str, Any]) -> bool:
        """True for an explicit ``null`` at :attr:`key`."""
        return any(v is None for v in field_values(payload, self.key))


@dataclass(frozen=True)
class IsEmpty:
    """``{"is_empty": {"key": key}}``: the key is missing, ``null`` or ``[]``."""

    key: str

    def test(self, payload: Mapping[str, Any]) -> bool:
        """True when the key is missing or holds ``null`` or ``[]`` (``[null]`` is not empty)."""
        return all(v is None or v == [] for v in _raw_values(payload, self.key))


@dataclass(frozen=True)
class HasId:
    """``{"has_id": [...]}``: the point's id is one of :attr:`ids`.

    Through :class:`slimvec.Index` the ids are the user's own ids (mapped to store ids with
    :meth:`Filter.map_ids`); at the store layer they are store ids (int).
    """

    ids: frozenset[Any]


Condition = Union[Match, Range, IsNull, IsEmpty, HasId, "Filter"]


@dataclass(frozen=True)
class Filter:
    """A parsed filter: every ``must``, at least one ``should`` (when any), no ``must_not``."""

    must: tuple[Condition, ...] = ()
    should: tuple[Condition, ...] = ()
    must_not: tuple[Condition, ...] = ()
    source: str = field(default="", compare=False)

    def matches(self, point_id: Any, payload: Mapping[str, Any] | None) -> bool:
        """Evaluate the filter on one point.

        Parameters
        ----------
        point_id : int or str
            The point's id (compared with ``has_id`` values).
        payload : dict or None
            Its payload (``None`` is an empty payload).

        Returns
        -------
        bool
        """
        p = payload or {}
        if not all(_test(c, point_id, p) for c in self.must):
            return False
        if self.should and not any(_test(c, point_id, p) for c in self.should):
            return False
        return not any(_test(c, point_id, p) for c in self.must_not)

    def map_ids(self, fn: Callable[[Any], Any]) -> Filter:
        """A copy whose ``has_id`` values went through ``fn`` (user ids -> store ids)."""
        def conv(c: Condition) -> Condition:
            if isinstance(c, HasId):
                return HasId(frozenset(fn(i) for i in c.ids))
            if isinstance(c, Filter):
                return c.map_ids(fn)
            return c
        return replace(self, must=tuple(map(conv, self.must)), should=tuple(map(conv, self.should)),
                       must_not=tuple(map(conv, self.must_not)))

    def conditions(self) -> Iterator[Condition]:
        """Every leaf condition, depth first."""
        for c in (*self.must, *self.should, *self.must_not):
            if isinstance(c, Filter):
                yield from c.conditions()
            else:
                yield c

    def keys(self) -> set[str]:
        """The payload keys the filter reads."""
        return {c.key for c in self.conditions() if isinstance(c, (Match, Range, IsNull, IsEmpty))}

    def to_json(self) -> dict[str, Any]:
        """The filter as Qdrant JSON (what :func:`parse_filter` reads)."""
        out: dict[str, Any] = {}
        for name in ("must", "should", "must_not"):
            conds = getattr(self, name)
            if conds:
                out[name] = [_cond_json(c) for c in conds]
        return out


def _cond_json(c: Condition) -> dict[str, Any]:
    if isinstance(c, Filter):
        return c.to_json()
    if isinstance(c, Match):
        return {"key": c.key, "match": {c.kind: c.values[0] if c.kind == "value" else list(c.values)}}
    if isinstance(c, Range):
        return {"key": c.key, "range": {k: iso_utc(v) if c.datetime else v for k in ("gt", "gte", "lt", "lte")
                                        if (v := getattr(c, k)) is not None}}
    if isinstance(c, IsNull):
        return {"is_null": {"key": c.key}}
    if isinstance(c, IsEmpty):
        return {"is_empty": {"key": c.key}}
    return {"has_id": sorted(c.ids, key=str)}


def _test(c: Condition, point_id: Any, payload: Mapping[str, Any]) -> bool:
    if isinstance(c, Filter):
        return c.matches(point_id, payload)
    if isinstance(c, HasId):
        return point_id in c.ids
    return c.test(payload)


def _equals_any(v: Any, targets: tuple[Any, ...]) -> bool:
    # Qdrant compares typed values: a bool never equals an integer, an integer never a string
    for t in targets:
        if isinstance(t, bool) or isinstance(v, bool):
            if isinstance(t, bool) and isinstance(v, bool) and t == v:
                return True
        elif isinstance(t, int):
            if isinstance(v, int) and v == t:
                return True
        elif isinstance(v, str) and v == t:
            return True
    return False


def _raw_values(payload: Mapping[str, Any], key: str) -> list[Any]:
    """Values reached by ``key`` (Qdrant's JSON path semantics); a final array as stored."""
    path = key_path(key)
    first = str(path[0])  # always a member name
    current: list[Any] = [payload[first]] if first in payload else []
    for step in path[1:]:
        nxt: list[Any] = []
        for v in current:
            if isinstance(step, str):
                if isinstance(v, Mapping) and step in v:
                    nxt.append(v[step])
            elif isinstance(v, list):
                if step is None:
                    nxt.extend(v)
                elif step < len(v):
                    nxt.append(v[step])
        current = nxt
    return current


def field_values(payload: Mapping[str, Any], key: str) -> list[Any]:
    """Every value at ``key`` of ``payload``, a value that is an array counted by its elements.

    Parameters
    ----------
    payload : dict
    key : str
        A key path (:func:`key_path`): ``a``, ``a.b``, ``a[].b``, ``a[0]``, ``"a.b"``.
    """
    out: list[Any] = []
    for v in _raw_values(payload, key):
        if isinstance(v, list):
            out.extend(v)
        else:
            out.append(v)
    return out


# ------------------------------------------------------------------------------------ parsing
def parse_filter(spec: Any, where: str = "filter") -> Filter | None:
    """Parse Qdrant filter JSON into a :class:`Filter`.

    Parameters
    ----------
    spec : dict, str (JSON text), Filter or None
        ``None`` / ``{}`` / ``""`` mean no filter (returns ``None``).
    where : str
        Name of the input in error messages (a CLI option, a file).

    Raises
    ------
    ConfigError
        Bad JSON, an unknown or unsupported key, a wrong value type: the message names the path
        (``filter.must[1].match.any``), what was expected and what came.
    """
    if spec is None or isinstance(spec, Filter):
        return spec
    source = ""
    if isinstance(spec, (str, bytes)):
        source = spec.decode("utf-8", "replace") if isinstance(spec, bytes) else spec
        if not source.strip():
            return None
        try:
            spec = json.loads(source)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where} is not valid JSON ({exc.msg} at line {exc.lineno} column "
                              f"{exc.colno}); give Qdrant filter JSON such as "
                              '{"must": [{"key": "lang", "match": {"value": "en"}}]}.') from exc
        except (ValueError, RecursionError) as exc:  # an integer of 4,300+ digits, deep nesting
            raise ConfigError(f"{where} cannot be read as JSON ({type(exc).__name__}: "
                              f"{str(exc)[:80]}); a filter nests at most {MAX_DEPTH} filters "
                              "(MAX_DEPTH) and holds integers of 64 bits.") from exc
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where} must be a JSON object with must / should / must_not, got "
                          f"{type(spec).__name__}.")
    if not spec:
        return None
    check_nesting(spec, where)
    parsed = _parse_filter(spec, where, Budget())
    return replace(parsed, source=source or json.dumps(parsed.to_json(), sort_keys=True))


def _parse_filter(spec: Mapping[str, Any], path: str, budget: Budget, depth: int = 0) -> Filter:
    if depth > MAX_DEPTH:
        raise ConfigError(f"{path}: the filter nests more than {MAX_DEPTH} filters (the limit "
                          "MAX_DEPTH); flatten it (must of musts is one must).")
    parts: dict[str, tuple[Condition, ...]] = {}
    for key, value in spec.items():
        if key in _UNSUPPORTED:
            raise ConfigError(f"{path}.{key}: {_UNSUPPORTED[key]} are not supported by slimvec's "
                              f"filters. Supported: {_SUPPORTED}.")
        if key not in ("must", "should", "must_not"):
            raise ConfigError(f"{path}: unknown key {show(key)} in a filter; expected must, "
                              f"should or must_not. Supported: {_SUPPORTED}.")
        items = value if isinstance(value, list) else [value]  # Qdrant accepts one condition too
        budget.take(f"{path}.{key}", conditions=len(items))
        parts[key] = tuple(_parse_condition(c, f"{path}.{key}[{i}]", budget, depth)
                           for i, c in enumerate(items))
    return Filter(must=parts.get("must", ()), should=parts.get("should", ()),
                  must_not=parts.get("must_not", ()))


def _parse_condition(c: Any, path: str, budget: Budget, depth: int) -> Condition:
    if not isinstance(c, Mapping):
        raise ConfigError(f"{path}: a condition must be a JSON object, got {type(c).__name__} "
                          f"{show(c)}. Supported: {_SUPPORTED}.")
    keys = set(c)
    for bad in keys & set(_UNSUPPORTED):
        raise ConfigError(f"{path}.{bad}: {_UNSUPPORTED[bad]} are not supported by slimvec's "
                          f"filters. Supported: {_SUPPORTED}.")
    if keys & {"must", "should", "must_not"}:
        return _parse_filter(c, path, budget, depth + 1)
    if keys == {"has_id"}:
        ids = c["has_id"]
        if not isinstance(ids, list) or not all(
                (isinstance(i, int) and not isinstance(i, bool) and INT64[0] <= i <= INT64[1])
                or isinstance(i, str) for i in ids):
            raise ConfigError(f"{path}.has_id must be a list of ids (integers of 64 bits or "
                              f"strings), got {show(ids)}.")
        budget.take(f"{path}.has_id", values=len(ids))
        return HasId(frozenset(ids))
    for name, cls in (("is_null", IsNull), ("is_empty", IsEmpty)):
        if keys == {name}:
            inner = c[name]
            if not isinstance(inner, Mapping) or set(inner) != {"key"}:
                raise ConfigError(f'{path}.{name} must be {{"key": "FIELD"}}, got {show(inner)}.')
            return cls(check_key(inner["key"], f"{path}.{name}.key"))
    if "key" in keys:
        return _parse_field(c, path, budget)
    raise ConfigError(f"{path}: unknown condition with keys {show(sorted(map(str, keys)))}. "
                      f"Supported: {_SUPPORTED}.")


def _parse_field(c: Mapping[str, Any], path: str, budget: Budget) -> Condition:
    key = check_key(c["key"], f"{path}.key")
    rest = set(c) - {"key"}
    for bad in rest & set(_UNSUPPORTED):
        raise ConfigError(f"{path}.{bad}: {_UNSUPPORTED[bad]} are not supported. Supported: {_SUPPORTED}.")
    if rest == {"is_null"} or rest == {"is_empty"}:  # the FieldCondition spelling
        name = rest.pop()
        if c[name] is not True:
            raise ConfigError(f"{path}.{name}: only true is supported (use must_not for false).")
        return IsNull(key) if name == "is_null" else IsEmpty(key)
    if rest == {"match"}:
        return _parse_match(key, c["match"], f"{path}.match", budget)
    if rest == {"range"}:
        return _parse_range(key, c["range"], f"{path}.range")
    raise ConfigError(f"{path}: a field condition takes 'key' and exactly one of match / range, "
                      f"got {show(sorted(map(str, c)))}. Supported: {_SUPPORTED}.")


def _parse_match(key: str, m: Any, path: str, budget: Budget) -> Match:
    if not isinstance(m, Mapping) or len(m) != 1:
        raise ConfigError(f"{path} must be one of {{\"value\": V}}, {{\"any\": [...]}}, "
                          f"{{\"except\": [...]}}, got {show(m)}.")
    kind, value = next(iter(m.items()))
    if kind in _UNSUPPORTED_MATCH:
        raise ConfigError(f"{path}.{kind}: {_UNSUPPORTED_MATCH[kind]} is not supported by slimvec's "
                          "filters (it needs Qdrant's full-text index); use match value / any.")
    if kind == "value":
        if not isinstance(value, (str, int)):  # bool is an int
            raise ConfigError(f"{path}.value must be a string, integer or boolean, got "
                              f"{type(value).__name__} {show(value, 40)}"
                              + ("; for a float use range {gte: x, lte: x}." if isinstance(value, float) else "."))
        check_int64(value, f"{path}.value")
        return Match(key, "value", (value,))
    if kind in ("any", "except"):
        ok = isinstance(value, list) and (all(isinstance(v, str) for v in value) or all(
            isinstance(v, int) and not isinstance(v, bool) for v in value))
        if not ok:
            raise ConfigError(f"{path}.{kind} must be a list of strings or a list of integers (as in "
                              f"Qdrant), got {show(value)}.")
        budget.take(f"{path}.{kind}", values=len(value))
        for v in value:
            check_int64(v, f"{path}.{kind}")
        return Match(key, kind, tuple(value))
    raise ConfigError(f"{path}: unknown match kind {show(kind)}; expected value, any or except.")


def _parse_range(key: str, r: Any, path: str) -> Range:
    if not isinstance(r, Mapping) or not r:
        raise ConfigError(f"{path} must be an object with some of gt, gte, lt, lte, got {show(r)}.")
    bounds: dict[str, float] = {}
    for name, v in r.items():
        if name not in ("gt", "gte", "lt", "lte"):
            raise ConfigError(f"{path}: unknown bound {show(name)}; expected gt, gte, lt or lte.")
        if v is None:
            continue
        if isinstance(v, str) and (micros := datetime_micros(v)) is not None:
            bounds[name] = micros
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or (
                isinstance(v, float) and not math.isfinite(v)) or (
                isinstance(v, int) and v.bit_length() > 1000):
            what = ("it must be a number or a datetime such as 2024-05-01T12:00:00Z (RFC 3339)" if isinstance(
                v, str) else "it must be a finite number (the limit: a magnitude below 2**1000)")
            raise ConfigError(f"{path}.{name}: {what}, got {show(v, 40)}.")
        else:
            bounds[name] = v  # an integer beyond 64 bits stays exact (stores evaluate it in Python)
    dated = sum(isinstance(v, str) for v in r.values())
    if dated and dated != len(bounds):
        raise ConfigError(f"{path}: bounds must be all numbers or all datetimes, got {show(r)}.")
    return Range(key, **bounds, datetime=bool(dated))
