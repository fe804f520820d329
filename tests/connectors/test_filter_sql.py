"""Issue 25 item 2 (speed): FAISS / hnswlib filters run as SQL over the payload JSON.

On every registered store the filter's ids equal the Python evaluation (Filter.matches), and on
the payload-table stores the SQL path equals the Python path; Qdrant Edge (a registered store)
answers the same battery natively. Field names are untrusted: quotes, dots, unicode, brackets.
"""

from __future__ import annotations

import numpy as np
import pytest

from slimvec.connectors import make_store
from slimvec.connectors.payload_sql import filter_sql, index_sql
from slimvec.connectors.payloads import PayloadTable, select_filter
from slimvec.errors import ConfigError
from slimvec.filters import parse_filter
from tests.connectors.stores import payload_table_specs, store_specs
from tests.test_filters import FILTERS, PAYLOADS

EXTRA = {
    10: {"it's": "o'k", "naïve ключ": "é", "lang": "EN", "tags": ["news", 7, None]},
    11: {"it's": ["x", "o'k"], "naïve ключ": ["é", "ü"], "deep": {"a": {"b": [1, 2]}}},
    12: {"deep": [{"a": {"b": 3}}, {"a": [{"b": 4}, {"b": None}]}], "tags": [["news"]], "count": 7},
    13: {"count": 9007199254740993, "score": 1e300, "lang": "[en]", "tags": "news"},
    14: {"year": True, "deep": {"a": []}, "meta": [{"src": "web"}, {"src": ["rss", "x"]}]},
    15: {"q\"k": "v", "back\\slash": 1, "tab\tkey": 1, "meta": {}},
    16: None,  # a point without a payload row
}
ALL = {**PAYLOADS, **EXTRA}
MORE = [
    {"must": [{"key": "it's", "match": {"value": "o'k"}}]},
    {"must": [{"key": "naïve ключ", "match": {"any": ["é"]}}]},
    {"must": [{"key": "naïve ключ", "match": {"except": ["é"]}}]},
    {"must": [{"key": "deep.a.b", "range": {"gte": 2}}]},
    {"must": [{"key": "deep.a.b", "match": {"value": 3}}]},
    {"must": [{"is_null": {"key": "deep.a.b"}}]},
    {"must": [{"is_empty": {"key": "deep.a"}}]},
    {"must": [{"is_empty": {"key": "deep.a.b"}}]},
    {"must": [{"key": "meta[].src", "match": {"value": "rss"}}]},
    {"must": [{"key": "meta.src", "match": {"except": ["web"]}}]},
    {"must": [{"key": "tags", "match": {"value": 7}}]},
    {"must": [{"key": "tags", "match": {"value": "news"}}]},
    {"must": [{"is_null": {"key": "tags"}}]},
    {"must": [{"key": "count", "range": {"gt": 8}}]},
    {"must": [{"key": "score", "range": {"gte": 1}}]},
    {"must": [{"key": "lang", "match": {"any": ["[en]", "EN"]}}]},
    {"must": [{"key": "year", "match": {"value": True}}]},
    {"must": [{"key": "flag", "match": {"value": True}}]},
    {"must": [{"key": "lang", "match": {"except": []}}]},
    {"must": [{"key": "lang", "match": {"any": [f"x{i}" for i in range(300)] + ["fr"]}}]},
    {"must": [{"has_id": [16, 3, 10]}]},
    {"must_not": [{"has_id": [16]}], "should": [{"is_empty": {"key": "lang"}}]},
    {"must": [{"is_empty": {"key": "nothing"}}]},
    {"should": [{"must": [{"key": "deep.a.b", "match": {"any": [1, 4]}}]},
                {"must_not": [{"key": "meta.src", "match": {"value": "web"}}]}]},
]
#: filters SQL cannot say exactly (a key SQLite's JSON paths cannot spell, a bound beyond 64-bit
#: integers): evaluated in Python, same results
FALLBACK = [
    {"must": [{"key": "tab\tkey", "match": {"value": 1}}]},
    {"must": [{"key": "count", "range": {"gt": 2**64}}]},
]
BATTERY = FILTERS + MORE + FALLBACK


def _expected(flt) -> list[int]:
    return sorted(i for i, p in ALL.items() if flt.matches(i, p))


@pytest.fixture(scope="module", params=store_specs())
def loaded(request, tmp_path_factory):
    ids = np.asarray(sorted(ALL), dtype=np.int64)
    vecs = np.random.default_rng(0).standard_normal((len(ids), 8)).astype(np.float32)
    store = make_store(request.param, tmp_path_factory.mktemp("s") / "store").create(8)
    store.upsert(ids, vecs, [ALL[int(i)] for i in ids])
    store.finalize()
    store.flush()
    yield request.param, store
    store.close()


def test_the_battery_translates_except_the_keys_sql_cannot_spell():
    assert all(filter_sql(parse_filter(f)) is not None for f in FILTERS + MORE)
    assert all(filter_sql(parse_filter(f)) is None for f in FALLBACK)


@pytest.mark.parametrize("number", range(len(BATTERY)))
def test_every_store_answers_the_battery_as_python_does(loaded, number):
    spec, store = loaded
    flt = parse_filter(BATTERY[number])
    expected = _expected(flt)
    table = getattr(store, "_payloads", None)
    assert store.filter_ids(flt).tolist() == expected, BATTERY[number]
    if isinstance(table, PayloadTable):
        live = store.ids()
        sql = select_filter(table, live, flt).tolist()
        assert sql == select_filter(table, live, flt, sql=False).tolist() == expected


def test_keys_an_expression_index_cannot_serve_are_not_indexed():
    assert index_sql('a"b') is None and index_sql("a[]") is None and index_sql("a.b") is None
    assert index_sql("a b") is not None and index_sql('"a.b"') is not None


def test_a_declared_field_is_an_expression_index_sqlite_uses(tmp_path):
    for spec in payload_table_specs():
        ids = np.arange(2000, dtype=np.int64)
        vecs = np.random.default_rng(1).standard_normal((2000, 4)).astype(np.float32)
        store = make_store(spec, tmp_path / spec).create(4)
        try:
            store.upsert(ids, vecs, [{"lang": ["en", "fr", "de"][i % 3], "n": i} for i in range(2000)])
            assert store.create_payload_index("lang", "keyword") is True
            assert store.create_payload_index("meta.src", "keyword") is False  # a dotted path
            store.flush()
            where, params = filter_sql(parse_filter({"must": [{"key": "lang", "match": {"value": "fr"}}]}))
            plan = " ".join(str(r) for r in store._payloads._db.execute(
                f"EXPLAIN QUERY PLAN SELECT id FROM payloads WHERE {where}", params))
            assert index_sql("lang")[0] in plan, plan
            got = store.filter_ids(parse_filter({"must": [{"key": "lang", "match": {"value": "fr"}}]}))
            assert got.tolist() == list(range(1, 2000, 3))
        finally:
            store.close()


@pytest.mark.parametrize("key, written", [("a'); DROP TABLE payloads; --", None),
                                          ("]'", "\"]'\""), ("$", None), ("k[0]", '"k[0]"')])
def test_hostile_field_names_are_quoted_or_left_to_python(tmp_path, key, written):
    table = PayloadTable(tmp_path / "p.sqlite")
    table.put([1, 2], [{key: "v"}, {"other": 1}])
    table.commit()
    flt = parse_filter({"must": [{"key": written or key, "match": {"value": "v"}}]})
    live = np.asarray([1, 2], dtype=np.int64)
    assert select_filter(table, live, flt).tolist() == [1]
    assert table.row_ids().tolist() == [1, 2]  # the table is intact
    assert table.create_index(written or key) is True
    table.close()


@pytest.mark.parametrize("key", ['x" OR 1=1 --', "back\\slash", "]'", "a..b", "k[x]", 'a"b"'])
def test_keys_no_store_can_address_are_refused(key):
    """Qdrant's JSON paths cannot spell a part with ``"`` or ``\\``; a bracket or a dot outside
    quotes is path syntax: such keys are a ConfigError naming the key, on every store alike."""
    with pytest.raises(ConfigError, match="is not a payload key"):
        parse_filter({"must": [{"key": key, "match": {"value": "v"}}]})
