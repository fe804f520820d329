"""Qdrant's search matrix: ``POST /collections/NAME/points/search/matrix/pairs`` and ``/offsets``.

As qdrant-client's local mode computes it: a sample of at most ``sample`` points matching
``filter`` that hold vector ``using``, sorted by id (integers first, then UUIDs); for each, its
``limit`` nearest among the other sampled points, scored exactly over the kept vectors with the
vector's distance (Cosine and Dot: higher is closer; Euclid: the distance, lower is closer). With fewer than two sampled points the matrix is empty. The sample is bounded by
:data:`MAX_SAMPLE` (Qdrant draws the sample at random; here it is the first points in scroll
order, the same set whenever ``sample`` covers every matching point).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from slimvec.service.qdrant_api.models import QdrantError, check_fields, count_arg
from slimvec.service.qdrant_api.named import exposed

__all__ = ["matrix_offsets", "matrix_pairs", "MAX_SAMPLE"]

#: the most points one matrix samples (its cost grows with the square of the sample)
MAX_SAMPLE = 1000


def matrix_pairs(cols: Any, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """``points/search/matrix/pairs``: ``{"pairs": [{"a", "b", "score"}, ...]}``."""
    ids, rows = _matrix(cols, name, body)
    return {"pairs": [{"a": ids[i], "b": ids[j], "score": s} for i, row in enumerate(rows) for j, s in row]}


def matrix_offsets(cols: Any, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """``points/search/matrix/offsets``: ``{"offsets_row", "offsets_col", "scores", "ids"}``."""
    ids, rows = _matrix(cols, name, body)
    flat = [(i, j, s) for i, row in enumerate(rows) for j, s in row]
    return {"offsets_row": [i for i, _, _ in flat], "offsets_col": [j for _, j, _ in flat],
            "scores": [s for _, _, s in flat], "ids": ids}


def _matrix(cols: Any, name: str, body: dict[str, Any]) -> tuple[list[Any], list[list[tuple[int, float]]]]:
    """The sampled ids and, for each, ``(offset, score)`` of its ``limit`` nearest others."""
    check_fields(body, ("sample", "limit", "filter", "using", "shard_key"), "search matrix")
    sample, limit = count_arg(body, "sample", 10), count_arg(body, "limit", 3)
    for key, value in (("sample", sample), ("limit", limit)):
        if value > MAX_SAMPLE:
            raise QdrantError(400, f"Bad request: search matrix {key} is at most {MAX_SAMPLE} here, "
                                   f"got {value}; ask for a smaller one.")
    using = body.get("using") or ""
    dense = exposed(cols.settings(name))[0]
    if using not in dense:
        raise QdrantError(400, f"Wrong input: Not existing vector name error: {using}; the search "
                               f"matrix is served on the dense vectors ({', '.join(map(repr, dense))}).")
    distance = dense[using]["distance"]
    got: list[tuple[Any, list[float]]] = []
    offset = None
    while len(got) < sample:
        page = cols.scroll(name, {"filter": body.get("filter"), "limit": min(sample - len(got), 256),
                                  "offset": offset, "with_payload": False, "with_vector": [using] if using else True})
        for p in page["points"]:
            vec = p.get("vector")
            vec = vec.get(using) if isinstance(vec, dict) else vec
            if isinstance(vec, list) and vec:
                got.append((p["id"], vec))
        if (offset := page["next_page_offset"]) is None:
            break
    got = sorted(got[:sample], key=lambda p: (p[0], 0) if isinstance(p[0], str) else ("", p[0]))
    if len(got) < 2:
        return [], []
    return [i for i, _ in got], _nearest(np.asarray([v for _, v in got], dtype=np.float32),
                                                     distance, limit)


def _nearest(x: np.ndarray, distance: str, limit: int) -> list[list[tuple[int, float]]]:
    """For each row of ``x``, ``(row, score)`` of its ``limit`` nearest other rows, closest first."""
    if distance == "Cosine":
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-30)
    if distance in ("Cosine", "Dot"):
        scores, closest_first = x @ x.T, -1.0
    else:  # Euclid (the distances served: Cosine, Dot, Euclid)
        sq = (x * x).sum(1)
        scores, closest_first = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * (x @ x.T), 0)), 1.0
    out = []
    for i, row in enumerate(scores):
        order = [j for j in np.argsort(closest_first * row, kind="stable") if j != i][:limit]
        out.append([(int(j), float(row[j])) for j in order])
    return out
