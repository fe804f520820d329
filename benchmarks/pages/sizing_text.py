"""The fixed prose of docs/benchmarks/sizing.md (what the constants mean, the limits)."""

from __future__ import annotations

__all__ = ["ram_intro", "reading_lines", "limits_lines"]


def ram_intro() -> str:
    """How the RAM check is measured."""
    return ("Each store is built at the given size (384-d), closed, then opened in a fresh process "
            "that searches 200 queries; RSS growth from just before `open()` (libraries already "
            "loaded) to after the queries is measured from `/proc/self/status`, and resident pages of "
            "the store's mapped files from `/proc/self/smaps`. Qdrant Edge replays its WAL on open, "
            "which leaves the WAL's clean file pages resident (reclaimable, so not part of the "
            "model); 'served' is the RSS growth without them. The per-vector row compares slopes "
            "between the two sizes; 'fixed' is the measured growth not explained by the slope "
            "(runtime, thread pools, caches: not in the model, so small stores are under-predicted).")


def reading_lines() -> list[str]:
    """The constants checked against the file formats."""
    return [
        "### Reading the constants", "",
        "The fitted slopes can be checked against the file formats: hnswlib writes per vector the "
        "float32 vector (`4·d`), a level-0 link block of `2·M` 4-byte ids plus a 4-byte count, an "
        "8-byte label, a 4-byte upper-level header and on average `(4·M+4)/(M−1)` bytes of upper "
        "links (148.5 bytes besides the vector at M=16); FAISS `SQ8` stores one byte per coordinate "
        "plus two trained floats per dimension; `IVF64,PQ16x4` stores 8 code bytes and an 8-byte id "
        "per vector and `64·d + 16·d` float32 centroids; `ids.npy` is the 8-byte document id per "
        "position. Qdrant Edge's WAL costs about 5 bytes per coordinate (CBOR float32), and its "
        "scalar quantization 1 byte per coordinate plus a 4-byte offset per vector.", "",
        "<!-- /details -->", "",
    ]


def limits_lines() -> list[str]:
    """What the models do not capture."""
    return [
        "<!-- details -->", "### Limits", "",
        "- Qdrant Edge keeps its WAL after `optimize()` + `flush()` in these builds: the held-out "
        "384-d builds fill more than one 32 MiB WAL segment and the closed segment stays on "
        "disk, which the linear WAL term matches. If a later version truncates it, disk drops by "
        "that term (RAM is unaffected).",
        "- Qdrant's compressed HNSW links grow slightly faster than linearly (ids get longer as n "
        "grows), so far beyond the calibration sizes the models under-predict a little; the "
        "held-out rows show how much at 10× the fitted size.",
        "- RAM is predicted from the resident components, not measured; hnswlib also reserves "
        "capacity while it grows (slimvec doubles it), so peak RAM during ingest can exceed the "
        "served size.",
        "- Payload models are fitted at one payload size; `slimvec plan --payload-bytes P` refits "
        "at P for the plan.", "",
        "<!-- /details -->", "",
    ]
