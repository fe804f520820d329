"""Changing an index against building it again (``python -m benchmarks rebuild`` and ``sync``).

``measure_rebuild``: whole commands as subprocesses on the same sentences:
``slimvec ingest DOCS --index A --recipe OLD`` (the index to change), ``slimvec rebuild --index A
--recipe NEW`` (refit on the kept full vectors, no encoder), and ``slimvec ingest DOCS --index B
--recipe NEW`` (what a user does without rebuild). Issue 25 asks for re-ingest >= 10x slower.

``measure_sync``: v1 is the first N rows of a JSONL corpus; v2 changes 1 % of the texts (each
replaced by another corpus sentence), removes 1 % and adds 1 % new rows. The index is built from
v1 with ``--sync``, then ``slimvec ingest v2 --index A --sync`` is timed against ``slimvec ingest
v2 --index B`` into a new folder (a full re-ingest).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from benchmarks.corpora.sentences import jsonl_rows, write_jsonl
from benchmarks.kinds.proc import run_cli

__all__ = ["OLD_RECIPE", "NEW_RECIPE", "measure_rebuild", "sync_versions", "measure_sync"]

OLD_RECIPE = "pca:96|qdrant-edge|rescore=auto,keep_full=float16"
NEW_RECIPE = "pca:128|faiss:HNSW32|rescore=auto,keep_full=float16"


def measure_rebuild(docs: Path, old: str = OLD_RECIPE, new: str = NEW_RECIPE) -> dict[str, Any]:
    """Time ``slimvec rebuild`` against re-ingesting ``docs`` with the new recipe.

    Returns
    -------
    dict
        ``{"documents", "old_recipe", "new_recipe", "ingest_old_seconds", "rebuild_seconds",
        "reingest_seconds", "reingest_over_rebuild"}``.
    """
    n = len(jsonl_rows(docs))
    with tempfile.TemporaryDirectory(prefix="slimvec-bench-rebuild-") as tmp:
        work = Path(tmp)
        first, _ = run_cli(["ingest", str(docs), "--index", str(work / "a"), "--recipe", old, "--json"])
        rebuild, _ = run_cli(["rebuild", "--index", str(work / "a"), "--recipe", new, "--json"])
        reingest, _ = run_cli(["ingest", str(docs), "--index", str(work / "b"), "--recipe", new, "--json"])
    return {"documents": n, "old_recipe": old, "new_recipe": new, "ingest_old_seconds": round(first, 2),
            "rebuild_seconds": round(rebuild, 2), "reingest_seconds": round(reingest, 2),
            "reingest_over_rebuild": round(reingest / rebuild, 2)}


def sync_versions(pool: list[dict], n: int, step: int = 100) -> tuple[list[dict], list[dict]]:
    """v1 (the first ``n`` rows) and v2: every ``step``-th row changed, removed and added (1 % each).

    ``pool`` holds ``n`` rows plus the fresh ones changes and additions take their texts from.
    """
    v1 = pool[:n]
    fresh = iter(pool[n:])
    v2: list[dict] = []
    for i, r in enumerate(v1):
        if i % step == step // 2:  # removed
            continue
        v2.append({**r, "text": next(fresh)["text"]} if i % step == 0 else r)  # changed
        if i % step == step // 4:
            v2.append(next(fresh))  # added
    return v1, v2


def measure_sync(corpus: Path, n: int = 5000, recipe: str | None = None) -> dict[str, Any]:
    """Time a re-sync of a 1 %-changed source against a full re-ingest of it.

    Returns
    -------
    dict
        ``{"n", "v2_rows", "recipe", "first_build_s", "sync_s", "full_reingest_s", "speedup",
        "sync": {added, updated, unchanged, deleted, rejected, recorded, count, encode_seconds},
        "full": {ingested, rejected, count, encode_seconds}}``.
    """
    from slimvec.errors import ConfigError

    step = 100
    pool = jsonl_rows(corpus, n + 2 * (n // step) + 10)
    if len(pool) < n + 2 * (n // step) + 2:
        raise ConfigError(f"{corpus} holds {len(pool):,} rows; --n {n:,} needs {n + 2 * (n // step) + 2:,} "
                          "(1 % changed and 1 % added come from the rows after the first N). Pass a smaller --n.")
    v1, v2 = sync_versions(pool, n, step)
    extra = ["--recipe", recipe] if recipe else []
    with tempfile.TemporaryDirectory(prefix="slimvec-bench-sync-") as tmp:
        t = Path(tmp)
        src = write_jsonl(t / "corpus.jsonl", v1)
        build_s, built = run_cli(["ingest", str(src), "--index", str(t / "A"), "--sync", *extra, "--json"])
        write_jsonl(src, v2)
        sync_s, synced = run_cli(["ingest", str(src), "--index", str(t / "A"), "--sync", "--json"])
        full_s, full = run_cli(["ingest", str(src), "--index", str(t / "B"), *extra, "--json"])
    return {"n": n, "v2_rows": len(v2), "recipe": built.get("recipe"), "first_build_s": round(build_s, 1),
            "sync_s": round(sync_s, 1), "full_reingest_s": round(full_s, 1), "speedup": round(full_s / sync_s, 1),
            "sync": {k: synced.get(k) for k in ("added", "updated", "unchanged", "deleted", "rejected",
                                                "recorded", "count", "encode_seconds")},
            "full": {k: full.get(k) for k in ("ingested", "rejected", "count", "encode_seconds")}}
