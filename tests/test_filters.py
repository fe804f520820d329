"""slimvec.filters: parse errors, Qdrant semantics, and the Qdrant translations agree with
Filter.matches on real payloads (Qdrant Edge and qdrant-client local mode, run both)."""

from __future__ import annotations

import json

import pytest

from slimvec.connectors.qdrant_filter import edge_native, to_qdrant_client, to_qdrant_edge
from slimvec.errors import ConfigError
from slimvec.filters import Filter, HasId, Match, Range, parse_filter

PAYLOADS = {
    1: {"lang": "en", "year": 2020, "tags": ["news", "tech"], "meta": {"src": "web", "score": 0.5}},
    2: {"lang": "fr", "year": 2021, "tags": ["blog"], "meta": {"src": "rss", "score": 1.5}},
    3: {"lang": "en", "year": 2019, "tags": [], "author": None},
    4: {"lang": "de", "year": 2022.5, "author": "ann", "meta": {"src": "web"}},
    5: {"lang": ["en", "fr"], "year": [2018, 2023], "flag": True},
    6: {"flag": False, "count": 1, "author": [None]},
    7: {},
    8: {"items": [{"n": 1, "c": "x"}, {"n": 5, "c": "y"}], "lang": "EN"},
    9: {"year": "2020", "count": 1.0, "flag": 1},
    10: {"when": "2024-05-01T12:00:00Z", "year": 2021}, 11: {"when": ["2024-05-01 13:30", "x"]},
    12: {"when": "2024-05-02T01:00:00+02:00"}, 13: {"when": "2024-05-01"}, 14: {"when": 1714521600},
}

FILTERS = [
    {"must": [{"key": "lang", "match": {"value": "en"}}]},
    {"must": [{"key": "lang", "match": {"any": ["fr", "de"]}}]},
    {"must": [{"key": "lang", "match": {"except": ["en"]}}]},
    {"must": [{"key": "tags", "match": {"except": ["news"]}}]},
    {"must": [{"key": "year", "range": {"gte": 2020}}]},
    {"must": [{"key": "year", "range": {"gt": 2019, "lt": 2022}}]},
    {"must": [{"key": "meta.src", "match": {"value": "web"}}]},
    {"must": [{"key": "meta.score", "range": {"lte": 1.0}}]},
    {"must": [{"key": "items[].n", "range": {"gte": 5}}]},
    {"must": [{"key": "items[].c", "match": {"value": "x"}}]},
    {"must": [{"is_null": {"key": "author"}}]},
    {"must": [{"is_empty": {"key": "tags"}}]},
    {"must": [{"is_empty": {"key": "author"}}]},
    {"must": [{"has_id": [1, 4, 7]}]},
    {"should": [{"key": "lang", "match": {"value": "fr"}}, {"key": "flag", "match": {"value": True}}]},
    {"must_not": [{"key": "lang", "match": {"value": "en"}}]},
    {"must": [{"key": "flag", "match": {"value": False}}]},
    {"must": [{"key": "count", "match": {"value": 1}}]},
    {"must": [{"key": "year", "match": {"value": 2020}}]},
    {"must": [{"should": [{"key": "lang", "match": {"value": "de"}}, {"has_id": [2]}]}],
     "must_not": [{"must": [{"key": "year", "range": {"gte": 2022}}]}]},
    {"must": [{"key": "lang", "match": {"value": "en"}}], "should": [{"key": "year", "range": {"lt": 2020}}]},
    {"must_not": [{"is_empty": {"key": "tags"}}, {"key": "lang", "match": {"value": "fr"}}]},
    {"must": [{"key": "when", "range": {"gt": "2024-05-01T00:00:00Z", "lte": "2024-05-01T23:00:00.5Z"}}]},
    {"must": [{"key": "when", "range": {"gte": "2024-05-01 13:00:00+01:00"}}]},
    {"must_not": [{"key": "when", "range": {"lt": "2024-05-01T12:00:00+00:00"}}]},
]

# The semantics table (id sets) that Qdrant itself gives for FILTERS, checked below on Filter.matches
# (qdrant-client's local mode and Qdrant Edge, printed by running both on PAYLOADS)
_LATE = set(range(10, 15))
EXPECTED = [
    {1, 3, 5}, {2, 4, 5}, {2, 4, 5, 8}, {1, 2}, {1, 2, 4, 5, 10},
    {1, 2, 10}, {1, 4}, {1}, {8}, {8}, {3, 6}, {3, 4, 5, 6, 7, 8, 9} | _LATE, {1, 2, 3, 5, 7, 8, 9} | _LATE,
    {1, 4, 7}, {2, 5}, {2, 4, 6, 7, 8, 9} | _LATE, {6}, {6}, {1}, {2}, {3, 5},
    {1}, {10, 11, 12}, {10, 11, 12}, set(range(1, 15)) - {13},
]


def _py(flt: Filter) -> set[int]:
    return {i for i, p in PAYLOADS.items() if flt.matches(i, p)}


@pytest.mark.parametrize("i", range(len(FILTERS)))
def test_semantics_table(i: int) -> None:
    assert _py(parse_filter(FILTERS[i])) == EXPECTED[i], json.dumps(FILTERS[i])


def test_qdrant_edge_agrees_with_matches(tmp_path) -> None:
    import qdrant_edge as q

    shard = q.EdgeShard.create(str(tmp_path / "shard"), q.EdgeConfig(
        vectors=q.EdgeVectorParams(size=2, distance=q.Distance.Cosine)))
    try:
        shard.update(q.UpdateOperation.upsert_points(
            [q.Point(i, [1.0, float(i)], p) for i, p in PAYLOADS.items()]))
        for spec in FILTERS:
            flt = parse_filter(spec)
            if not edge_native(flt):  # the binding reads True as 1: the store evaluates these
                continue
            recs, _ = shard.scroll(q.ScrollRequest(limit=100, filter=to_qdrant_edge(flt)))
            assert {int(r.id) for r in recs} == _py(flt), json.dumps(spec)
    finally:
        shard.close()


def test_qdrant_client_agrees_with_matches() -> None:
    from qdrant_client import QdrantClient, models

    client = QdrantClient(":memory:")
    client.create_collection("c", vectors_config=models.VectorParams(size=2, distance=models.Distance.COSINE))
    client.upsert("c", [models.PointStruct(id=i, vector=[1.0, float(i)], payload=p)
                        for i, p in PAYLOADS.items()])
    for spec in FILTERS:
        flt = parse_filter(spec)
        recs, _ = client.scroll("c", scroll_filter=to_qdrant_client(flt), limit=100)
        assert {int(r.id) for r in recs} == _py(flt), json.dumps(spec)
    client.close()


@pytest.mark.parametrize("spec, words", [
    ('{"must": [', "not valid JSON"),
    ([1], "must be a JSON object"),
    ({"must": [{"key": "a", "match": {"text": "x"}}]}, "filter.must[0].match.text: full-text"),
    ({"must": [{"key": "loc", "geo_radius": {}}]}, "geo filters"),
    ({"must": [{"nested": {"key": "a", "filter": {}}}]}, "filter.must[0].nested: nested"),
    ({"filter": []}, "unknown key 'filter'"),
    ({"must": [{"key": "a", "match": {"value": 1.5}}]}, "use range"),
    ({"must": [{"key": "a", "match": {"any": ["x", 1]}}]}, "filter.must[0].match.any must be a list"),
    ({"must": [{"key": "a", "range": {"gte": "2020-01-32"}}]}, "must be a number or a datetime"),
    ({"must": [{"key": "a", "range": {"gte": "2020-01-01", "lt": 5}}]}, "all numbers or all datetimes"),
    ({"must": [{"key": "a", "range": {"above": 1}}]}, "unknown bound 'above'"),
    ({"should": [{"has_id": "7"}]}, "filter.should[0].has_id must be a list"),
    ({"must": [{"is_null": "a"}]}, 'is_null must be {"key": "FIELD"}'),
    ({"must": [{"key": "", "match": {"value": 1}}]}, "payload field name"),
    ({"must": [{"key": "a"}]}, "exactly one of match / range"),
    ({"must": [{"kee": "a"}]}, "unknown condition"),
    ({"min_should": {}}, "min_should"),
])
def test_parse_errors_name_the_path(spec, words) -> None:
    with pytest.raises(ConfigError, match=None) as info:
        parse_filter(spec)
    assert words in str(info.value)


def test_parse_shapes_and_round_trip() -> None:
    assert parse_filter(None) is None and parse_filter({}) is None and parse_filter("  ") is None
    flt = parse_filter('{"must": {"key": "a", "range": {"gte": 1}}, "must_not": [{"has_id": [3]}]}')
    assert flt.must == (Range("a", gte=1),) and flt.must_not == (HasId(frozenset({3})),)
    assert parse_filter(flt.to_json()) == flt
    mapped = flt.map_ids(lambda i: i * 10)
    assert mapped.must_not == (HasId(frozenset({30})),)
    assert parse_filter({"must": [{"key": "a", "match": {"any": [1, 2]}}]}).must == (Match("a", "any", (1, 2)),)
    assert flt.keys() == {"a"}


def test_edge_binding_reads_booleans_as_integers() -> None:
    """Why edge_native exists: if this starts failing, the binding was fixed and the Python
    fallback of the Qdrant Edge store for boolean matches can go."""
    import qdrant_edge as q

    assert q.MatchValue(True).value == 1 and not isinstance(q.MatchValue(True).value, bool)
    assert not edge_native(parse_filter({"must": [{"key": "f", "match": {"value": True}}]}))
    assert edge_native(parse_filter({"must": [{"key": "f", "match": {"value": 1}}]}))


def test_datetimes_read_as_qdrant_client_local_mode_reads_them() -> None:
    """Every format qdrant-client's local mode lists as Qdrant core's (random instants, offsets
    from -12 to +12 hours, fractions, hour-only offsets, leading spaces, a lowercase z) reads to
    the same microsecond, and what it refuses is refused (a range then skips the value)."""
    import random
    from datetime import UTC, datetime, timedelta, timezone

    from qdrant_client.local import datetime_utils

    from slimvec.filter_syntax import datetime_micros

    rng = random.Random(7)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    texts = ["2021-01-01 00:00:00.000+01", " 2021-01-01T00:00:00z", "2021-01-01 00:00:00 UTC",
             "2021-01-01T00:00+01:00", "2021-1-1", "2021-02-30", "20210101", "2021-01-01T12", "x"]
    for fmt in datetime_utils.available_formats:
        for _ in range(20):
            dt = datetime(2000, 1, 1) + timedelta(seconds=rng.randrange(10 ** 9), microseconds=rng.randrange(10 ** 6))
            if "z" in fmt:
                dt = dt.replace(tzinfo=timezone(timedelta(minutes=15 * rng.randrange(-48, 49))))
            texts.append(dt.strftime(fmt))
    for text in texts:
        ref = datetime_utils.parse(text)
        want = None if ref is None else (ref - epoch) // timedelta(microseconds=1)
        assert datetime_micros(text) == want, text
