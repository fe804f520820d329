"""Payload filters as SQL over the SQLite payload table of FAISS and hnswlib (issue 25 item 2).

:func:`filter_sql` translates a :class:`slimvec.filters.Filter` into a ``WHERE`` clause over
``payloads(id, doc)`` (``doc`` is the payload's JSON text) with the same semantics as
:meth:`~slimvec.filters.Filter.matches`: a key's member names and indexes are one SQLite JSON
path (``$."a"."b"[0]``, which like Qdrant reaches nothing through a value of the wrong kind), each
``[]`` one ``json_each`` over the array there (its element paths built from ``json_each.key``), a
final array matches when one of its elements does, values compare typed (a boolean never equals
an integer, an integer never a float). Values are bound parameters; key parts, which are
untrusted input too, are quoted as SQL string literals (a part with a control character, which
SQLite's JSON paths cannot spell, and a range bound beyond 64-bit integers make the filter
``None``: evaluated in Python). ``AND`` / ``OR`` chains are balanced trees, so a filter within
:mod:`slimvec.filter_syntax`'s limits stays within SQLite's (expression depth, parser stack,
64 tables a join, bound parameters).

A condition on a top-level key reads ``json_extract(doc, '$."key"')`` first, the expression
:func:`index_sql` indexes for fields declared with ``--payload-index``, so SQLite can answer it
from the index; only rows whose value there is an array go through ``json_each``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from slimvec.filter_syntax import PathItem, key_path
from slimvec.filters import Condition, Filter, HasId, IsEmpty, IsNull, Match, Range

__all__ = ["filter_sql", "index_sql", "json_path"]

#: beyond this many values, ``match any`` binds one JSON array instead of one parameter each
#: (so a filter of MAX_CONDITIONS conditions binds at most a few thousand parameters)
_MANY = 4
_INT64 = (-(1 << 63), (1 << 63) - 1)
#: a WHERE clause past these is left to Python: SQLite's parser stack overflows near 90 nested
#: parentheses (fewer inside subqueries: 54 failed in tests/test_filters_bounds.py's shapes),
#: and SQLite compiles a long clause slowly (1,000 range conditions, 550 kB: 2.3 s to prepare)
_MAX_PARENS = 40
_MAX_CHARS = 200_000
_MAX_PARAMS = 30_000


class Untranslatable(Exception):
    """A filter SQL cannot express exactly (evaluated in Python instead)."""


def _label(part: str) -> str:
    """One key of a JSON path, quoted; refuses what SQLite's path syntax cannot spell."""
    if not part or any(ch in part for ch in '"\\') or any(ord(ch) < 0x20 for ch in part):
        raise Untranslatable(part)
    return f'"{part}"'


def json_path(parts: Sequence[PathItem]) -> str:
    """``['a', 'b', 0]`` -> ``'$."a"."b"[0]'`` as an SQL string literal (single quotes doubled).

    Raises
    ------
    Untranslatable
        A part SQLite cannot address (``"``, ``\\``, control characters), or a ``[]``.
    """
    if any(p is None for p in parts):
        raise Untranslatable("[]")
    return f"'${_steps(parts)}'"


def _steps(parts: Sequence[PathItem]) -> str:
    """The steps of a JSON path after its ``$`` (``."a"[0]``), single quotes doubled."""
    text = "".join(f"[{p}]" if isinstance(p, int) else "." + _label(str(p)) for p in parts)
    return text.replace("'", "''")


def _parts(key: str) -> tuple[PathItem, ...]:
    return key_path(key)


def _tree(op: str, terms: list[str]) -> str:
    """``terms`` joined by ``op`` as a balanced tree (a chain of 1,000 would be an expression
    1,000 deep, past SQLite's limit)."""
    if len(terms) <= 4:
        return "(" + f" {op} ".join(terms) + ")"
    mid = len(terms) // 2
    return f"({_tree(op, terms[:mid])} {op} {_tree(op, terms[mid:])})"


def index_sql(field: str) -> tuple[str, str] | None:
    """(index name, ``CREATE INDEX`` statement) of the expression index of a top-level payload
    ``field``, or None when the field cannot be indexed this way (a dotted path, or characters a
    JSON path cannot spell). The name is derived from a hash of the field, never from its text."""
    try:
        parts = _parts(field)
        path = json_path(parts)
    except (Untranslatable, ValueError):  # a key no filter can name, a part SQLite cannot spell
        return None
    if len(parts) != 1:
        return None
    name = "payload_idx_" + hashlib.sha256(field.encode("utf-8")).hexdigest()[:16]
    return name, f'CREATE INDEX IF NOT EXISTS "{name}" ON payloads (json_extract(doc, {path}))'


class _Builder:
    """Accumulates SQL text and its parameters; table aliases are numbered per builder."""

    def __init__(self) -> None:
        self.params: list[Any] = []
        self._n = 0
        self._chars = 0

    def alias(self) -> str:
        self._n += 1
        return f"x{self._n}"

    def filter(self, flt: Filter) -> str:
        parts = [self.cond(c) for c in flt.must]
        if flt.should:
            parts.append(_tree("OR", [self.cond(c) for c in flt.should]))
        if flt.must_not:
            # a missing field makes a condition NULL, false everywhere but under NOT, where
            # NOT NULL would drop the row Python's ``not`` keeps: 0 it first
            parts.append("NOT COALESCE(" + _tree("OR", [self.cond(c) for c in flt.must_not]) + ", 0)")
        return _tree("AND", parts) if parts else "1"

    def cond(self, c: Condition) -> str:
        text = self._cond(c)
        self._chars += len(text)  # nested filters count twice: an upper bound, checked early
        if self._chars > _MAX_CHARS:
            raise Untranslatable("a clause too long for SQLite to compile quickly")
        return text

    def _cond(self, c: Condition) -> str:
        if isinstance(c, Filter):
            return self.filter(c)
        if isinstance(c, HasId):
            ids = sorted(i for i in c.ids if isinstance(i, int) and _INT64[0] <= i <= _INT64[1])
            self.params.append(json.dumps(ids))
            return "(payloads.id IN (SELECT value FROM json_each(?)))"
        if isinstance(c, IsEmpty):
            return self.is_empty(c.key)
        return self.field(c)

    # ------------------------------------------------------------------ key walking
    def walk(self, parts: tuple[PathItem, ...]) -> tuple[list[str], list[str], str]:
        """FROM items and WHERE terms that reach the raw values of ``parts``, and the path (an SQL
        expression over ``payloads.doc``) of each: member names and indexes are one JSON path,
        each ``[]`` a ``json_each`` over the array there whose element paths are built from its
        ``key`` column (so every later step reads ``payloads.doc`` again, never a text value)."""
        froms: list[str] = []
        path, run = "", list[PathItem]()
        for step in parts:
            if step is not None:
                run.append(step)
                continue
            path = f"{path} || '{_steps(run)}'" if path else json_path(run)
            x = self.alias()
            froms.append(f"json_each(CASE WHEN json_type(payloads.doc, {path}) = 'array' THEN "
                         f"payloads.doc END, {path}) AS {x}")
            path, run = f"{path} || '[' || {x}.key || ']'", []
        if run:
            path = f"{path} || '{_steps(run)}'" if path else json_path(run)
        return froms, [], f"({path})" if froms else path

    def values_exist(self, key: str, pred: str) -> str:
        """EXISTS one value at ``key`` (a final array flattened) satisfying ``pred``, in which
        ``{v}`` stands for the ``json_each`` row of the value."""
        froms, wheres, path = self.walk(_parts(key))
        v = self.alias()
        froms.append(_expand("payloads.doc", path, v))
        wheres.append(f"json_type(payloads.doc, {path}) IS NOT NULL")
        wheres.append(pred.replace("{v}", v))
        return f"EXISTS (SELECT 1 FROM {', '.join(froms)} WHERE {' AND '.join(wheres)})"

    def is_empty(self, key: str) -> str:
        froms, wheres, path = self.walk(_parts(key))
        kind = f"json_type(payloads.doc, {path})"
        wheres.append(f"{kind} IS NOT NULL AND {kind} <> 'null' AND NOT ({kind} = 'array' AND "
                      f"json_array_length(payloads.doc, {path}) = 0)")
        if not froms:
            return f"NOT ({' AND '.join(wheres)})"
        return f"NOT EXISTS (SELECT 1 FROM {', '.join(froms)} WHERE {' AND '.join(wheres)})"

    # ------------------------------------------------------------------ field conditions
    def field(self, c: Match | Range | IsNull) -> str:
        if isinstance(c, IsNull):
            return self.values_exist(c.key, "{v}.type = 'null'")
        if isinstance(c, Range):
            return self.range(c)
        typed, values = _typed(c.values)
        if c.kind == "except":
            eq = self.equals("{v}.value", "{v}.type", typed, values)
            return self.values_exist(c.key, "{v}.type <> 'null' AND NOT (" + eq + ")")
        parts = _parts(c.key)
        if None not in parts:  # the (indexed) expression first, json_each only for array values
            path = json_path(parts)
            top = self.equals(f"json_extract(payloads.doc, {path})", f"json_type(payloads.doc, {path})",
                              typed, values)
            inner = self.values_exist(c.key, self.equals("{v}.value", "{v}.type", typed, values))
            return f"(({top}) OR ({_array_rows(path)} AND {inner}))"
        return self.values_exist(c.key, self.equals("{v}.value", "{v}.type", typed, values))

    def equals(self, value: str, kind: str, typed: str, values: list[Any]) -> str:
        """``value`` (of JSON type ``kind``) equals one of ``values`` of JSON type ``typed``."""
        if typed in ("true", "false"):  # json_extract gives 1 / 0: the indexed expression first
            return f"{value} = {int(typed == 'true')} AND {kind} = '{typed}'"
        if not values:
            return "0"
        if len(values) > _MANY:
            self.params.append(json.dumps(values))
            test = f"{value} IN (SELECT value FROM json_each(?))"
        else:
            self.params.extend(values)
            test = f"{value} IN ({', '.join('?' * len(values))})"
        return f"{test} AND {kind} = '{typed}'"

    def range(self, c: Range) -> str:
        def bounds(value: str) -> str:
            if c.datetime:  # the PayloadTable's function: Qdrant's datetime forms, in microseconds
                value = f"slimvec_datetime({value})"
            out = []
            for name, op in (("gt", ">"), ("gte", ">="), ("lt", "<"), ("lte", "<=")):
                bound = getattr(c, name)
                if isinstance(bound, int) and not _INT64[0] <= bound <= _INT64[1]:
                    raise Untranslatable("a bound beyond 64-bit integers")  # exact in Python
                if bound is not None:
                    self.params.append(bound)
                    out.append(f"{value} {op} ?")
            return " AND ".join(out) or "1"

        numeric = "{kind} = 'text'" if c.datetime else "{kind} IN ('integer', 'real')"
        parts = _parts(c.key)
        if None not in parts:
            path = json_path(parts)
            top = (bounds(f"json_extract(payloads.doc, {path})") + " AND "
                   + numeric.format(kind=f"json_type(payloads.doc, {path})"))
            inner = self.values_exist(c.key, numeric.format(kind="{v}.type") + " AND "
                                      + bounds("{v}.value"))
            return f"(({top}) OR ({_array_rows(path)} AND {inner}))"
        return self.values_exist(c.key, numeric.format(kind="{v}.type") + " AND " + bounds("{v}.value"))


def _expand(holder: str, path: str, alias: str) -> str:
    """``json_each`` over the value at ``path`` of ``holder``: its elements when it is an array,
    else the value itself (wrapped in a one-element array)."""
    return (f"json_each(CASE WHEN json_type({holder}, {path}) = 'array' THEN {holder} -> {path} "
            f"ELSE json_array(json({holder} -> {path})) END) AS {alias}")


def _array_rows(path: str) -> str:
    """Rows whose top-level value at ``path`` may be an array: ``json_extract`` returns an array
    as its JSON text, which sorts between ``[`` and ``\\`` (a range the expression index can
    serve; a string starting with ``[`` also falls in it and is then tested exactly)."""
    return (f"json_extract(payloads.doc, {path}) >= '[' AND "
            f"json_extract(payloads.doc, {path}) < '\\'")


def _typed(values: tuple[Any, ...]) -> tuple[str, list[Any]]:
    """The JSON type of a match's values and the values to bind (booleans bind nothing)."""
    if values and isinstance(values[0], bool):
        if len(values) != 1:
            raise Untranslatable("several booleans")
        return ("true" if values[0] else "false"), []
    if all(isinstance(v, str) for v in values):
        return "text", list(values)
    if all(isinstance(v, int) and not isinstance(v, bool) and _INT64[0] <= v <= _INT64[1]
           for v in values):
        return "integer", list(values)
    raise Untranslatable("values of mixed or unbounded types")


def filter_sql(flt: Filter) -> tuple[str, list[Any]] | None:
    """A ``WHERE`` clause over ``payloads`` selecting the rows whose payload matches ``flt``,
    and its parameters; None when part of the filter cannot be said in SQL exactly (the caller
    evaluates :meth:`Filter.matches` instead). Rows are only those with a payload row: ids
    without one are the caller's to evaluate on ``{}``."""
    b = _Builder()
    try:
        where = b.filter(flt)
    except Untranslatable:
        return None
    if len(where) > _MAX_CHARS or len(b.params) > _MAX_PARAMS or _parens(where) > _MAX_PARENS:
        return None
    return where, b.params


def _parens(sql: str) -> int:
    """The deepest nesting of parentheses in ``sql`` outside its string literals."""
    depth = deepest = 0
    for part in sql.split("'")[::2]:  # even pieces lie outside '...' ('' splits into two)
        for ch in part:
            if ch == "(":
                depth += 1
                deepest = max(deepest, depth)
            elif ch == ")":
                depth -= 1
    return deepest
