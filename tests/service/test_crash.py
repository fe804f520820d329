"""kill -9 of the server in the middle of a stream of acknowledged batches: after a restart every
acknowledged document is there, and nothing is duplicated."""

from __future__ import annotations

import random
import threading

import httpx
import numpy as np

from tests.service.server import Server

TRIALS = 5
BATCH = 10  # small batches: a trial is a few commits, its cost is the restart


def test_kill9_mid_stream_loses_no_acknowledged_batch(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((TRIALS * 8 * BATCH + 64, 16)).astype(np.float32)
    root = tmp_path / "root"
    root.mkdir()
    acked: list[int] = []
    sent: set[int] = set()
    pick = random.Random(7)
    next_id = 0
    for trial in range(TRIALS + 1):
        with httpx.Client(timeout=60) as http:
            srv = Server(root).start()
            url = srv.url
            try:
                if trial == 0:
                    body = {"reducer": "rp:4", "encoder": None, "sample_vectors": X[:64].tolist()}
                    assert http.put(f"{url}/indexes/c", json=body).status_code == 201
                else:  # after the kill: every acknowledged id is there, no duplicates
                    info = http.get(f"{url}/indexes/c").json()
                    assert len(acked) <= info["count"] <= len(sent), (trial, info, len(acked))
                    got = http.post(f"{url}/indexes/c/payloads", json=acked).json()["payloads"]
                    missing = [i for i, p in zip(acked, got) if p is None]
                    assert not missing, f"trial {trial}: acknowledged ids lost: {missing[:10]}"
                    assert [p["source_id"] for p in got] == acked
                if trial == TRIALS:
                    break
                kill_after = pick.randint(1, 4)
                stop = threading.Event()

                def stream() -> None:
                    nonlocal next_id
                    while not stop.is_set() and next_id + BATCH <= len(X):
                        ids = list(range(next_id, next_id + BATCH))
                        next_id += BATCH
                        sent.update(ids)
                        items = [{"id": i, "vector": X[i].tolist()} for i in ids]
                        try:
                            r = http.post(f"{url}/indexes/c/vectors", json={"vectors": items})
                        except httpx.HTTPError:
                            return  # the kill cut this request: not acknowledged
                        if r.status_code == 200 and r.json()["committed"]:
                            acked.extend(ids)

                t = threading.Thread(target=stream)
                start = len(acked)
                t.start()
                while len(acked) < start + kill_after * BATCH and t.is_alive():
                    t.join(0.005)
                srv.kill()  # kill -9 while the next batch is in flight
                stop.set()
                t.join(60)
            finally:
                srv.kill()
    assert len(acked) >= TRIALS * BATCH
