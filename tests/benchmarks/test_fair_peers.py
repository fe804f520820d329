"""Fair peers (issue 28 item 1): rows carry whether they were re-ranked; fronts and per-budget
picks compare rows on equal footing only; RaBitQ is a peer with a re-ranked twin, in tune's grid
and in the quantization facet. Tiny data, seconds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from slimvec.planner.rows import Row


def _row(reducer: str, store: str, bpv: float, recall: float, *, kind: str = "reducer",
         rescore: int | None = None) -> Row:
    return Row(dataset="d", encoder="e", dim_in=384, reducer=reducer, dim_out=96, store=store,
               kind=kind, rescore=rescore, n_corpus=1000, n_queries=200, k=10,
               bytes_per_vector=bpv, neighbor_recall_at_k=recall)


# a re-ranked recipe (24 B), the same peer un-re-ranked (48 B) and re-ranked (48 B, better)
ROWS = [
    _row("pca:96", "faiss:OPQ24,PQ24np", 40.0, 0.95, rescore=8),
    _row("pca:96", "faiss:OPQ24,PQ24np", 40.0, 0.60),
    _row("none", "faiss:OPQ48,PQ48np", 64.0, 0.70, kind="peer"),
    _row("none", "faiss:OPQ48,PQ48np", 64.0, 0.99, kind="peer", rescore=8),
    _row("none", "qdrant-edge:quant=bq1,rescore=true,oversampling=8", 60.0, 0.97, kind="peer"),
]


def test_rows_carry_reranked_and_depth_derived_for_older_files():
    plain, rescored = Row.from_json({"store": "hnsw"}), Row.from_json({"store": "hnsw", "rescore": 4})
    assert (plain.reranked, plain.rerank_depth) == (False, None)
    assert (rescored.reranked, rescored.rerank_depth) == (True, 4.0)
    qdrant = Row.from_json({"store": "qdrant-edge:quant=bq1,rescore=true"})
    assert (qdrant.reranked, qdrant.rerank_depth) == (True, 2.0)  # Qdrant's default oversampling
    assert Row.from_json({"store": "qdrant-edge:quant=bq1,rescore=false"}).reranked is False
    # a quantized Qdrant store rescores by default; unquantized there is nothing to rescore
    assert Row.from_json({"store": "qdrant-edge:quant=sq8,oversampling=4"}).rerank_depth == 4.0
    assert Row.from_json({"store": "qdrant-edge:quant=none"}).reranked is False
    assert Row.from_json({"store": "qdrant-edge"}).reranked is False
    data = rescored.to_json()
    assert data["reranked"] is True and data["rerank_depth"] == 4.0
    assert Row.from_json(data) == rescored


def test_the_front_never_sets_a_reranked_row_against_only_unreranked_peers():
    from slimvec.planner.ranking import NOT_RERANKED, RERANKED, footing, footing_fronts

    picks = footing_fronts(ROWS, "neighbor_recall_at_k", budgets=[48, 64])
    assert {p.footing for p in picks} == {RERANKED, NOT_RERANKED}
    for p in picks:
        for r in (p.best, p.best_recipe, p.best_peer):
            assert r is None or footing(r) == p.footing
    at = {(p.footing, p.budget): p for p in picks}
    assert at[RERANKED, 64].best_peer.rescore == 8  # the re-ranked OPQ48, not the plain one
    assert at[NOT_RERANKED, 64].best_peer.rescore is None
    # without any re-ranked peer, a re-ranked recipe is compared with no peer at all
    alone = footing_fronts([ROWS[0], ROWS[2]], "neighbor_recall_at_k", budgets=[64])
    reranked = [p for p in alone if p.footing == RERANKED]
    assert reranked and reranked[0].best_recipe is ROWS[0] and reranked[0].best_peer is None


def test_report_marks_reranked_rows_and_splits_fronts_by_footing():
    from slimvec.benchmarks.report import render_report

    text = render_report(ROWS)
    assert "re-ranked |" in text.splitlines()[next(i for i, line in enumerate(text.splitlines())
                                                   if line.startswith("| reducer |"))]
    assert "| ×8 |" in text and "| no |" in text
    assert "Best configuration per bytes/vector budget (nbr R@10), re-ranked rows" in text
    assert "Best configuration per bytes/vector budget (nbr R@10), not re-ranked rows" in text
    reranked = text.split("budget (nbr R@10), re-ranked rows")[1].split("### Pareto")[0]
    assert "none → faiss:OPQ48,PQ48np +rescore×8" in reranked
    assert "none → faiss:OPQ48,PQ48np |" not in reranked  # the un-re-ranked twin is elsewhere
    only_plain_peers = render_report([ROWS[0], ROWS[2]])
    assert "No peer was measured re-ranked: these rows are not compared with any peer." in only_plain_peers


def test_custom_opq_peer_keeps_its_m_when_it_divides_the_dimension(tmp_path):
    from slimvec.benchmarks.runner import BenchConfig

    cfg = BenchConfig(reducers=[], stores=["faiss:Flat"], work_dir=tmp_path, rescore=[4, 8],
                      peers=["faiss:OPQ24,PQ24np", "faiss:PQ48np", "faiss:RaBitQ", "qdrant-edge:quant=bq1"])
    variants = {v.spec: v for v in cfg._peer_variants(384)}
    assert set(variants) == {"faiss:OPQ24,PQ24np", "faiss:PQ48np", "faiss:RaBitQ", "qdrant-edge:quant=bq1"}
    assert variants["faiss:RaBitQ"].rescorable
    labels = [label for label, _ in variants["qdrant-edge:quant=bq1"].searches]
    assert "qdrant-edge:quant=bq1,rescore=true,oversampling=4" in labels
    assert "qdrant-edge:quant=bq1,rescore=true,oversampling=8" in labels
    # a PQ peer named for another dimension is still that peer at this one
    assert {v.spec for v in cfg._peer_variants(50)} >= {"faiss:PQ5np"}


def test_rabitq_peers_are_built_in_and_measured_with_a_reranked_twin(tmp_path: Path):
    from slimvec.benchmarks.baselines import RABITQ_PEERS, peer_store_variants
    from slimvec.benchmarks.datasets import from_vectors
    from slimvec.benchmarks.runner import BenchConfig, run_bench

    assert set(RABITQ_PEERS) <= {v.spec for v in peer_store_variants(384)}
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((20, 32)).astype(np.float32)
    X = centres[rng.integers(0, 20, 1200)] + 0.3 * rng.standard_normal((1200, 32)).astype(np.float32)
    np.save(tmp_path / "v.npy", X)
    ds = from_vectors(tmp_path / "v.npy", max_queries=40)
    cfg = BenchConfig(reducers=["pca:8"], stores=["faiss:SQ8"], work_dir=tmp_path / "work",
                      peers=list(RABITQ_PEERS), rescore=[8], latency_queries=3, latency_repeats=1)
    rows, meta = run_bench([ds], cfg)
    assert meta["skipped"] == []
    peers = {(r.store, r.rescore): r for r in rows if r.kind == "peer"}
    for spec in RABITQ_PEERS:
        plain, twin = peers[spec, None], peers[spec, 8]
        assert (plain.reranked, twin.reranked, twin.rerank_depth) == (False, True, 8.0)
        assert twin.neighbor_recall_at_k > plain.neighbor_recall_at_k
    recipe = next(r for r in rows if r.reducer == "pca:8" and r.rescore == 8)
    assert recipe.reranked and recipe.rerank_depth == 8.0
    # the full dimension on a lossy store is re-ranked too (before: never, only reduced rows were)
    full = {r.rescore: r for r in rows if r.reducer == "none" and r.kind == "reducer"}
    assert set(full) == {None, 8} and full[8].reranked and not full[None].reranked


def test_rabitq_in_tune_grid_is_rescored_and_in_the_quantization_facet():
    from benchmarks.pages.html.data import row_facets
    from slimvec.planner.tune import default_grid

    grid = default_grid(384)
    rabitq = [r for r in grid if r.store == "faiss:RaBitQ"]
    assert {r.rescore for r in rabitq if r.reducer == "none"} >= {None, 2, 4, 8, 16, 32}
    # a 1-bit code at full dimension is not lossless: it is re-ranked like SQ8
    assert {r.rescore for r in default_grid(384, ["none"], ["faiss:RaBitQ4"])} != {None}
    assert row_facets(Row.from_json({"reducer": "none", "store": "faiss:IVF256,RaBitQ,nprobe=32", "kind": "peer"}))["quant"] \
        == "rabitq"
    # report.html draws one front per footing from this facet
    assert row_facets(Row.from_json({"reducer": "pca:96", "store": "faiss:RaBitQ", "rescore": 8}))["reranked"] is True
    assert row_facets(Row.from_json({"reducer": "none", "store": "qdrant-edge:quant=bq1,rescore=false"}))["reranked"] is False


@pytest.mark.parametrize("store", ["faiss:RaBitQ", "faiss:IVF64,RaBitQfs"])
def test_rabitq_recipes_are_buildable_rows(store):
    from slimvec.planner.ranking import buildable, ingest_command

    row = _row("pca:96", store, 20.0, 0.9, rescore=8)
    assert buildable(row) == (True, "")
    assert f"'pca:96|{store}|rescore=8'" in ingest_command(row)


def test_peers_differing_only_in_search_beams_share_one_build():
    # hnsw, hnsw:ef=128 and hnsw:ef=256 are one graph searched three ways (the realtext suites
    # built the same 300k-vector graph three times); each row keeps its own label
    from slimvec.benchmarks.config import BenchConfig

    cfg = BenchConfig(reducers=[], stores=[], work_dir="unused", rescore=[4],
                      peers=["hnsw", "faiss:IVF64,RaBitQ,nprobe=8", "hnsw:ef=128", "hnsw:ef=256",
                             "faiss:IVF64,RaBitQ,nprobe=32", "faiss:HNSW32", "qdrant-edge:quant=sq8"])
    by_spec = {v.spec: v for v in cfg._peer_variants(384)}
    assert list(by_spec) == ["hnsw", "faiss:IVF64,RaBitQ", "faiss:HNSW32", "qdrant-edge:quant=sq8"]
    assert by_spec["hnsw"].searches == [("hnsw", {}), ("hnsw:ef=128", {"ef": 128}),
                                        ("hnsw:ef=256", {"ef": 256})]
    assert by_spec["faiss:IVF64,RaBitQ"].searches == [("faiss:IVF64,RaBitQ,nprobe=8", {"nprobe": 8}),
                                                      ("faiss:IVF64,RaBitQ,nprobe=32", {"nprobe": 32})]
    assert all(by_spec[s].rescorable for s in ("hnsw", "faiss:IVF64,RaBitQ", "faiss:HNSW32"))
    assert len(by_spec["qdrant-edge:quant=sq8"].searches) == 3  # its own rescoring variants, untouched


def test_headline_front_compares_reduce_first_with_the_full_dimension_per_footing():
    from benchmarks.pages.table_front import reducer_front, row_ram, speed_front

    def measured(reducer, store, rss_per_vec, recall, p50, *, kind="reducer", rescore=None):
        r = _row(reducer, store, 1.0, recall, kind=kind, rescore=rescore)
        r.serve_rss_bytes, r.latency_p50_ms = int(rss_per_vec * r.n_corpus), p50
        r.reranked = bool(rescore)
        return r

    rows = [
        measured("pca:192", "faiss:HNSW16,SQ8", 330, 0.993, 0.40, rescore=8),  # 346 B with its lookup
        measured("none", "faiss:HNSW16,SQ4", 340, 0.995, 0.50, rescore=4),     # 356 B
        measured("none", "faiss:HNSW16,RaBitQ", 180, 0.992, 0.70, kind="peer", rescore=16),
        measured("pca:192", "faiss:HNSW16,SQ8", 330, 0.81, 0.30),              # not re-ranked
        measured("none", "hnsw", 1700, 0.984, 0.35, kind="peer"),
    ]
    assert row_ram(rows[0]) == 346 and row_ram(rows[3]) == 330  # the id lookup only when re-ranked
    tables = reducer_front(rows, budgets=(2048, 384, 256))
    plain, ranked = tables["not re-ranked"], tables["re-ranked"]
    # a row built through the product names its recipe, not "none → none|..."
    recipe = measured("none", "none|faiss:HNSW16,SQ4,ef=128|rescore=auto", 400, 0.993, 0.45, rescore=2)
    assert "recipe none\\|HNSW16,SQ4,ef=128\\|rescore=auto +rescore×2 |" in speed_front([rows[0], recipe], 0.99, budgets=(2048,))[2]
    # re-ranked rows are never ranked against rows that were not re-ranked
    assert "hnsw" not in "".join(ranked) and "+rescore" not in "".join(plain)
    # 384 and 2,048 B pick the same two rows: one table row says so
    assert ranked[2].startswith("| 384–2,048 | pca:192") and ranked[2].endswith("| tie |")  # 0.993 vs 0.995
    assert "none → HNSW16,RaBitQ" in ranked[3] and "none fits" in ranked[3]     # 256 B: RaBitQ only
    assert len(ranked) == 4
    assert plain[2].endswith("| **full dimension** |")                                # 0.984 vs 0.81
    speed = speed_front(rows, 0.99, budgets=(384,))
    assert speed[2].startswith("| 384 | pca:192") and speed[2].endswith("| **reduce first** |")
    # a run whose full-dimension rows were not re-ranked names no winner on the re-ranked footing
    one_sided = [r for r in rows if not (r.reranked and r.reducer == "none")]
    assert speed_front(one_sided, 0.99, budgets=(384,)) == []
    assert reducer_front(one_sided, budgets=(384,))["re-ranked"][0].startswith("Only reduce-first rows")


def test_headline_page_keeps_one_table_per_dataset_outside_its_details():
    """The page renders from a committed run; BENCHMARKS.md (which drops ``<!-- details -->``
    blocks) keeps only the >= 0.99 speed table of each dataset, and links resolve from the page."""
    from benchmarks.pages.table_front import render_headline

    root = Path(__file__).resolve().parents[2]
    page = render_headline([root / "bench-results" / "realtext-100k" / "results.json"], root)
    assert "](../../bench-results/realtext-100k/results.json)" in page
    assert page.count("<!-- details -->") == page.count("<!-- /details -->") == 1
    outside = page.split("<!-- details -->")[0]
    assert "Fastest at recall@10 ≥ 0.99" in outside and "Best recall per RAM budget" not in outside
    tables = page[page.index("\n### "):]  # below the intro, which names what labels leave out
    assert "train_size=" not in tables and "faiss:" not in tables


def test_peers_table_names_a_configuration_measured_twice_once():
    """A suite listing a store both as a ``none`` store and as a peer measures it twice; the
    table shows it once, with the better measurement, and without ``train_size=``."""
    from benchmarks.pages.table_peers import peers_table

    twice = [_row("none", "faiss:IVF64,PQ32,nprobe=8,train_size=5000", 64.0, r, rescore=8)
             for r in (0.804, 0.806)]
    table = "\n".join(peers_table(twice + [_row("pca:96", "faiss:IVF64,PQ32,nprobe=8", 64.0, 0.86,
                                                rescore=8)], reranked=True))
    assert table.count("IVF64,PQ32,nprobe=8 0.806") == 1 and "0.804" not in table
    assert "train_size=" not in table
