"""What opening an index with payload indexes costs per 100,000 documents (issue 37): time and RAM
of building the in-memory payload index from the payload table, as the first filter after open does.

``make`` writes a payload table of 100,000 rows ``{"bucket": int 0..999, "lang": one of 4, "date":
int (one per document), "text": 80 characters}`` with ``bucket``, ``lang`` and ``date`` declared
(``make --datetime``: also ``"when"``, an RFC 3339 string per document, declared, and the filter
gets a datetime range on it, so the strings are read as datetimes too).
``open`` builds the index in this (fresh) process and answers one three-condition filter; it prints
the wall and CPU seconds and the growth of the process's resident memory. ``--code FILE`` measures
another version of ``slimvec/connectors/payload_index.py`` on the same table (e.g. a commit's, from
``git show COMMIT:slimvec/connectors/payload_index.py > FILE``). Run each measurement in its own
process, alternating versions: the machine may be shared.

Usage (from the repository root)::

    python benchmarks/payload_index_open.py make /tmp/p100k.sqlite [--datetime]
    python benchmarks/payload_index_open.py open /tmp/p100k.sqlite [--code FILE]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import time
from pathlib import Path

import numpy as np

from slimvec.connectors.payloads import PayloadTable
from slimvec.filters import parse_filter

N = 100_000
FIELDS = ("bucket", "lang", "date")
FILTER = {"must": [{"key": "bucket", "range": {"lt": 500}}, {"key": "lang", "match": {"value": "en"}},
                   {"key": "date", "range": {"gte": 1_700_000_000 + 50_000 * 60}}]}
#: FILTER and a datetime range (tables made with ``--datetime``)
FILTER_DT = {"must": [*FILTER["must"], {"key": "when", "range": {"lt": "2024-01-15T00:00:00Z"}}]}


def _rss() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmRSS"))


def make(path: Path, dates: bool = False) -> None:
    """Write the payload table of :data:`N` rows with :data:`FIELDS` declared (``dates``: and
    ``when``)."""
    path.unlink(missing_ok=True)
    table = PayloadTable(path)
    bucket = (np.random.default_rng(0).permutation(N) * 1000) // N
    for start in range(0, N, 10_000):
        ids = list(range(start, min(N, start + 10_000)))
        table.put(ids, [{"bucket": int(bucket[i]), "lang": ["en", "de", "fr", "es"][i % 4],
                         "date": 1_700_000_000 + i * 60, "text": "x" * 70 + f"{i:010d}",
                         **({"when": f"2024-01-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z"} if dates else {})}
                        for i in ids])
    for field in FIELDS + (("when",) if dates else ()):
        table.create_index(field)
    table.commit()
    table.close()


def measure(path: Path, code: Path | None) -> dict[str, object]:
    """Build the in-memory index of ``path`` and answer :data:`FILTER`; its cost."""
    if code is not None:  # another version of the module, swapped in where the table imports it
        import slimvec.connectors.payload_index as current

        spec = importlib.util.spec_from_file_location("payload_index_other", code)
        assert spec is not None and spec.loader is not None
        other = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(other)
        current.PayloadIndex = other.PayloadIndex  # type: ignore[misc]
    table = PayloadTable(path)
    flt = parse_filter(FILTER_DT if "when" in table.indexed_fields() else FILTER)
    gc.collect()
    rss0, wall0, cpu0 = _rss(), time.perf_counter(), time.process_time()
    mem = table.memory_index()
    found = mem.select(flt, np.arange(N, dtype=np.int64), lambda c: None)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    gc.collect()
    return {"code": str(code or "this tree"), "build_wall_s": round(wall, 2), "build_cpu_s": round(cpu, 2),
            "rss_growth_mib": round((_rss() - rss0) / 2 ** 20, 1), "matches": int(len(found))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=["make", "open"])
    ap.add_argument("path", type=Path)
    ap.add_argument("--code", type=Path, default=None, help="Another payload_index.py to measure.")
    ap.add_argument("--datetime", action="store_true", help="make: add the datetime field 'when'.")
    args = ap.parse_args()
    if args.action == "make":
        make(args.path, args.datetime)
    else:
        print(json.dumps(measure(args.path, args.code)))


if __name__ == "__main__":
    main()
