"""Recipes over HTTP: ``slimvec serve --recipe`` is the default of new indexes, ``PUT`` takes a
recipe, and a ``rescore=auto`` index is calibrated while the service writes it (after its first
rows and each time it doubles), so searches rescore before the index is ever finished. A real
server in a subprocess, real hnswlib / FAISS stores."""

from __future__ import annotations

import httpx
import numpy as np

import slimvec
from tests.service.conftest import LIMITS
from tests.service.server import Server

AUTO = "pca:8|hnsw|rescore=auto"


def _items(X: np.ndarray, lo: int, hi: int) -> list[dict]:
    return [{"id": i, "vector": X[i].tolist()} for i in range(lo, hi)]


def test_default_recipe_put_recipe_and_calibration_while_serving(tmp_path, vectors):
    root = tmp_path / "root"
    root.mkdir()
    with Server(root, *LIMITS, "--recipe", AUTO) as srv:
        url = srv.url
        # a request naming no recipe, reducer, store or keep_full gets the server's recipe
        r = httpx.put(f"{url}/indexes/d", json={"encoder": None, "sample_vectors": vectors[:64].tolist()},
                      timeout=60)
        assert r.status_code == 201, r.text
        info = r.json()
        assert info["recipe"] == "pca:8|hnsw|rescore=auto,target=0.99"
        assert info["store"] == "hnsw" and info["reducer"] == "pca:8"
        assert info["rescore_depth"] is None  # nothing to calibrate on yet
        for hi in (150, 300):
            w = httpx.post(f"{url}/indexes/d/vectors", json={"vectors": _items(vectors, hi - 150, hi)},
                           timeout=60)
            assert w.status_code == 200 and w.json()["committed"], w.text
            info = httpx.get(f"{url}/indexes/d").json()
            # calibrated on the committed rows: once at 150, again when the index doubled
            assert info["rescore_calibrated"] is True and info["rescore_depth"] >= 1
            # the index status says what the calibrated depth achieved (issue 27 item 3)
            assert info["rescore_status"].startswith(("target met: ", "target not met: reached "))
            assert info["count"] == hi
        manifest = srv.root / "d" / "manifest.json"
        import json

        assert json.loads(manifest.read_text())["rescore"]["n_corpus"] == 300
        # searches rescore at the calibrated depth: full-space cosines, exact self-matches
        res = slimvec.Client(url).index("d").search(vectors[:300:30], k=1)
        assert res.ids[:, 0].tolist() == list(range(0, 300, 30))
        assert np.allclose(res.scores[:, 0], 1.0, atol=1e-3)

        # the user's own queries: the depth re-measured on them, kept for later calibrations
        before = httpx.get(f"{url}/indexes/d").json()["rescore_depth"]
        c = httpx.post(f"{url}/indexes/d/calibrate", json={"vectors": vectors[300:340].tolist()},
                       timeout=60)
        assert c.status_code == 200, c.text
        assert c.json()["n_queries"] == 40 and c.json()["previous_depth"] == before
        assert str(c.json()["depth"]) in c.json()["status"]
        assert httpx.get(f"{url}/indexes/d").json()["rescore_calibrated_on"] == "40 given queries"
        assert json.loads(manifest.read_text())["rescore"]["queries"] == "calibration-queries.safetensors"
        w = httpx.post(f"{url}/indexes/d/vectors", json={"vectors": _items(vectors, 340, 400)},
                       timeout=60)
        assert w.status_code == 200 and w.json()["committed"], w.text

        # PUT with a recipe (fixed depth); a separate store that disagrees is refused
        r = httpx.put(f"{url}/indexes/f", json={"recipe": "pca:8|faiss:Flat|rescore=2", "encoder": None,
                                                "sample_vectors": vectors[:64].tolist()}, timeout=60)
        assert r.status_code == 201, r.text
        assert r.json()["rescore_depth"] == 2 and r.json()["rescore_calibrated"] is False
        bad = httpx.put(f"{url}/indexes/g", json={"recipe": "pca:8|hnsw", "store": "faiss", "encoder": None},
                        timeout=60)
        assert bad.status_code == 422 and "disagrees with --store 'faiss'" in bad.text
        # the same name with another recipe is a conflict, with the same one idempotent
        again = httpx.put(f"{url}/indexes/f", json={"recipe": "pca:8|faiss:Flat|rescore=4", "encoder": None,
                                                    "sample_vectors": vectors[:64].tolist()}, timeout=60)
        assert again.status_code == 409 and "recipe" in again.text
        same = httpx.put(f"{url}/indexes/f", json={"recipe": "pca:8|faiss:Flat|rescore=2", "encoder": None,
                                                   "sample_vectors": vectors[:64].tolist()}, timeout=60)
        assert same.status_code == 200
        # a fixed depth has nothing to calibrate
        fixed = httpx.post(f"{url}/indexes/f/calibrate", json={"vectors": vectors[:5].tolist()},
                           timeout=60)
        assert fixed.status_code == 422 and "rescore=auto" in fixed.text
    # the service's finish on shut-down calibrated again, on the stored queries
    rescore = json.loads(manifest.read_text())["rescore"]
    assert rescore["n_corpus"] == 360 and rescore["n_queries"] == 40
    assert rescore["queries"] == "calibration-queries.safetensors"


def test_put_sets_the_metric(tmp_path, vectors):
    """``PUT /indexes/NAME`` takes the metric, as ``slimvec migrate --metric`` does (issue 35:
    HTTP creation could not set it): an L2 index of vectors whose lengths differ gets the reducer
    that keeps L2, and its scores are the negated squared distances of an exact search."""
    X = vectors[:200] * np.random.default_rng(1).uniform(0.5, 2.0, (200, 1)).astype(np.float32)
    q = X[:4] * 1.2
    d = ((q[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    root = tmp_path / "root"
    root.mkdir()
    with Server(root, *LIMITS) as srv, httpx.Client(base_url=srv.url, timeout=60) as http:
        r = http.put("/indexes/l2", json={"encoder": None, "metric": "l2", "store": "faiss:Flat",
                                          "sample_vectors": X[:64].tolist()})
        assert r.status_code == 201, r.text
        assert (r.json()["metric"], r.json()["reducer"]) == ("l2", "none:normalize=false")
        assert http.post("/indexes/l2/vectors", json={"vectors": _items(X, 0, 200)}).json()["committed"]
        res = http.post("/indexes/l2/search", json={"vectors": q.tolist(), "k": 5}).json()
        assert res["ids"] == np.argsort(d, axis=1)[:, :5].tolist()
        np.testing.assert_allclose(res["scores"], -np.sort(d, axis=1)[:, :5], rtol=1e-4)
        again = {"encoder": None, "metric": "l2", "store": "faiss:Flat"}
        assert http.put("/indexes/l2", json=again).status_code == 200  # the same index
        other = http.put("/indexes/l2", json={**again, "metric": "ip"})
        assert other.status_code == 409 and "metric 'l2'" in other.text, other.text
        bad = http.put("/indexes/b", json={"encoder": None, "metric": "manhattan",
                                           "sample_vectors": X[:64].tolist()})
        assert bad.status_code == 422 and "manhattan" in bad.text and "l2" in bad.text, bad.text


def test_bad_default_recipe_fails_at_start_up(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "slimvec", "serve", "--root", str(tmp_path), "--port", "1",
                           "--recipe", "pca:8|nostore"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "store stage" in " ".join(proc.stderr.split())
