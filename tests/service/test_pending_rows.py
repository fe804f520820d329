"""The rows of a pending index in memory (:mod:`slimvec.service.indexes.pending`): exact search, the
journal's group fsync and its recovery from an append cut by a kill (issue 40 item 3)."""

from __future__ import annotations

import json

import numpy as np

from slimvec.ids import doc_ids
from slimvec.service.indexes.pending import Journal, PendingSearch, Synced, row_vector, vector_field


def _rows(X: np.ndarray, ids: list) -> list[dict]:
    return [{"id": i, **vector_field(X[j]), "payload": {"j": j}} for j, i in enumerate(ids)]


def test_search_is_exact_over_the_latest_version_of_each_id_and_follows_a_rewrite():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 24)).astype(np.float32)
    calls = []

    def vectors_of(rows):
        calls.append(len(rows))
        return np.stack([row_vector(r) for r in rows])

    ids = [f"d{i}" for i in range(250)] + [f"d{i}" for i in range(50)]  # 50 ids written twice
    view = PendingSearch(vectors_of, _rows(X[:250], ids[:250]))
    view.append(_rows(X[250:], ids[250:]))
    view.sync()
    assert view.count() == 250 and calls == [300]
    latest = np.concatenate([X[250:], X[50:250]])  # d0..d49 from their second rows
    sids = doc_ids([f"d{i}" for i in range(250)])
    U = latest / np.linalg.norm(latest, axis=1, keepdims=True)
    Q = rng.standard_normal((5, 24)).astype(np.float32)
    sims = (Q / np.linalg.norm(Q, axis=1, keepdims=True)) @ U.T
    got_ids, got_scores = view.search(Q, 7)
    want = np.argsort(-sims, axis=1)[:, :7]
    assert (got_ids == sids[want]).all()
    np.testing.assert_allclose(got_scores, np.take_along_axis(sims, want, axis=1), atol=1e-5)
    allowed = set(sids[:10].tolist())
    only, only_scores = view.search(Q[:1], 20, allowed)
    assert set(only[0][only[0] >= 0].tolist()) == allowed and np.isnan(only_scores[0][10:]).all()
    # a rewrite (a delete of d0..d99) keeps the vectors already computed: nothing re-encoded
    kept = [r for r in view.records() if r["store_id"] not in set(sids[:100].tolist())]
    view.replace(kept)
    view.sync()
    assert calls == [300] and view.count() == 150
    assert [r["store_id"] for r in view.records()] == sorted(sids[100:].tolist())
    np.testing.assert_array_equal(view.vectors(sids[100:103].tolist()), latest[100:103])
    assert view.payloads([int(sids[0])]) == [None]


def test_journal_drops_a_cut_last_line_and_syncs_in_groups(tmp_path):
    path = tmp_path / "pending.jsonl"
    journal = Journal(path)
    X = np.arange(12, dtype=np.float32).reshape(3, 4)
    tickets = [journal.append([json.dumps(r)]) for r in _rows(X, [1, 2, 3])]
    Synced(journal, tickets[-1]).result()
    Synced(journal, tickets[0]).result()  # already covered by the fsync above
    with open(path, "ab") as fh:
        fh.write(b'{"id": 4, "vector_f32": "AAA')
    rows = Journal(path).load()
    assert [r["id"] for r in rows] == [1, 2, 3]
    np.testing.assert_array_equal(row_vector(rows[2]), X[2])
    assert path.read_bytes().endswith(b"}\n")  # the cut line is gone from the file too
    assert row_vector({"id": 9, "vector": [1.5, 2.0]}).tolist() == [1.5, 2.0]  # older journals
    journal.rewrite([json.dumps(rows[0])])
    assert [r["id"] for r in Journal(path).load()] == [1]
