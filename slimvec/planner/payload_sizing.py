"""Size model of the payload indexes (issue 52 item 2): RAM and disk per indexed point, per kind.

A field declared with ``--payload-index FIELD:KIND`` costs, on a FAISS / hnswlib index (the
default recipe), an SQLite expression index in ``payloads.sqlite`` (disk) and, from the first
filtered search on, the in-memory :class:`~slimvec.connectors.payload_index.PayloadIndex` (RAM:
each id's value kept as a Python object, plus the sorted arrays built from them). Both follow
``bytes = fixed + n · per_point``; ``per_point`` depends on the kind (a float is an object per
point, a bool a shared singleton, a datetime a string per point) and on the values themselves.

The constants are not typed in: :func:`measure_fields` builds the real payload table over ``n``
rows, creates the field's index and measures its allocated bytes, then opens the table in a
fresh process and reads ``VmRSS`` before and after the first filtered search on the field;
:func:`fit_field` fits two sizes. :data:`~slimvec.index.filter_info.PAYLOAD_INDEX_BYTES` holds what
``python -m slimvec.planner.payload_sizing`` printed (synthetic values of each kind, see
:func:`sample_values`); ``slimvec plan --corpus FILE`` measures the same on the user's own rows
(:func:`fit_on_payloads`). A Qdrant store keeps its own payload indexes (``create_field_index``):
:func:`measure_qdrant_fields` measures those the same way on a real Qdrant Edge shard (its
allocated bytes before and after the index is created; the VmRSS of a fresh process that opens
the shard and runs one filtered search, with the index against a copy without it), and
:data:`~slimvec.index.filter_info.QDRANT_PAYLOAD_INDEX_BYTES` holds what
``python -m slimvec.planner.payload_sizing --qdrant`` printed.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.buildspec import PAYLOAD_INDEX_KINDS
from slimvec.errors import ConfigError
from slimvec.planner.sizing import RSS_FUNCTION

__all__ = ["sample_values", "measure_fields", "measure_qdrant_fields", "first_search_rss", "fit_field",
           "fit_on_payloads"]

log = logging.getLogger(__name__)

#: fewest rows of the user's corpus the payload indexes are measured on (see fit_on_payloads)
MIN_CORPUS_ROWS = 10000

_CHILD = r"""
import json, sys
import numpy as np
from slimvec.connectors.payloads import PayloadTable
from slimvec.filters import parse_filter
""" + RSS_FUNCTION + r"""

path, fields = sys.argv[1], json.loads(sys.argv[2])
table = PayloadTable(path)
live = np.asarray(table.row_ids(), dtype=np.int64)
before = rss()
mem = table.memory_index()
for field, (kind, probe) in fields.items():  # the first filtered search on each field
    cond = {"key": field, "range": {"gte": probe}} if kind in ("float", "datetime") else \
        {"key": field, "match": {"value": probe}}
    mem.select(parse_filter({"must": [cond]}), live, lambda c: live)
print(json.dumps({"rss_delta": rss() - before}))
"""


_QDRANT_CHILD = r"""
import json, sys
import numpy as np
from slimvec.connectors import make_store
""" + RSS_FUNCTION + r"""

path = sys.argv[1]
before = rss()
store = make_store("qdrant-edge", path).open()  # Qdrant loads its payload indexes as it opens
store.search(np.ones((1, 4), np.float32), 5)
print(json.dumps({"rss_delta": rss() - before}))
"""


def sample_values(kind: str, n: int, seed: int = 0) -> list[Any]:
    """``n`` synthetic values of ``kind``: keywords among 200 product names, integers 1..5
    (a priority), floats in [0, 1000), booleans, ISO datetimes spread over a year (one string
    per point, as created_at fields are)."""
    rng = np.random.default_rng(seed)
    if kind == "keyword":
        return [f"product-{k:03d}" for k in rng.integers(0, 200, n).tolist()]
    if kind == "integer":
        return rng.integers(1, 6, n).tolist()
    if kind == "float":
        return (rng.random(n) * 1000).tolist()
    if kind == "bool":
        return (rng.random(n) < 0.5).tolist()
    if kind == "datetime":
        secs = (1_700_000_000 + rng.integers(0, 365 * 86400, n)).tolist()
        import datetime as dt

        return [dt.datetime.fromtimestamp(s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") for s in secs]
    raise ConfigError(f"Unknown payload index kind {kind!r}: expected one of {', '.join(PAYLOAD_INDEX_KINDS)}.")


def measure_fields(fields: Mapping[str, str], payloads: Sequence[Mapping[str, Any]], *,
                   workdir: str | Path | None = None, timeout: float = 600) -> dict[str, int]:
    """Measured bytes of the payload indexes of ``fields`` (field -> kind) over ``payloads``.

    Returns ``{"n", "disk", "ram"}``: allocated bytes the SQLite expression indexes add to the
    payload table, and the VmRSS growth of a fresh process at its first filtered search on
    each field (the in-memory index built and searched), all fields together as a served index
    holds them.
    """
    from slimvec.connectors.payloads import PayloadTable
    from slimvec.persistence import allocated_bytes

    probes = _probes(fields, payloads)
    with tempfile.TemporaryDirectory(prefix="slimvec-pidx-", dir=workdir) as tmp:
        path = Path(tmp) / "payloads.sqlite"
        table = PayloadTable(path)
        table.put(list(range(1, len(payloads) + 1)), [dict(p) for p in payloads])
        table.commit()
        table.close()
        before = allocated_bytes(tmp)
        table = PayloadTable(path)
        for field in fields:
            if not table.create_index(field):
                raise ConfigError(f"Payload field {field!r} cannot have an index (a dotted path or odd characters).")
        table.commit()
        table.close()
        disk = allocated_bytes(tmp) - before
        ram = first_search_rss(path, probes, timeout=timeout)
    return {"n": len(payloads), "disk": int(disk), "ram": ram}


def measure_qdrant_fields(fields: Mapping[str, str], payloads: Sequence[Mapping[str, Any]], *,
                          workdir: str | Path | None = None, timeout: float = 600) -> dict[str, int]:
    """:func:`measure_fields` for a Qdrant store's own payload indexes, on a real Qdrant Edge
    shard of ``payloads`` (4-d vectors): the allocated bytes ``create_field_index`` adds, and the
    VmRSS growth of a fresh process that opens the shard (Qdrant loads its payload indexes then)
    and searches it once, minus the same for a copy of the shard without the indexes (the smaller
    of two runs each)."""
    import shutil

    from slimvec.connectors import make_store
    from slimvec.persistence import allocated_bytes

    probes = _probes(fields, payloads)
    with tempfile.TemporaryDirectory(prefix="slimvec-qpidx-", dir=workdir) as tmp:
        bare, indexed = Path(tmp) / "bare", Path(tmp) / "indexed"
        store = make_store("qdrant-edge", bare).create(4, "cosine")
        vecs = np.random.default_rng(0).standard_normal((len(payloads), 4)).astype(np.float32)
        for lo in range(0, len(payloads), 5000):
            ids = np.arange(lo, min(lo + 5000, len(payloads)))
            store.upsert(ids + 1, vecs[ids], [dict(payloads[i]) for i in ids.tolist()])
        store.finalize()
        store.close()
        shutil.copytree(bare, indexed)
        before = allocated_bytes(indexed)
        store = make_store("qdrant-edge", indexed).open()
        for field, kind in fields.items():
            store.create_payload_index(field, kind)
        store.flush()
        store.close()
        disk = allocated_bytes(indexed) - before
        rss = [sorted(_child_rss(_QDRANT_CHILD, path, probes, timeout) for _ in range(2))[0]
               for path in (indexed, bare)]
    return {"n": len(payloads), "disk": int(disk), "ram": rss[0] - rss[1]}


def _probes(fields: Mapping[str, str], payloads: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, Any]]:
    """field -> (kind, a value of the field to search for), every kind checked."""
    probes = {}
    for field, kind in fields.items():
        if kind not in PAYLOAD_INDEX_KINDS:
            raise ConfigError(f"Payload index {field}:{kind}: expected KIND one of {', '.join(PAYLOAD_INDEX_KINDS)}.")
        probe = next((p.get(field) for p in payloads if p.get(field) is not None), None)
        if probe is None:
            raise ConfigError(f"Payload field {field!r}: none of the {len(payloads):,} rows has a value "
                              "to index; check the field name against the corpus' columns.")
        probes[field] = (kind, probe)
    return probes


def _child_rss(code: str, path: str | Path, probes: Mapping[str, tuple[str, Any]], timeout: float) -> int:
    """The ``rss_delta`` a child running ``code`` over ``path`` and ``probes`` prints."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code, str(path), json.dumps(dict(probes))],
                          env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise ConfigError(f"Measuring the payload indexes of {', '.join(probes)} failed: "
                          f"{proc.stderr.strip()[-300:]}")
    return int(json.loads(proc.stdout.strip().splitlines()[-1])["rss_delta"])


def first_search_rss(path: str | Path, probes: Mapping[str, tuple[str, Any]], *, timeout: float = 600) -> int:
    """VmRSS growth of a fresh process that opens the payload table ``path`` (an index's
    ``payloads.sqlite``) and runs the first filtered search on each field of ``probes``
    (field -> (kind, a value to match)): the RAM its payload indexes take once searched."""
    return _child_rss(_CHILD, path, probes, timeout)


def _fit(small: dict[str, int], large: dict[str, int]) -> dict[str, float]:
    dn = max(large["n"] - small["n"], 1)
    ram_per = max((large["ram"] - small["ram"]) / dn, 0.0)
    return {"ram_fixed": max(large["ram"] - ram_per * large["n"], 0.0), "ram_per_point": ram_per,
            "disk_per_point": max(large["disk"], 0) / large["n"]}


def fit_field(kind: str, sizes: tuple[int, int] = (20000, 100000), *, seed: int = 0,
              workdir: str | Path | None = None, qdrant: bool = False) -> dict[str, float]:
    """The constants of ``kind`` from :func:`measure_fields` (:func:`measure_qdrant_fields` with
    ``qdrant``) on :func:`sample_values` at two sizes."""
    measure = measure_qdrant_fields if qdrant else measure_fields
    got = [measure({"f": kind}, [{"f": v, "text": "x"} for v in sample_values(kind, n, seed)],
                   workdir=workdir) for n in sizes]
    return _fit(got[0], got[1])


def fit_on_payloads(fields: Mapping[str, str], payloads: Sequence[Mapping[str, Any]], *,
                    workdir: str | Path | None = None) -> dict[str, float]:
    """The constants of all ``fields`` together, measured on the user's own ``payloads`` (half of
    them, then all; not cycled to more rows: repeated datetimes parse from a cache and read
    ~40 % cheaper than distinct ones). Against a measurement at 100,000 rows of
    :func:`sample_values`, a fit on 15,000 rows predicted -3 %, on 5,000 +11 %, on 2,000 -38 %
    (the RSS growth of a few thousand rows is a few allocator arenas), so fewer than 10,000 rows
    are refused."""
    if len(payloads) < MIN_CORPUS_ROWS:
        raise ConfigError(f"Measuring payload indexes needs at least {MIN_CORPUS_ROWS:,} rows of --corpus "
                          f"(fewer grow RSS too coarsely for a slope), got {len(payloads):,}: give a "
                          "larger file, or leave out --corpus to use the shipped per-kind constants.")
    half = list(payloads[: len(payloads) // 2])
    return _fit(measure_fields(fields, half, workdir=workdir), measure_fields(fields, payloads, workdir=workdir))


if __name__ == "__main__":  # python -m slimvec.planner.payload_sizing [--qdrant]: the constants
    on_qdrant = "--qdrant" in sys.argv[1:]
    print(json.dumps({kind: {k: round(v, 1) for k, v in fit_field(kind, qdrant=on_qdrant).items()}
                      for kind in PAYLOAD_INDEX_KINDS}, indent=1))
