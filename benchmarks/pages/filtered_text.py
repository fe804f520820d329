"""The fixed prose of docs/benchmarks/filtered.md: how the filtered rows are built and read."""

from __future__ import annotations

__all__ = ["filtered_intro", "quiet_note"]


def quiet_note(machine: dict) -> tuple[str, str]:
    """The page's paragraph on the machine and the suffix every figure carries, from the run's
    ``meta.machine`` (``others_cores``: cores other processes kept busy during the run)."""
    from slimvec.benchmarks.record import quiet_during

    quiet, others = quiet_during(machine), machine.get("others_cores")
    if others is None:
        return ("**Not known to be quiet**: the run recorded no machine load (the 2 cores were "
                "shared with other runs at the time); every figure below carries \"(not quiet)\". "
                "Recall does not depend on load; latencies do.", " (not quiet)")
    if quiet:
        return (f"**Quiet**: other processes used {float(others):.3f} of a core during the run "
                f"({machine.get('cpus', '?')} cores).", "")
    return (f"**Not quiet**: other processes used {float(others):.2f} of a core during the run; "
            "every figure below carries \"(not quiet)\". Recall does not depend on load; "
            "latencies do.", " (not quiet)")


def filtered_intro(quiet_paragraph: str, realtext: bool = False) -> list[str]:
    """Paragraphs (with blank lines) between the page's first line and its command;
    ``quiet_paragraph`` is :func:`quiet_note`'s paragraph for the run; ``realtext``: the corpus is
    a prefix of the real-text corpus with held-out queries (else the assembled 8k corpus)."""
    corpus = ("The corpus is a prefix of one seeded permutation of the project's real-text corpus "
              "(WordNet and GCIDE sentences, `benchmarks.corpora.realtext`) encoded with MiniLM "
              "(`python scripts/make_real_corpus.py --encode`, through the encoding cache); the "
              "queries are its held-out sentences." if realtext else
              "The corpus is assembled from MiniLM encodings already in the encoding caches (nothing is "
              "encoded) by `python -m benchmarks vectors filtered ~/.cache/slimvec-bench/filtered-minilm-8k.npy`.")
    return [
        corpus, "",
        "Each recipe is built through the product path (Parquet with an integer payload `bucket` in "
        "0..999, dealt so `bucket < 10·s` matches exactly s % of the corpus; a datetime `date`, RFC "
        "3339 strings a minute apart in a random order, so `date < D` matches exactly s %; a keyword "
        "`tier` (`t0.1`, `t1`, `t10`, `t50`, `t100`: the finest share a document falls in), so "
        "`tier` any of the tiers up to s matches exactly s %; and a keyword `tag`, `a` or `b`, dealt "
        "independently; `slimvec migrate`; a payload index of its kind on each) and searched with "
        "`Index.search(..., filter=...)`. Filters `bucket`, `date` and `tier` are one condition; "
        "`bucket AND tag` is `bucket < 20·s` AND `tag = a`, `date AND tag` the date range of 2·s % "
        "AND `tag = a` (two conditions, about s %); `(none)` is the same search without a filter. "
        "The reference rows are Qdrant Edge's own filtered search on the full vectors "
        "(`none|qdrant-edge`, the store's search with the filter translated as is into Qdrant's, no "
        "planner; the product evaluates a range on an indexed key in Python there, as Qdrant's index "
        "skips values of another type), at Qdrant's own default beam (`hnsw_ef` = `ef_construct` = "
        "100: Qdrant's `HnswGraphConfig::new` sets `ef: ef_construct`; slimvec's qdrant-edge store "
        "alone would search with 64), again at the default recipe's (`ef=128`), the same work "
        "per query, and at `ef=400`, where its broad (50 %) filters reach the recall@10 ≥ 0.99 "
        "asked of slimvec: at its default beam they return 0.95–0.97, so `× ef=400` is the one "
        "ratio at equal quality there. Neighbour recall@10 is against EXACT filtered truth (brute force "
        "over the matching full vectors), per query |found ∩ truth| / min(10, matches). `path`: "
        "`exact scan` = the planner scanned the matches' kept full vectors; `post filter` = a broad "
        "filter (estimated share ≥ 20 % from the payload index): the unfiltered search's candidates "
        "looked up in the payload index, then re-ranked; `store filter` = the store's filtered "
        "search (re-ranked from the full vectors when the recipe rescores); `native` = the "
        "reference. p50 is the median single-query latency (one thread, median of 3 timings of each "
        "of 100 queries); all recipes are open at once and each query is timed on every recipe in "
        "turn (`slimvec.measure.time_alternating`), so load falls on all rows of a filter alike.", "",
        quiet_paragraph, "",
        "Reading the latencies: on FAISS and hnswlib a filter is answered by the in-memory payload "
        "indexes (`slimvec/connectors/payload_index.py`); Qdrant Edge resolves it in its own.", "",
    ]
