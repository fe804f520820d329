"""Run ``slimvec ARGS`` in this process while a thread samples every thread's stack every 5 ms.

A wall-clock profile of all threads (cProfile sees one, py-spy is not always installed): for each
thread, the innermost frame and the innermost slimvec frame of each sample, counted; the top ones
are printed and written as JSON. Used on the GPU machine of issue 36 (docs/benchmarks/ingest.md):

    python benchmarks/thread_sample.py --out samples.json -- ingest texts.jsonl --index ix --json
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from types import FrameType

log = logging.getLogger("thread_sample")


def where(frame: FrameType | None) -> str:
    """``innermost <- innermost slimvec`` frame of a stack, as ``file:function``."""
    inner = mine = None
    while frame is not None:
        code = frame.f_code
        name = f"{os.path.basename(code.co_filename)}:{code.co_name}"
        inner = inner or name
        if mine is None and f"{os.sep}slimvec{os.sep}" in code.co_filename:
            mine = name
        frame = frame.f_back
    return f"{inner} <- {mine}"


def sample(counts: dict[str, collections.Counter[str]], stop: threading.Event, every: float) -> None:
    """Count every other thread's :func:`where` until ``stop`` is set."""
    me = threading.get_ident()
    while not stop.wait(every):
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if ident != me:
                counts[names.get(ident, str(ident))][where(frame)] += 1


def main(argv: list[str] | None = None) -> int:
    """Sample ``slimvec ARGS``; print each thread's top places; 0 unless slimvec failed."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="Also write the counts here (JSON).")
    ap.add_argument("--every", type=float, default=0.005, help="Seconds between samples.")
    ap.add_argument("--top", type=int, default=8, help="Places printed per thread.")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="-- then slimvec's arguments.")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    stop = threading.Event()
    th = threading.Thread(target=sample, args=(counts, stop, a.every), daemon=True)
    from slimvec.cli import main as slimvec_main

    code, t0 = 0, time.perf_counter()
    th.start()
    try:
        slimvec_main([x for x in a.args if x != "--"] if a.args[:1] == ["--"] else a.args)
    except SystemExit as exc:
        code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
    finally:
        stop.set()
        th.join()
    log.info("%.1f s sampled every %.0f ms", time.perf_counter() - t0, a.every * 1000)
    for name, c in counts.items():
        log.info("== %s: %d samples", name, sum(c.values()))
        for place, n in c.most_common(a.top):
            log.info("  %6d %s", n, place)
    if a.out:
        a.out.write_text(json.dumps({k: v.most_common(50) for k, v in counts.items()}, indent=1),
                         encoding="utf-8")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
