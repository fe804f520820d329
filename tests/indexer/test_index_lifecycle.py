"""Index.delete / set_payload / get / scroll / count and filtered search on an index of the
default recipe (issue 25 items 1-3, library): user ids, the writer discipline (manifest count and
store checksums), and recall against exact filtered truth at 50 / 10 / 1 / 0.1 % selectivity on
3,000 real MiniLM vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import slimvec
from slimvec.errors import ConfigError, IndexBusyError
from slimvec.index.lifecycle import exact_threshold
from slimvec.index.manifest import Manifest
from slimvec.migrate import MigrateOptions, migrate
from slimvec.recipe import DEFAULT_RECIPE

N = 3000


def _write_parquet(path: Path, vecs: np.ndarray) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sel = np.random.default_rng(7).permutation(len(vecs)) % 1000  # each value on 3 documents
    table = pa.table({"id": [f"doc-{i}" for i in range(len(vecs))],
                      "vector": [v.tolist() for v in vecs],
                      "sel": sel.tolist(),
                      "lang": ["en" if i % 3 else "fr" for i in range(len(vecs))]})
    pq.write_table(table, path)
    return sel


def _small_index(minilm_vectors: np.ndarray, tmp_path: Path, recipe: str) -> tuple[Path, np.ndarray, np.ndarray]:
    """A 400-document index of ``recipe`` (folder, vectors, each document's ``sel``)."""
    vecs = np.ascontiguousarray(minilm_vectors[:400])
    sel = _write_parquet(tmp_path / "small.parquet", vecs)
    folder = tmp_path / "small-idx"
    migrate(str(tmp_path / "small.parquet"), folder, MigrateOptions(progress=False, recipe=recipe))
    return folder, vecs, sel


@pytest.fixture(scope="module")
def built(minilm_vectors, tmp_path_factory):
    """One index of the default recipe, built once; tests that mutate work on a copy."""
    vecs = np.ascontiguousarray(minilm_vectors[:N])
    src = tmp_path_factory.mktemp("src") / "docs.parquet"
    sel = _write_parquet(src, vecs)
    folder = tmp_path_factory.mktemp("idx") / "idx"
    migrate(str(src), folder, MigrateOptions(progress=False, recipe=DEFAULT_RECIPE))
    return folder, vecs, sel


@pytest.fixture
def index_copy(built, tmp_path):
    import shutil

    folder, vecs, sel = built
    shutil.copytree(folder, tmp_path / "idx")
    return tmp_path / "idx", vecs, sel


def _recall(found: np.ndarray, truth: list[set[int]]) -> float:
    return float(np.mean([len(set(f.tolist()) & t) / max(1, min(10, len(t))) for f, t in zip(found, truth)]))


@pytest.mark.parametrize("limit, share", [(500, 0.5), (100, 0.1), (10, 0.01), (1, 0.001)])
def test_filtered_recall_against_exact_filtered_truth(built, limit, share):
    folder, vecs, sel = built
    queries = vecs[5::150] + 0.02 * np.random.default_rng(1).standard_normal((20, vecs.shape[1])).astype(np.float32)
    flt = {"must": [{"key": "sel", "range": {"lt": limit}}]}
    match = np.flatnonzero(sel < limit)
    assert len(match) == round(N * share)
    qn = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    vn = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    with slimvec.open(folder) as idx:
        sids = np.array([r["store_id"] for r in idx.get([f"doc-{i}" for i in match])])
        truth = [set(sids[np.argsort(-(q @ vn[match].T))[:10]].tolist()) for q in qn]
        got = idx.search(queries, 10, filter=flt)
        assert np.isin(got.ids[got.ids >= 0], sids).all()
        assert _recall(got.ids, truth) >= 0.95, (share, _recall(got.ids, truth))
        assert idx.count(flt) == len(match)
        depth = idx.manifest.rescore.depth
        path = "exact" if len(match) <= exact_threshold(N, 10, depth) else "store"
        assert path == ("store" if share == 0.5 else path)  # 50 % goes through the store's filter


def test_delete_by_user_ids_and_by_filter_with_writer_discipline(index_copy):
    folder, vecs, sel = index_copy
    with slimvec.open(folder) as idx:
        sid = idx.get(["doc-3"])[0]["store_id"]
        assert idx.delete(["doc-3", "doc-4", "no-such-doc"]) == 2
        assert idx.get(["doc-3"]) == [None]
        assert idx.delete(filter={"must": [{"key": "sel", "range": {"lt": 10}}]}) == 30 - int((sel[[3, 4]] < 10).sum())
        gone = {sid} | {r["store_id"] for r in idx.scroll(limit=5000)[0] if r["payload"].get("sel", 99) < 10}
        assert gone == {sid}  # none left
        for rescore in (None, 0):
            found = idx.search(vecs[[3, 4]], 10, rescore=rescore).ids
            assert sid not in found
        assert sid not in idx.search(vecs[[3]], 10, filter={"must": [{"key": "lang", "match": {"value": "en"}}]}).ids
        assert sid not in idx.search(vecs[[3]], 5, filter={"must": [{"has_id": ["doc-3", "doc-5"]}]}).ids
        expected = N - 2 - (30 - int((sel[[3, 4]] < 10).sum()))
        assert idx.count() == expected
    m = Manifest.read(folder)
    assert m.count == expected
    with slimvec.open(folder) as idx:  # reopen: checksums verified, still gone
        assert idx.count() == expected and idx.get(["doc-3", "doc-5"])[0] is None
        assert not idx.full_vectors.get([sid])[1].any()


def test_set_payload_by_ids_and_filter_merge_and_overwrite(index_copy):
    folder, _, _ = index_copy
    with slimvec.open(folder) as idx:
        assert idx.set_payload({"reviewed": True}, ids=["doc-1", "doc-2", "nope"]) == 2
        n_fr = idx.count({"must": [{"key": "lang", "match": {"value": "fr"}}]})
        assert idx.set_payload({"lang": "de"}, filter={"must": [{"key": "lang", "match": {"value": "fr"}}]}) == n_fr
        assert idx.count({"must": [{"key": "lang", "match": {"value": "de"}}]}) == n_fr
        assert idx.set_payload({"only": 1}, ids=["doc-2"], overwrite=True) == 1
        rec1, rec2 = idx.get(["doc-1", "doc-2"])
        assert rec1["payload"]["reviewed"] is True and rec1["payload"]["sel"] is not None
        assert rec2["payload"] == {"only": 1}
        assert idx.count({"must": [{"key": "reviewed", "match": {"value": True}}]}) == 1
        with pytest.raises(ConfigError, match="exactly one of ids"):
            idx.set_payload({"a": 1})
        with pytest.raises(ConfigError, match="JSON object"):
            idx.set_payload([1], ids=["doc-1"])


def test_scroll_pages_cover_every_live_document_once(index_copy):
    folder, _, _ = index_copy
    with slimvec.open(folder) as idx:
        sid0 = idx.get(["doc-0"])[0]["store_id"]
        idx.delete(["doc-0"])
        seen, offset, pages = [], None, 0
        while True:
            page, offset = idx.scroll(limit=700, offset=offset)
            seen += [r["store_id"] for r in page]
            pages += 1
            if offset is None:
                break
        assert pages == 5 and len(seen) == len(set(seen)) == N - 1 and sid0 not in seen
        page, _ = idx.scroll(limit=10, filter={"must": [{"key": "sel", "range": {"lt": 1}}]})
        assert len(page) == 3 and all(r["payload"]["sel"] == 0 for r in page)


def test_mutation_refused_while_another_process_writes(index_copy):
    from slimvec.index.locking import IndexLock

    folder, _, _ = index_copy
    with slimvec.open(folder) as idx:
        idx.close()  # release the reader lock, then an ingest takes the writer lock
        with IndexLock(folder, exclusive=True):
            with pytest.raises(IndexBusyError):
                idx.delete(["doc-1"])


@pytest.mark.parametrize("recipe", ["pca:24|hnsw|rescore=4", "pca:24|faiss:HNSW32|rescore=4"])
def test_snapshot_stores_re_record_checksums_and_compact_full_vectors(recipe, minilm_vectors, tmp_path):
    from slimvec.index.folder import store_checksums
    from slimvec.ops.compact import compact_index

    vecs = np.ascontiguousarray(minilm_vectors[:400])
    src = tmp_path / "docs.parquet"
    _write_parquet(src, vecs)
    folder = tmp_path / "idx"
    migrate(str(src), folder, MigrateOptions(progress=False, recipe=recipe))
    before = Manifest.read(folder).store_sha256
    with slimvec.open(folder) as idx:
        gone = [r["store_id"] for r in idx.get([f"doc-{i}" for i in range(0, 400, 4)])]
        assert idx.delete([f"doc-{i}" for i in range(0, 400, 4)]) == 100
        assert idx.set_payload({"x": 1}, ids=["doc-1"]) == 1
    m = Manifest.read(folder)
    assert m.count == 300
    assert bool(m.store_sha256) == bool(before)  # recorded again where the store has snapshots
    if before:
        assert m.store_sha256 == store_checksums(folder, m) != before
    with slimvec.open(folder) as idx:  # open verifies the checksums
        assert idx.count() == 300 and idx.get(["doc-1"])[0]["payload"]["x"] == 1
        for rescore in (None, 0):
            assert not np.isin(idx.search(vecs[:40:4], 10, rescore=rescore).ids, gone).any()
        full_dir = idx.manifest.full.dir
    # 100 tombstones + 100 dead rows over 300 live: past the 0.2 ratio, compacted automatically
    m = Manifest.read(folder)
    assert m.full.dir != "full" and not (folder / "full").exists() and m.full.dir == full_dir
    out = compact_index(folder, 0.2)
    assert out["compacted"] is False  # nothing dead left in the side file
    # FAISS keeps the 100 tombstoned positions (excluded at search), hnswlib the graph slots of
    # its deleted labels, until compact rebuilds the store from the kept full vectors with the
    # same recipe (issue 40 item 1: on every store)
    assert out["store_rebuilt"] and out["store_dead_positions"] == 100
    with slimvec.open(folder) as idx:
        assert idx.full_vectors.dead_rows() == 0 and len(idx.full_vectors) == 300
        assert idx.store.dead_positions() == 0 and idx.count() == 300
        assert idx.get(["doc-1"])[0]["payload"]["x"] == 1 and idx.get(["doc-0"])[0] is None
        assert not np.isin(idx.search(vecs[:40:4], 10).ids, gone).any()
        assert idx.search(vecs[1:2], 1).ids[0, 0] == idx.get(["doc-1"])[0]["store_id"]


def test_payload_index_is_recorded_and_built_by_qdrant(index_copy, minilm_vectors, tmp_path):
    from slimvec.index.lifecycle import parse_payload_indexes

    folder, _, sel = index_copy
    assert parse_payload_indexes(["lang:keyword", "a.b:integer"]) == {"lang": "keyword", "a.b": "integer"}
    with pytest.raises(ConfigError, match="--payload-index 'lang:text': expected FIELD:KIND"):
        parse_payload_indexes(["lang:text"])
    with slimvec.open(folder) as idx:
        # the default recipe's FAISS store: an SQLite expression index in its payload table
        assert idx.create_payload_index("sel", "integer") is True
        assert idx.create_payload_index("a.b", "integer") is False  # a dotted path has none: scanned
        assert idx.count({"must": [{"key": "sel", "range": {"lt": 10}}]}) == 30
    assert Manifest.read(folder).extra["payload_index"] == {"sel": "integer", "a.b": "integer"}
    with slimvec.open(folder) as idx:  # the manifest (with its new key) still opens
        got = idx.search(idx.full_vectors.get(idx.store.ids()[:2])[0], 5,
                         filter={"must": [{"key": "sel", "range": {"lt": 100}}]})
        assert (got.ids >= 0).all()
        assert all(r["payload"]["sel"] < 100 for r in idx.get(got.ids.ravel().tolist(), user_ids=False))
    qfolder, _, qsel = _small_index(minilm_vectors, tmp_path, "pca:24|qdrant-edge|rescore=4,keep_full=float16")
    with slimvec.open(qfolder) as idx:
        assert idx.create_payload_index("sel", "integer") is True  # Qdrant Edge builds one
        assert "sel" in idx.store.payload_indexes()
        assert idx.count({"must": [{"key": "sel", "range": {"lt": 100}}]}) == int((qsel < 100).sum())
    assert Manifest.read(qfolder).extra["payload_index"] == {"sel": "integer"}


def test_qdrant_edge_keeping_full_vectors_in_store_deletes_and_filters(minilm_vectors, tmp_path):
    """keep_full=float32 on Qdrant Edge keeps the full vectors as a named vector: rescored and
    exact filtered searches read them from the store."""
    folder, vecs, sel = _small_index(minilm_vectors, tmp_path, "pca:24|qdrant-edge|rescore=4,keep_full=float32")
    with slimvec.open(folder) as idx:
        assert idx.manifest.full.in_store and idx.full_vectors is None
        gone = [r["store_id"] for r in idx.get(["doc-1", "doc-2"])]
        assert idx.delete(["doc-1", "doc-2"]) == 2
        assert not np.isin(idx.search(vecs[:4], 10).ids, gone).any()
        for limit in (1, 300):  # exact scan of the store's full vectors / store filter + rescoring
            flt = {"must": [{"key": "sel", "range": {"lt": limit}}]}
            got = idx.search(vecs[:4], 10, filter=flt)
            keep = [i for i in range(400) if sel[i] < limit and i not in (1, 2)]
            want = {r["store_id"] for r in idx.get([f"doc-{i}" for i in keep])}
            assert set(got.ids[got.ids >= 0].tolist()) <= want
            assert (got.ids >= 0).sum(axis=1).min() == min(10, len(want))


def _store_bytes_per_vector(folder: Path) -> float:
    with slimvec.open(folder) as idx:
        return idx.info()["store_bytes_per_vector"]


def test_compact_on_the_default_recipe_rebuilds_the_faiss_store(minilm_vectors, tmp_path):
    """Issue 39 F5 / issue 40 item 1: compact on a default index with 25 % deleted used to exit 2
    (the rebuild refused reducer none); the store keeps no dead position and bytes per vector
    come back to a fresh build's of the kept documents."""
    from slimvec.ops.compact import compact_index

    folder, vecs, _ = _small_index(minilm_vectors, tmp_path, DEFAULT_RECIPE)
    gone = [f"doc-{i}" for i in range(0, 400, 4)]
    with slimvec.open(folder) as idx:
        gone_sids = {r["store_id"] for r in idx.get(gone)}
        assert idx.delete(gone) == 100 and idx.store.dead_positions() == 100
    recipe = Manifest.read(folder).recipe
    out = compact_index(folder)
    assert out["store_rebuilt"] and out["store_dead_positions"] == 100, out
    assert Manifest.read(folder).recipe == recipe  # compacted with its own recipe
    with slimvec.open(folder) as idx:
        assert idx.store.dead_positions() == 0 and idx.count() == 300
        assert idx.manifest.full.dtype == "float16" and len(idx.full_vectors) == 300
        assert idx.info()["reduced_vector_bytes"] == 192  # 384-d 4-bit codes (issue 40 item 9)
        found = idx.search(vecs[:40], 10).ids
        assert not set(found.ravel().tolist()) & gone_sids
    keep = np.array([i for i in range(400) if i % 4])
    fresh = tmp_path / "fresh"
    _write_parquet(tmp_path / "kept.parquet", vecs[keep])
    migrate(str(tmp_path / "kept.parquet"), fresh, MigrateOptions(progress=False, recipe=DEFAULT_RECIPE))
    after, built = _store_bytes_per_vector(folder), _store_bytes_per_vector(fresh)
    assert abs(after - built) <= 0.05 * built, (after, built)


def test_rebuild_after_a_few_deletes_copies_no_tombstone_and_keeps_float16(minilm_vectors, tmp_path):
    """Issue 40 item 6: three deletes leave tombstones (negative ids) in the kept vectors' id
    file (under the 20 % that compacts it); rebuild used to copy them ("Store ids must be
    non-negative"). Without keep_full the rebuild keeps the index's float16, and the identity
    reducer (none) is a rebuild target like any other."""
    from slimvec.ops.rebuild import rebuild

    folder, vecs, _ = _small_index(minilm_vectors, tmp_path, DEFAULT_RECIPE)
    with slimvec.open(folder) as idx:
        gone = {r["store_id"] for r in idx.get(["doc-1", "doc-2", "doc-3"])}
        assert idx.delete(["doc-1", "doc-2", "doc-3"]) == 3
        assert idx.full_vectors.dead_rows() == 6  # 3 rows and their 3 tombstones, not compacted
        full_bytes = idx.info()["full_bytes"]
    for recipe, reducer in (("pca:48|hnsw|rescore=4", "pca:48"), ("none|hnsw|rescore=4", "none")):
        summary = rebuild(folder, recipe, sample=400)
        assert summary.documents == 397, summary
        m = Manifest.read(folder)
        assert m.reducer == reducer and m.full.dtype == "float16" and m.count == 397
        assert m.recipe == recipe  # float16: the default precision, kept from the old index
        with slimvec.open(folder) as idx:
            assert idx.count() == 397 and not set(idx.full_vectors.ids().tolist()) & gone
            assert idx.info()["full_bytes"] <= full_bytes  # never grown to float32
            assert not set(idx.search(vecs[:20], 10).ids.ravel().tolist()) & gone


@pytest.mark.parametrize("recipe", [DEFAULT_RECIPE, "pca:96|qdrant-edge|rescore=8,keep_full=float16",
                                    "none|hnsw|rescore=2,keep_full=float16"])
def test_both_planner_paths_agree_with_exact_filtered_truth(recipe, minilm_vectors, tmp_path, monkeypatch):
    """Issue 37: the same filter through the exact scan and through the store's filtered search
    (over the in-memory payload index, or Qdrant Edge's own filter) finds the exact filtered
    neighbours, and ``last_filter_plan`` / ``info()`` say which path ran and why."""
    from slimvec.index import lifecycle

    folder, vecs, sel = _small_index(minilm_vectors, tmp_path, recipe)
    flt = {"must": [{"key": "sel", "range": {"lt": 300}}, {"key": "lang", "match": {"value": "en"}}]}
    keep = [i for i in range(400) if sel[i] < 300 and i % 3]
    vn = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    queries = vecs[1:40:4]
    with slimvec.open(folder) as idx:
        assert idx.create_payload_index("sel", "integer") and idx.create_payload_index("lang", "keyword")
        sids = np.array([r["store_id"] for r in idx.get([f"doc-{i}" for i in keep])])
        truth = [set(sids[np.argsort(-(q @ vn[keep].T))[:10]].tolist()) for q in vn[1:40:4]]
        # a broad filter (estimated share >= BROAD_SHARE) is post-filtered, except on Qdrant
        # Edge, whose own filter runs it (no in-memory payload index to estimate with)
        post = "store filter" if "qdrant-edge" in recipe else "post filter"
        for limit, broad, path in ((10 ** 6, 0.0, "exact scan"), (0, 1.1, "store filter"), (0, 0.0, post)):
            monkeypatch.setattr(lifecycle, "exact_threshold", lambda *_, limit=limit: limit)
            monkeypatch.setattr(lifecycle, "BROAD_SHARE", broad)
            got = idx.search(queries, 10, filter=flt)
            assert idx.last_filter_plan["path"] == path, idx.last_filter_plan
            if path != "post filter":
                assert idx.last_filter_plan["matches"] == len(keep)
            assert _recall(got.ids, truth) >= 0.99, (path, _recall(got.ids, truth))
        monkeypatch.setattr(lifecycle, "BROAD_SHARE", 1.1)
        idx.search(queries, 10, filter=flt)
        info = idx.info()
        assert info["last_filter_plan"]["path"] == "store filter"
        # a range on an indexed key is evaluated in Python on Qdrant Edge (issue 39: its index
        # skips values of another type); a keyword match on an indexed key is Qdrant's own
        assert not info["last_filter_plan"]["native"]
        idx.search(queries, 10, filter={"must": [{"key": "lang", "match": {"value": "en"}}]})
        assert idx.info()["last_filter_plan"]["native"] == ("qdrant-edge" in recipe)
        if "qdrant-edge" not in recipe:  # FAISS / hnswlib: held in memory
            assert info["payload_indexes_in_memory"] == ["lang", "sel"]
            # issue 52: their RAM by plan's model (payload_sizing) at the index's count
            from slimvec.index.filter_info import payload_index_bytes

            assert info["payload_indexes_ram_predicted"] == int(payload_index_bytes(
                {"sel": "integer", "lang": "keyword"}, info["count"])["ram"]) > 0
            idx.search(queries[:1], 10, filter={"must": [{"key": "other", "match": {"value": 1}}]})
            assert idx.info()["filter_fields_unindexed"] == ["other"]
        else:  # Qdrant Edge keeps its own payload indexes: their own constants
            from slimvec.index.filter_info import payload_index_bytes

            assert info["payload_indexes_ram_predicted"] == int(payload_index_bytes(
                {"sel": "integer", "lang": "keyword"}, info["count"], store="qdrant-edge")["ram"]) > 0


def test_broad_filter_is_post_filtered_and_falls_back_where_neighbours_do_not_match(minilm_vectors, tmp_path):
    """Issue 37: a filter matching most documents is answered by the unfiltered search, its
    candidates looked up in the payload index (``post filter``), with the exact filtered
    neighbours. Where the query's neighbours match far less often than the corpus (here: none of
    the 200 nearest of 400 do), too few candidates survive and the store's filtered search
    answers those queries instead: still 10 matching results, not the few that survived."""
    folder, vecs, _ = _small_index(minilm_vectors, tmp_path, "none|hnsw")
    vn = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    nearest = np.argsort(-(vn @ vn[0]))[:200]
    with slimvec.open(folder) as idx:
        assert idx.create_payload_index("near", "integer") and idx.create_payload_index("lang", "keyword")
        idx.set_payload({"near": 0}, ids=[f"doc-{i}" for i in range(400)])
        idx.set_payload({"near": 1}, ids=[f"doc-{i}" for i in nearest])
        sid = {r["store_id"]: i for i, r in enumerate(idx.get([f"doc-{i}" for i in range(400)]))}
        for flt, keep, path in (({"must": [{"key": "lang", "match": {"value": "en"}}]},
                                 [i for i in range(400) if i % 3], None),
                                ({"must": [{"key": "near", "match": {"value": 0}}]},
                                 sorted(set(range(400)) - set(nearest.tolist())), "store filter")):
            queries = vecs[:40:4]
            got = idx.search(queries, 10, filter=flt)
            plan = idx.last_filter_plan
            assert plan["path"] == "post filter" and plan.get("short_path") == path, plan
            assert (plan["short_queries"] > 0) == (path is not None), plan
            rows = np.vectorize(sid.get)(got.ids)
            assert (got.ids >= 0).all() and np.isin(rows, keep).all()
            truth = [set(np.asarray(keep)[np.argsort(-(vn[keep] @ q))[:10]].tolist()) for q in vn[:40:4]]
            assert _recall(rows, truth) >= 0.9, (path, _recall(rows, truth))


def test_a_repeated_filter_sees_every_write_since_its_last_search(minilm_vectors, tmp_path):
    """A filter given again (one parsed object: its plan is kept between searches) answers from
    what is stored now: after a payload write, a delete, and a write by another open index of the
    folder (another connection to the payload table), the matches counted and the results are
    those of the exact filtered truth."""
    folder, vecs, sel = _small_index(minilm_vectors, tmp_path, "none|hnsw|rescore=2,keep_full=float16")
    flt = {"must": [{"key": "sel", "range": {"lt": 40}}]}
    vn = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    keep = {i for i in range(400) if sel[i] < 40}
    with slimvec.open(folder) as idx:
        assert idx.create_payload_index("sel", "integer")
        sid = {r["store_id"]: i for i, r in enumerate(idx.get([f"doc-{i}" for i in range(400)]))}

        def check() -> None:
            for _ in range(2):  # the second search of the same filter reuses the first's plan
                got = idx.search(vecs[:6], 10, filter=flt)
                assert idx.last_filter_plan["matches"] == len(keep), idx.last_filter_plan
                rows = np.vectorize(lambda s: sid.get(s, -1))(got.ids)
                allowed = sorted(keep)
                truth = [np.asarray(allowed)[np.argsort(-(vn[allowed] @ q))[:10]].tolist() for q in vn[:6]]
                assert rows.tolist() == truth
        check()
        moved = [i for i in range(400) if i not in keep][:25]
        idx.set_payload({"sel": 0}, ids=[f"doc-{i}" for i in moved])
        keep |= set(moved)
        check()
        gone = sorted(keep)[:30]
        idx.delete([f"doc-{i}" for i in gone])
        keep -= set(gone)
        check()
        with slimvec.open(folder) as other:
            back = sorted(keep)[:20]
            other.set_payload({"sel": 999}, ids=[f"doc-{i}" for i in back])
        keep -= set(back)
        check()
