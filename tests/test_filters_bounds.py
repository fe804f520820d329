"""Issue 39 F2: bounded filters. Every limit is checked when a filter is parsed and refused with a
ConfigError naming it (never a RecursionError, OverflowError or an SQLite error), and every filter
within the limits runs on every store: SQLite's join, expression-depth and parser-stack limits
and 64-bit parameters are never reached (the SQL path hands such shapes to Python)."""

from __future__ import annotations

import numpy as np
import pytest

from slimvec.connectors import make_store
from slimvec.errors import ConfigError
from slimvec.filters import MAX_CONDITIONS, MAX_DEPTH, MAX_KEY_LENGTH, MAX_KEY_PARTS, MAX_VALUES, parse_filter
from tests.connectors.stores import fast_specs

PAYLOADS = {i: {"x": i, "big": 2 ** 63 - 1 - i, "a": [[{"b": i}]], "l": [i, None], "s": str(i)}
            for i in range(12)}


def _nested(depth: int, leaf: dict | None = None) -> dict:
    f = {"must": [leaf or {"key": "x", "match": {"value": 1}}]}
    for _ in range(depth):
        f = {"must": [f]}
    return f


def _wide(n: int) -> dict:
    return {"should": [{"key": "x", "match": {"value": i}} for i in range(n)]}


@pytest.mark.parametrize("spec, limit", [
    (_nested(MAX_DEPTH + 1), "MAX_DEPTH"),
    (_nested(300), "MAX_DEPTH"),
    (_nested(1_200), "MAX_DEPTH"),
    ('{"must": [' * 1_200 + '{"key": "x", "match": {"value": 1}}' + "]}" * 1_200, "MAX_DEPTH"),
    ('{"must": [' * 5_000, "MAX_DEPTH"),
    (_wide(MAX_CONDITIONS + 1), "MAX_CONDITIONS"),
    (_wide(5_000), "MAX_CONDITIONS"),
    ({"must": [{"key": "x", "match": {"any": list(range(MAX_VALUES + 1))}}]}, "MAX_VALUES"),
    ({"must": [{"has_id": list(range(MAX_VALUES // 2 + 1))},
               {"key": "s", "match": {"except": ["a"] * (MAX_VALUES // 2)}}]}, "MAX_VALUES"),
    ({"must": [{"key": "k" * (MAX_KEY_LENGTH + 1), "match": {"value": 1}}]}, "MAX_KEY_LENGTH"),
    ({"must": [{"key": ".".join(["p"] * 65), "match": {"value": 1}}]}, "MAX_KEY_PARTS"),
    ({"must": [{"key": "a" + "[]" * MAX_KEY_PARTS, "match": {"value": 1}}]}, "MAX_KEY_PARTS"),
    ({"must": [{"key": "x", "match": {"value": 2 ** 63}}]}, "signed 64-bit"),
    ({"must": [{"key": "x", "match": {"any": [1, -2 ** 63 - 1]}}]}, "signed 64-bit"),
    ({"must": [{"has_id": [2 ** 64]}]}, "integers of 64 bits"),
    ({"must": [{"key": "x", "range": {"gt": 2 ** 1001}}]}, "finite number"),
    ({"must": [{"key": "x", "range": {"gt": 10 ** 5000}}]}, "finite number"),
    ({"must": [{"key": "x", "range": {"lt": float("inf")}}]}, "finite number"),
    ('{"must": [{"key": "x", "range": {"lt": NaN}}]}', "finite number"),
    ('{"must": [{"key": "x", "range": {"lt": 1e999}}]}', "finite number"),
    ('{"must": [{"key": "x", "match": {"value": 1' + "0" * 5_000 + '}}]}', "cannot be read as JSON"),
    ({"must": [{"key": "x", "match": {"value": 10 ** 5000}}]}, "signed 64-bit"),
])
def test_each_limit_is_refused_naming_it(spec, limit):
    with pytest.raises(ConfigError) as info:
        parse_filter(spec)
    assert limit in str(info.value)
    assert len(str(info.value)) < 2_000


def test_a_cycle_is_refused_not_recursed():
    spec: dict = {"must": []}
    spec["must"].append(spec)
    with pytest.raises(ConfigError, match="MAX_DEPTH"):
        parse_filter(spec)


#: filters Qdrant accepts that crashed the SQL path on d34deae (OverflowError, "Expression tree
#: is too large", "parser stack overflow"), and the largest shapes the limits allow
WITHIN = [
    {"must": [{"key": "big", "range": {"gte": 2 ** 63}}]},
    {"must": [{"key": "big", "range": {"lt": 2 ** 64, "gt": -2 ** 70}}]},
    {"must": [{"key": "big", "range": {"gt": 2 ** 63 - 4}}]},
    {"must": [{"key": "x", "range": {"gte": 1e300}}]},
    _wide(MAX_CONDITIONS),
    {"must": [{"key": "x", "range": {"gte": -1, "lt": 100}}] * (MAX_CONDITIONS - 1)},
    {"must_not": [{"key": "l[]", "match": {"value": 100 + i}} for i in range(MAX_CONDITIONS - 1)]},
    _nested(MAX_DEPTH - 1),
    _nested(MAX_DEPTH - 1, {"key": "a" + "[]" * (MAX_KEY_PARTS - 3) + ".b", "match": {"value": 3}}),
    {"must": [{"key": "a[][].b", "match": {"any": list(range(MAX_VALUES))}}]},
    {"must": [{"key": ".".join(["p"] * MAX_KEY_PARTS), "match": {"value": 1}}]},
]


def _deep_and_wide() -> dict:
    leaf = {"key": "a[][].b", "match": {"any": [1, 2, 3, 4, 5, 6]}}
    f: dict = {"must": [leaf]}
    for d in range(MAX_DEPTH - 1):
        f = {"must": [f, {"key": "x", "range": {"gte": d}}], "should": [leaf] * 20,
             "must_not": [{"is_empty": {"key": "a[].b"}}] * 20}
    return f


WITHIN.append(_deep_and_wide())


@pytest.fixture(scope="module", params=fast_specs())
def store(request, tmp_path_factory):
    ids = np.asarray(sorted(PAYLOADS), dtype=np.int64)
    s = make_store(request.param, tmp_path_factory.mktemp("b") / "store").create(4)
    s.upsert(ids, np.random.default_rng(0).standard_normal((len(ids), 4)).astype(np.float32),
             [PAYLOADS[int(i)] for i in ids])
    s.finalize()
    s.flush()
    yield s
    s.close()


@pytest.mark.parametrize("number", range(len(WITHIN)))
def test_filters_within_the_limits_run_on_every_store(store, number):
    flt = parse_filter(WITHIN[number])
    want = sorted(i for i, p in PAYLOADS.items() if flt.matches(i, p))
    assert store.filter_ids(flt).tolist() == want
    found = store.search(np.ones((1, 4), dtype=np.float32), len(PAYLOADS), filter=flt).ids[0]
    assert sorted(int(i) for i in found if i >= 0) == want
