"""Single-query latency of an existing index through ``Index.search``, end to end and labelled
(``slimvec bench --index DIR``; was ``scripts/latency.py``, the demo's figure, issue 27 item 8).

Two figures, both the whole ``Index.search`` call (reducer, store and, when the index rescores by
default, the re-ranking from the full vectors), timed by :func:`slimvec.measure.time_single`:
from query *texts* (encoding included) and from pre-encoded query *vectors* (encoding excluded).
The store's own search on reduced vectors is not a search a user can run, so it is not timed
alone. Model loading and a warm-up happen before timing. The queries are distinct sentences (the
bundled STS-B test split, :func:`query_texts`): a few texts repeated would walk the same graph
path from a warm cache every time and time a search nobody runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from slimvec.errors import ConfigError
from slimvec.measure import time_single
from slimvec.sources.pairs import load_pairs

__all__ = ["index_latency", "query_texts", "render_index_latency"]

_QUERIES = Path(__file__).resolve().parents[1] / "data" / "stsb-test.tsv"


def query_texts(n: int) -> list[str]:
    """``n`` query texts: the distinct sentences of the bundled STS-B test split in file order,
    repeated from the start only beyond them."""
    pairs = load_pairs(_QUERIES)
    texts = list(dict.fromkeys(t for pair in zip(pairs.s1, pairs.s2) for t in pair))
    return [texts[i % len(texts)] for i in range(n)]


def index_latency(folder: str | os.PathLike[str], n: int = 200, k: int = 10,
                  progress: bool = False) -> dict[str, Any]:
    """Time ``n`` single queries of the index in ``folder`` from texts and from vectors
    (``progress``: a line per step, :func:`slimvec.ui.make_progress`; the timed loops are not
    interrupted by it).

    Returns
    -------
    dict
        ``index``, ``count``, ``recipe``, ``dim_in``, ``dim_out``, ``store_bytes``,
        ``reducer_bytes``, ``rescore_depth``, ``k``, ``n_queries``, and ``from_text`` /
        ``from_vectors``: ``latency_p50_ms`` / ``_p95_ms`` / ``_p99_ms``.

    Raises
    ------
    ConfigError
        The index was built from vectors (no encoder to turn the query texts into vectors).
    """
    from slimvec.index.folder import open_index
    from slimvec.ui import make_progress

    with open_index(folder) as idx, make_progress(progress, unit="queries") as bar:
        if not idx.manifest.encoder:
            raise ConfigError(f"{folder} was built from vectors and has no encoder, so there are no "
                              "query texts to time; measure it with a suite (slimvec bench --suite).")
        texts = query_texts(n)
        task = bar.add_task(f"loading the model and encoding {n} queries", total=3 * n)
        vectors = idx.embed(texts)  # loads the model
        bar.update(task, advance=n, description=f"timing {n} single searches from text")
        from_text = time_single(lambda i: idx.search([texts[i]], k), n, n, 1)
        bar.update(task, advance=n, description=f"timing {n} single searches from vectors")
        from_vectors = time_single(lambda i: idx.search(vectors[i:i + 1], k), n, n, 1)
        bar.advance(task, n)
        info = idx.info()
    return {"index": str(folder), "count": info["count"],
            "recipe": info.get("recipe") or f"{info['reducer']}|{info['store']}",
            "dim_in": info["dim_in"], "dim_out": info["dim_out"], "store_bytes": info["store_bytes"],
            "reducer_bytes": info["reducer_bytes"], "rescore_depth": info.get("rescore_depth"),
            "k": k, "n_queries": n, "from_text": from_text, "from_vectors": from_vectors}


def render_index_latency(result: dict[str, Any]) -> list[str]:
    """The labelled lines ``slimvec bench --index`` prints."""
    def pct(t: dict[str, float]) -> str:
        return f"p50 {t['latency_p50_ms']:.2f} ms, p99 {t['latency_p99_ms']:.2f} ms"
    depth = f"x{result['rescore_depth']}" if result.get("rescore_depth") else "no re-ranking"
    return [f"{result['count']:,} vectors, recipe {result['recipe']}: {result['dim_out']} dims stored "
            f"(from {result['dim_in']}), store {result['store_bytes']:,} bytes on disk, reducer "
            f"{result['reducer_bytes']:,} bytes",
            f"Index.search, k={result['k']}, rescoring {depth}, over {result['n_queries']} single queries:",
            f"  end to end from text (encode + reduce + store + re-rank): {pct(result['from_text'])}",
            f"  from encoded vectors (reduce + store + re-rank):          {pct(result['from_vectors'])}"]
