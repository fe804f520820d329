"""What the service shows a browser and a client about itself (issue 25 item 7): /docs renders
offline from assets the server ships, CORS only for the origins the operator names, and index
infos carry no absolute server paths. Real ``slimvec serve`` processes; the browser is Debian's
Chromium driven by Playwright with every request off loopback refused."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from slimvec.errors import ConfigError
from tests.service.server import Server

log = logging.getLogger(__name__)

CHROMIUM = os.environ.get("SLIMVEC_CHROMIUM", "/usr/bin/chromium")
#: a resolver that knows no host but loopback: a CDN request cannot even be looked up
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run",
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
RW_KEY, RO_KEY = "rw-secret-i25", "ro-secret-i25"
KEYS = {"SLIMVEC_API_KEY": RW_KEY, "SLIMVEC_READ_ONLY_KEY": RO_KEY}
RW = {"Authorization": f"Bearer {RW_KEY}"}
APP = "https://app.example"


def _body(X: np.ndarray) -> dict:
    return {"reducer": "rp:8", "store": "qdrant-edge", "encoder": None,
            "sample_vectors": X[:64].tolist()}


# --------------------------------------------------------------------------- paths
def test_index_infos_carry_no_absolute_paths(shared_server, vectors):
    """GET /indexes, GET /indexes/NAME and PUT answered ``"index": "/abs/root/NAME"``: the
    server's file layout, to any reader. Now the folder relative to the root."""
    url, root = shared_server.url, shared_server.root
    made = httpx.put(url + "/indexes/ready", json=_body(vectors), timeout=60)
    assert made.status_code == 201, made.text
    pending = httpx.put(url + "/indexes/waiting", json={"reducer": "rp:8", "encoder": None})
    assert pending.status_code == 201 and pending.json()["state"] == "pending"
    answers = [made, pending, httpx.get(url + "/indexes"), httpx.get(url + "/indexes/ready"),
               httpx.get(url + "/indexes/waiting")]
    for r in answers:
        assert r.status_code in (200, 201), r.text
        for path in {str(root), str(root.resolve()), str(root.parent)}:
            assert path not in r.text, (r.request.url, r.text)
    listed = {i["name"]: i for i in answers[2].json()["indexes"]}
    assert listed["ready"]["index"] == "ready" and listed["waiting"]["index"] == "waiting"
    assert answers[3].json()["index"] == "ready" and answers[3].json()["state"] == "ready"
    assert answers[4].json()["index"] == "waiting"


# --------------------------------------------------------------------------- CORS
def _preflight(url: str, origin: str) -> httpx.Response:
    return httpx.options(url + "/indexes/x/search", headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})


def test_cors_off_by_default(shared_server):
    """With no --cors-origin no response carries a CORS header (a browser page elsewhere may not
    read the answers)."""
    url = shared_server.url
    for r in (_preflight(url, APP), httpx.get(url + "/healthz", headers={"Origin": APP})):
        assert not any(h.lower().startswith("access-control-") for h in r.headers), r.headers


def test_cors_for_named_origins(tmp_path, vectors):
    """--cors-origin (repeatable): a preflight from a named origin is answered with its origin
    (before the key gate: browsers send no key on a preflight), another origin gets no
    Access-Control-Allow-Origin; never '*', never credentials (keys travel in headers)."""
    root = tmp_path / "root"
    root.mkdir()
    other = "http://127.0.0.1:5173"
    with Server(root, "--cors-origin", APP, "--cors-origin", other, env=KEYS,
                ready_timeout=60) as srv:
        for origin in (APP, other):
            r = _preflight(srv.url, origin)
            assert r.status_code == 200, (r.status_code, r.text)
            assert r.headers["access-control-allow-origin"] == origin
            allowed = r.headers["access-control-allow-headers"].lower()
            assert "authorization" in allowed and "content-type" in allowed
            assert "access-control-allow-credentials" not in r.headers
        bad = _preflight(srv.url, "https://evil.example")
        assert "access-control-allow-origin" not in bad.headers and bad.status_code >= 400
        # a real request: the allowed origin may read it, the other may not; the key still counts
        got = httpx.get(srv.url + "/indexes", headers={**RW, "Origin": APP})
        assert got.status_code == 200 and got.headers["access-control-allow-origin"] == APP
        assert "access-control-allow-origin" not in httpx.get(
            srv.url + "/indexes", headers={**RW, "Origin": "https://evil.example"}).headers
        assert httpx.get(srv.url + "/indexes", headers={"Origin": APP}).status_code == 401
        # the metrics middleware counted each answer by route and status, the key gate's 401 too
        metrics = httpx.get(srv.url + "/metrics", headers=RW).text
        assert 'slimvec_requests_total{method="GET",route="/indexes",status="200"} 2.0' in metrics
        assert 'slimvec_requests_total{method="GET",route="unmatched",status="401"} 1.0' in metrics


def test_cors_origin_is_written_as_browsers_send_it(tmp_path):
    """CORSMiddleware compares origins as strings: 'https://App.Example/' would never match the
    'https://app.example' a browser sends, so it is stored so."""
    from slimvec.service.config import ServiceConfig

    config = ServiceConfig(root=tmp_path, cors_origins=["https://App.Example/",
                                                        "http://localhost:5173"])
    config.check()
    assert config.cors_origins == ["https://app.example", "http://localhost:5173"]


@pytest.mark.parametrize("origin", ["*", "app.example", "https://app.example/path", "ftp://x",
                                    "https://", "https://app.example "])
def test_cors_origin_must_be_an_origin(tmp_path, origin):
    """'*' would let every page on the web read the answers; a path or no scheme never matches a
    browser's Origin header: all refused at start-up, saying what an origin looks like."""
    from slimvec.service.config import ServiceConfig

    with pytest.raises(ConfigError, match="--cors-origin") as err:
        ServiceConfig(root=tmp_path, cors_origins=[origin]).check()
    assert "https://app.example" in str(err.value)


# --------------------------------------------------------------------------- /docs offline
@pytest.fixture(scope="module")
def browser():
    if os.environ.get("SLIMVEC_SKIP_BROWSER") == "1":
        pytest.skip("SLIMVEC_SKIP_BROWSER=1: browser tests skipped on request")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"No Chromium at {CHROMIUM}: run scripts/setup.sh (installs Debian's chromium) "
                    "or set SLIMVEC_SKIP_BROWSER=1 to skip these tests explicitly.")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Python package playwright missing: pip install -e '.[test]' "
                    "(or SLIMVEC_SKIP_BROWSER=1).")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _render(browser, srv: Server, path: str, ready: str) -> tuple[str, list[str]]:
    """Open ``path`` with the read key, every request off the server refused; the page's text
    once ``ready`` (a CSS selector) is on it, and the URLs it asked for."""
    ctx = browser.new_context(extra_http_headers={"api-key": RO_KEY})
    page = ctx.new_page()
    requests: list[str] = []
    refused: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))

    def gate(route) -> None:  # noqa: ANN001
        if route.request.url.startswith(srv.url + "/"):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    page.route("**/*", gate)
    try:
        t0 = time.perf_counter()
        page.goto(srv.url + path)
        page.wait_for_selector(ready, timeout=20000)
        log.info("%s rendered offline in %.2f s (%d requests)", path, time.perf_counter() - t0,
                 len(requests))
        text = page.inner_text("body")
    finally:
        ctx.close()
    assert refused == [] and errors == [], (path, refused, errors)
    assert all(u.startswith(srv.url + "/") for u in requests), requests
    return text, requests


def test_docs_render_offline(tmp_path, browser):
    """/docs and /redoc were blank without internet: FastAPI's pages load Swagger UI and ReDoc
    from a CDN. Now the server ships the assets (fastapi-offline's files): the operations render
    in Chromium with every request off the server refused, behind the read key."""
    root = tmp_path / "root"
    root.mkdir()
    with Server(root, env=KEYS, ready_timeout=60) as srv:
        for path in ("/docs", "/redoc"):
            html = httpx.get(srv.url + path, headers=RW)
            assert html.status_code == 200 and "https://" not in html.text, html.text[:2000]
            assert httpx.get(srv.url + path).status_code == 401  # behind the read key
            assert "img-src 'self'" in html.headers["content-security-policy"]
        assert '"validatorUrl": null' in httpx.get(srv.url + "/docs", headers=RW).text
        assert httpx.get(srv.url + "/docs-assets/swagger-ui.css").status_code == 401
        text, requests = _render(browser, srv, "/docs", ".opblock")
        assert "/indexes/{name}/search" in text and "/healthz" in text, text[:3000]
        assert any(u.endswith("/openapi.json") for u in requests)
        text, requests = _render(browser, srv, "/redoc", "[data-section-id^='tag/search']")
        assert "/indexes/{name}/search" in text, text[:3000]
        assert any(u.endswith("/openapi.json") for u in requests)
