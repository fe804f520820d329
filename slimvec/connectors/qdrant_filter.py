"""Filters for the two Qdrant stores: :class:`slimvec.filters.Filter` as ``qdrant_edge.Filter``
and ``qdrant_client.models.Filter``, and where Qdrant Edge would answer otherwise.

Keys go out in Qdrant's path syntax (:func:`slimvec.filter_syntax.qdrant_key`: a part that is not
a plain identifier quoted), so a key with a space, ``'``, ``$`` or ``[`` means the same member on
every store. :func:`edge_native` is False where Qdrant Edge deviates from the semantics of
:mod:`slimvec.filters` (a boolean match, which its binding reads as an integer; a range bound of
magnitude 2**53 or more, which Qdrant compares as float64): the store evaluates those with
:meth:`~slimvec.filters.Filter.matches` instead.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from slimvec.filter_syntax import qdrant_key
from slimvec.filters import Condition, Filter, HasId, IsEmpty, IsNull, Match, Range

__all__ = ["edge_native", "to_qdrant_client", "to_qdrant_edge"]

#: integers beyond this magnitude are not all float64s: a range bound there is compared exactly
_EXACT_FLOAT = 1 << 53


def _point_ids(ids: Any) -> list[Any]:
    """The ids of a ``has_id`` that can be point ids (0 <= id < 2**64); others match nothing."""
    return sorted(i for i in ids if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 1 << 64)


def _bounds(c: Range) -> dict[str, Any]:
    """The range's bounds by name, as its JSON writes them (a datetime in RFC 3339)."""
    return Filter(must=(c,)).to_json()["must"][0]["range"]


def edge_native(flt: Filter | None, indexed: Collection[str] = ()) -> bool:
    """False when Qdrant Edge would answer the filter otherwise than :meth:`Filter.matches`: a
    boolean match value (the binding reads it as an integer), a range bound of magnitude 2**53 or
    more (compared as float64 there), or a range, ``except``, ``is_null`` or ``is_empty`` on a key
    with a payload index (``indexed``, Qdrant's spelling): answered from the index, those skip
    values of another type than the index's (an integer index misses a float, ``except`` an
    object), measured in ``tests/test_filters_differential.py``."""
    if flt is None:
        return True
    for c in flt.conditions():
        if isinstance(c, Match) and any(isinstance(v, bool) for v in c.values):
            return False
        if isinstance(c, Range) and not c.datetime and any(b is not None and abs(b) >= _EXACT_FLOAT
                                        for b in (c.gt, c.gte, c.lt, c.lte)):
            return False
        if indexed and isinstance(c, (Range, IsNull, IsEmpty, Match)) and not (
                isinstance(c, Match) and c.kind != "except") and qdrant_key(c.key) in indexed:
            return False
    return True


def to_qdrant_edge(flt: Filter | None, q: Any = None) -> Any:
    """The filter as ``qdrant_edge.Filter`` (``q`` is the imported ``qdrant_edge`` module)."""
    if flt is None:
        return None
    if q is None:
        import qdrant_edge as q

    def cond(c: Condition) -> Any:
        if isinstance(c, Filter):
            return to_qdrant_edge(c, q)
        if isinstance(c, HasId):
            return q.HasIdCondition(set(_point_ids(c.ids)))
        if isinstance(c, IsNull):
            return q.IsNullCondition(qdrant_key(c.key))
        if isinstance(c, IsEmpty):
            return q.IsEmptyCondition(qdrant_key(c.key))
        if isinstance(c, Range):
            kind = q.RangeDateTime if c.datetime else q.RangeFloat
            return q.FieldCondition(qdrant_key(c.key), range=kind(**_bounds(c)))
        match = {"value": lambda: q.MatchValue(c.values[0]), "any": lambda: q.MatchAny(list(c.values)),
                 "except": lambda: q.MatchExcept(list(c.values))}[c.kind]()
        return q.FieldCondition(qdrant_key(c.key), match=match)

    return q.Filter(must=[cond(c) for c in flt.must] or None,
                    should=[cond(c) for c in flt.should] or None,
                    must_not=[cond(c) for c in flt.must_not] or None)


def to_qdrant_client(flt: Filter | None) -> Any:
    """The filter as ``qdrant_client.models.Filter``."""
    if flt is None:
        return None
    from qdrant_client import models as m

    def cond(c: Condition) -> Any:
        if isinstance(c, Filter):
            return to_qdrant_client(c)
        if isinstance(c, HasId):
            return m.HasIdCondition(has_id=_point_ids(c.ids))
        key = qdrant_key(c.key)
        if isinstance(c, IsNull):
            return m.IsNullCondition(is_null=m.PayloadField(key=key))
        if isinstance(c, IsEmpty):
            return m.IsEmptyCondition(is_empty=m.PayloadField(key=key))
        if isinstance(c, Range):
            kind = m.DatetimeRange if c.datetime else m.Range
            return m.FieldCondition(key=key, range=kind(**_bounds(c)))
        if c.kind == "value":
            match: Any = m.MatchValue(value=c.values[0])
        elif c.kind == "any":
            match = m.MatchAny(any=list(c.values))
        else:
            match = m.MatchExcept(**{"except": list(c.values)})
        return m.FieldCondition(key=key, match=match)

    return m.Filter(must=[cond(c) for c in flt.must] or None,
                    should=[cond(c) for c in flt.should] or None,
                    must_not=[cond(c) for c in flt.must_not] or None)
