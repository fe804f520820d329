"""The in-memory payload indexes (issue 37): a filter answered from them selects exactly the ids
:meth:`Filter.matches` selects on the stored payloads, after inserts, payload updates, deletes,
reopen and another connection's commit, on every store (a kill -9 during writes:
tests/reliability/test_kill_payload_index.py)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from slimvec.connectors import make_store
from slimvec.connectors.payload_index import positions_of
from slimvec.connectors.payloads import PayloadTable, scan_filter, select_filter
from slimvec.filters import Filter, parse_filter
from tests.connectors.stores import fast_specs

FIELDS = ("lang", "year", "score", "flag", "tags", "when")
#: datetimes in the forms Qdrant reads (equal instants spelt differently), and strings that are not
DATES = ["2024-05-01", "2024-05-01T00:00:00Z", "2024-05-01 02:00:00+02:00", "2024-05-01T12:30:00.25Z",
         "2024-05-02 00:00", "2023-12-31T23:59:59.999999-01:00", "2024-05-1", "tomorrow"]
VALUES = {"when": [*DATES, 1714521600, None], "lang": ["en", "de", "fr", 1, None], "year": [2019, 2020, 2021, 2020.0, 2022.5, True, None],
          "score": [0.1, 0.5, 0.9, 3, -1, None], "flag": [True, False, 0, 1, None],
          "tags": ["a", "b", "c", 7, None]}


def _payload(rng: random.Random) -> dict:
    out: dict = {}
    for f in FIELDS:
        r = rng.random()
        if r < 0.15:
            continue  # missing
        if r < 0.3:
            out[f] = [rng.choice(VALUES[f]) for _ in range(rng.randrange(0, 3))]  # [] and arrays
        else:
            out[f] = rng.choice(VALUES[f])
    if rng.random() < 0.3:
        out["meta"] = {"src": rng.choice(["x", "y"])}  # a dotted key, never indexed
    return out


def _condition(rng: random.Random, ids: list[int], depth: int = 0) -> dict:
    r = rng.random()
    key = rng.choice(FIELDS + ("meta.src",))
    plain = [v for v in VALUES.get(key, ["x", "y"]) if isinstance(v, (str, int)) and v is not None]
    if depth < 2 and r < 0.15:
        return _filter(rng, ids, depth + 1)
    if r < 0.35:
        return {"key": key, "match": {"value": rng.choice(plain)}}
    if r < 0.5:
        kind = rng.choice(["any", "except"])
        same = ([v for v in plain if isinstance(v, str)]
                or [v for v in plain if isinstance(v, int) and not isinstance(v, bool)])
        return {"key": key, "match": {kind: rng.sample(same, min(len(same), rng.randrange(1, 3)))}}
    if r < 0.7:
        bounds = rng.sample(["gt", "gte", "lt", "lte"], rng.randrange(1, 3))
        if key == "when" and rng.random() < 0.7:  # a datetime range
            return {"key": key, "range": {b: rng.choice(DATES[:6]) for b in bounds}}
        return {"key": key, "range": {b: rng.choice([0, 0.5, 2020, 2021.5, -1]) for b in bounds}}
    if r < 0.8:
        return {"is_null": {"key": key}}
    if r < 0.9:
        return {"is_empty": {"key": key}}
    return {"has_id": rng.sample(ids, min(len(ids), 5))}


def _filter(rng: random.Random, ids: list[int], depth: int = 0) -> dict:
    out = {}
    for part in ("must", "should", "must_not"):
        if rng.random() < 0.5:
            out[part] = [_condition(rng, ids, depth) for _ in range(rng.randrange(1, 3))]
    return out or {"must": [_condition(rng, ids, depth)]}


def test_indexed_filters_select_what_matches_selects_through_writes(tmp_path):
    rng = random.Random(37)
    table = PayloadTable(tmp_path / "payloads.sqlite")
    ids = list(range(1, 400))
    table.put(ids[:300], [_payload(rng) for _ in ids[:300]])  # ids 300.. have no payload row
    for f in FIELDS:
        table.create_index(f)
    table.commit()
    assert table.indexed_fields() == sorted(FIELDS)
    live = np.asarray(ids, dtype=np.int64)
    # the same filter objects asked in every phase, twice: an answer kept for a filter must not
    # outlive a write, another connection's commit or a change of the live ids
    kept = [parse_filter(_filter(rng, ids)) for _ in range(40)]

    def check(rounds: int) -> None:
        for flt in [parse_filter(_filter(rng, ids)) for _ in range(rounds)] + kept + kept:
            got = select_filter(table, live, flt)
            mem = table.memory_index()
            assert mem is not None
            truth = scan_filter(table, live, flt).tolist()
            assert got.tolist() == truth, flt.to_json()
            # the per-id lookup of broad filters (issue 37): candidates in any order, repeated
            sample = np.asarray(rng.choices(live.tolist(), k=60), dtype=np.int64)
            mask = mem.test(flt, sample, lambda c: select_filter(table, live, Filter(must=(c,)), indexed=False))
            assert sample[mask].tolist() == [i for i in sample.tolist() if i in set(truth)], flt.to_json()

    check(150)
    table.update(ids[:50], {"lang": "de", "year": [2020, None]})  # merge
    check(0)
    table.update(ids[50:60], {"score": 0.5}, overwrite=True)
    table.delete_keys(ids[60:90], ["lang", "tags"])
    table.put(ids[300:320], [_payload(rng) for _ in range(20)])
    table.delete(ids[100:150])
    live = np.setdiff1d(live, np.asarray(ids[100:130]))  # some deleted rows stay live (no payload)
    check(150)
    table.commit()
    other = PayloadTable(tmp_path / "payloads.sqlite")  # a writer process beside this reader
    other.put(ids[:40], [{"lang": "fr", "year": 1999}] * 40)
    other.commit()
    other.close()
    check(100)
    table.close()


@pytest.mark.parametrize("holes", [False, True])
def test_positions_of_maps_live_ids_to_positions(holes):
    """The id -> position lookup of a filtered FAISS search: consecutive live ids index directly,
    others by binary search; ids that are not live (below, above, in a hole) are left out."""
    rng = np.random.default_rng(7)
    live = np.arange(50, 250, dtype=np.int64)
    if holes:
        live = np.sort(rng.choice(live, 120, replace=False))
    pos = rng.permutation(len(live)).astype(np.int64)
    pos[::17] = -1  # buffered before training
    wanted = rng.integers(0, 300, 400).astype(np.int64)
    by_id = dict(zip(live.tolist(), pos.tolist()))
    assert positions_of(live, pos, wanted).tolist() == [by_id[i] for i in wanted.tolist() if i in by_id]
    assert positions_of(live[:0], pos[:0], wanted).tolist() == []


def test_share_estimates_broad_filters_from_counts(tmp_path):
    """The planner's estimate (issue 37): exact for one condition on a single-valued field, the
    product for an AND of independent fields, None where a condition is not counted."""
    table = PayloadTable(tmp_path / "payloads.sqlite")
    ids = list(range(1000))
    table.put(ids, [{"n": i % 100, "lang": ["en", "de"][i % 2], "x": i} for i in ids])
    for f in ("n", "lang"):
        table.create_index(f)
    table.commit()
    mem = table.memory_index()

    def share(flt: dict) -> float | None:
        return mem.share(parse_filter(flt), 1000)

    n_lt = {"key": "n", "range": {"lt": 30}}
    assert share({"must": [n_lt]}) == pytest.approx(0.3)
    assert share({"must": [{"key": "lang", "match": {"any": ["en", "fr"]}}]}) == pytest.approx(0.5)
    assert share({"must": [n_lt, {"key": "lang", "match": {"value": "en"}}]}) == pytest.approx(0.15)
    assert share({"must_not": [n_lt]}) == pytest.approx(0.7)
    assert share({"should": [n_lt, {"key": "n", "range": {"gte": 90}}]}) == pytest.approx(0.4)
    assert share({"must": [{"key": "x", "range": {"lt": 5}}]}) is None  # not indexed
    assert share({"must": [{"is_null": {"key": "n"}}]}) is None
    table.close()


def test_index_is_built_only_for_declared_fields_and_hints_the_rest(tmp_path, caplog):
    table = PayloadTable(tmp_path / "payloads.sqlite")
    table.put([1, 2], [{"lang": "en"}, {"lang": "de"}])
    table.commit()
    live = np.asarray([1, 2, 3], dtype=np.int64)
    flt = parse_filter({"must": [{"key": "lang", "match": {"value": "en"}}]})
    with caplog.at_level("INFO", logger="slimvec.connectors.payloads"):
        assert select_filter(table, live, flt).tolist() == [1]
    assert table.memory_index() is None and table.unindexed == {"lang"}
    assert "--payload-index lang:" in caplog.text
    assert table.create_index("lang") and not table.create_index("a.b")
    assert select_filter(table, live, flt).tolist() == [1]
    assert list(table.memory_index().fields) == ["lang"]
    table.close()


# ------------------------------------------------------------------------------- every store
PROBES = [parse_filter(f) for f in (
    {"must": [{"key": "lang", "match": {"value": "en"}}]},
    {"must": [{"key": "year", "range": {"gte": 2020, "lt": 2022}}]},
    {"should": [{"key": "tags", "match": {"any": ["a", "c"]}}], "must_not": [{"key": "lang", "match": {"value": "de"}}]},
    {"must": [{"is_empty": {"key": "tags"}}, {"key": "year", "range": {"gt": 2019}}]},
    {"must": [{"key": "lang", "match": {"except": ["en"]}}]},
    {"must": [{"key": "when", "range": {"gte": "2024-05-01T06:00:00+02:00", "lt": "2024-05-03"}}]},
)]


def _truth(store, flt) -> list[int]:
    live = store.ids()
    return [i for i, p in zip(live.tolist(), store.get_payloads(live.tolist())) if flt.matches(i, p)]


def agree_with_payloads(store) -> None:
    live = store.ids()
    for flt in PROBES:
        truth = _truth(store, flt)
        assert store.filter_ids(flt).tolist() == truth, flt.to_json()
        if hasattr(store, "filter_test"):  # in-memory payload indexes (FAISS, hnswlib): the
            # planner's per-candidate lookup of broad filters (issue 37) agrees too
            assert live[store.filter_test(flt, live[::-1])[::-1]].tolist() == truth, flt.to_json()


def typed_rows(seed: int, n: int) -> list[dict]:
    """Payloads of one type per field (Qdrant Edge's own filter types mixed values its way)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        p = {"lang": rng.choice(["en", "de", "fr"]), "year": rng.choice([2019, 2020, 2021, 2022]),
             "tags": rng.sample(["a", "b", "c"], rng.randrange(0, 3)),
             "when": f"2024-05-0{rng.randrange(1, 5)}T{rng.randrange(24):02d}:00:00Z"}
        out.append({k: v for k, v in p.items() if rng.random() < 0.85})
    return out


@pytest.mark.parametrize("spec", fast_specs())
def test_store_filters_agree_with_payloads_after_writes_and_reopen(spec, minilm_vectors, tmp_path):
    vecs = np.ascontiguousarray(minilm_vectors[:300])
    ids = np.arange(300, dtype=np.int64) * 31 + 5
    s = make_store(spec, tmp_path / "s").create(vecs.shape[1], "cosine")
    for f, kind in (("lang", "keyword"), ("year", "float"), ("tags", "keyword"), ("when", "datetime")):
        s.create_payload_index(f, kind)
    s.upsert(ids[:200], vecs[:200], typed_rows(1, 200))
    s.finalize()
    agree_with_payloads(s)
    s.upsert(ids[200:], vecs[200:], typed_rows(2, 100))
    s.set_payload(ids[:40], {"lang": "en", "year": 2021})
    s.set_payload(ids[40:60], {"tags": []}, overwrite=True)
    s.delete_payload_keys(ids[60:80], ["lang"])
    s.delete(ids[80:120])
    agree_with_payloads(s)
    s.flush()
    s.close()
    s = make_store(spec, tmp_path / "s").open()
    agree_with_payloads(s)
    s.close()


def test_one_read_checks_another_connections_commit_once_per_search(tmp_path):
    """Inside ``one_read`` (one filtered search, issue 51) the in-memory index is checked against
    the file once: a commit of another connection in the middle is seen by the next search, and
    outside the block by the next call, as before."""
    table = PayloadTable(tmp_path / "payloads.sqlite")
    table.put([1, 2, 3], [{"lang": "en"}] * 3)
    table.create_index("lang")
    table.commit()
    live = np.asarray([1, 2, 3, 4], dtype=np.int64)
    fr = parse_filter({"must": [{"key": "lang", "match": {"value": "fr"}}]})

    def commit_elsewhere(i: int) -> None:
        other = PayloadTable(tmp_path / "payloads.sqlite")  # a writer process beside this reader
        other.put([i], [{"lang": "fr"}])
        other.commit()
        other.close()

    with table.one_read():
        assert select_filter(table, live, fr).tolist() == []
        commit_elsewhere(4)
        with table.one_read():  # nested: still the same search
            assert select_filter(table, live, fr).tolist() == []
    assert select_filter(table, live, fr).tolist() == [4]  # the next search sees it
    commit_elsewhere(1)
    assert select_filter(table, live, fr).tolist() == [1, 4]  # outside a block: every call checks
    table.close()
