"""kill -9 of a writer process during upserts, payload updates and deletes (issue 37): after the
restart, the in-memory payload index (built from the payload table at open) selects exactly what
Filter.matches selects on the stored payloads, on every fast store."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from slimvec.connectors import make_store
from tests.connectors.stores import fast_specs
from tests.connectors.test_payload_index import agree_with_payloads, typed_rows

WRITER = r"""
import sys, numpy as np
from slimvec.connectors import make_store
spec, folder = sys.argv[1], sys.argv[2]
vecs = np.load(sys.argv[3])
s = make_store(spec, folder).open()
n = 0
while True:
    ids = np.arange(n * 20, n * 20 + 20, dtype=np.int64) % 400 + 1000
    s.upsert(ids, vecs[:20] + n * 1e-3, [{"lang": ["en", "de"][(n + j) % 2], "year": 2000 + n,
                                         "when": f"2024-05-0{1 + (n + j) % 4}T00:00:00Z"} for j in range(20)])
    s.set_payload(ids[:5], {"tags": ["a"] if n % 2 else []})
    s.delete(ids[15:])
    if n % 3 == 0:
        s.flush()
    n += 1
    print(n, flush=True)
"""


@pytest.mark.parametrize("spec", fast_specs())
def test_kill_9_during_writes_leaves_an_index_that_agrees(spec, minilm_vectors, tmp_path):
    """The payload index is built from the payload table at open: a writer killed mid-batch
    leaves nothing for it to disagree with (its rows and the index are read from one table)."""
    vecs = np.ascontiguousarray(minilm_vectors[:300])
    np.save(tmp_path / "v.npy", vecs[:20])
    s = make_store(spec, tmp_path / "s").create(vecs.shape[1], "cosine")
    for f, kind in (("lang", "keyword"), ("year", "integer"), ("tags", "keyword"), ("when", "datetime")):
        s.create_payload_index(f, kind)
    s.upsert(np.arange(300, dtype=np.int64), vecs, typed_rows(3, 300))
    s.finalize()
    s.close()
    for trial in range(2):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, spec, str(tmp_path / "s"),
                                 str(tmp_path / "v.npy")], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        for _ in range(3 + 4 * trial):  # some batches committed, then killed mid-way
            assert proc.stdout.readline(), "the writer died on its own"
        time.sleep(random.Random(trial).uniform(0, 0.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        shutil.rmtree(tmp_path / "s" / "__pycache__", ignore_errors=True)
        s = make_store(spec, tmp_path / "s").open()
        agree_with_payloads(s)
        s.close()
