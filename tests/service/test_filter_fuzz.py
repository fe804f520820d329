"""Issue 39 "Done when": generated filters (depth 0-1,200, 0-5,000 conditions, hostile keys, huge
numbers) sent to count, search and delete on every store through a real ``slimvec serve``, on
the native API and the Qdrant-compatible one: no response is a 5xx, none is dropped, the server
lives. Bodies are written as text (``json.dumps`` recurses; a 1,200-deep filter is past it)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import httpx
import numpy as np

from tests.service.server import Server
from tests.test_filters_differential import PAYLOADS

SEED = 39
DIM = 8
TARGETS = {"fa": "faiss", "hn": "hnsw", "qd": "qdrant-edge"}
DEPTHS = [0, 1, 2, 5, 15, 16, 17, 40, 100, 300, 1_000, 1_200]
WIDTHS = [0, 1, 3, 50, 999, 1_000, 1_001, 5_000]
KEYS = ["arr[].b", "arr.b", "k[0]", '"k[0]"', "a b", "$x", "q'", '"a.b"', "big", "n[]", "ü",
        'x"y', "back\\slash", "]", "[", "a..b", "", ".", "a[", "a[99999999999]", "a[-1]",
        "a[]" + "[]" * 40, ".".join(["p"] * 70), "k" * 600, "\x00", "\udc00", "k\tk", "'; DROP --"]
NUMBERS = ["0", "-0.0", "1", "2", "9007199254740993", "9223372036854775807",
           "9223372036854775808", "-9223372036854775809", "18446744073709551616",
           "1" + "0" * 30, "1" + "0" * 400, "1" + "0" * 5_000, "1e308", "-1e308", "1e999",
           "5e-324", "NaN", "Infinity", "-Infinity", "true", "null", '"2020-01-01"', "[]", "{}"]


class Gen:
    """Filter bodies as JSON text."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def leaf(self, long_lists: bool = False, valid: bool = False) -> str:
        rng = self.rng
        key = json.dumps(rng.choice(KEYS[:11] if valid else KEYS))
        num = rng.choice(NUMBERS[:10] if valid else NUMBERS)
        if long_lists:  # past MAX_VALUES (65,536) in one list
            many = ", ".join(str(i) for i in range(70_000))
            return rng.choice([f'{{"has_id": [{many}]}}', f'{{"key": {key}, "match": {{"any": [{many}]}}}}'])
        return rng.choice([
            f'{{"key": {key}, "match": {{"value": {num}}}}}',
            f'{{"key": {key}, "match": {{"value": "x"}}}}',
            f'{{"key": {key}, "match": {{"any": [{num}, 1]}}}}',
            f'{{"key": {key}, "match": {{"except": [{num}]}}}}',
            f'{{"key": {key}, "range": {{"gte": {num}}}}}',
            f'{{"key": {key}, "range": {{"gt": {num}, "lt": {rng.choice(NUMBERS)}}}}}',
            f'{{"is_empty": {{"key": {key}}}}}', f'{{"is_null": {{"key": {key}}}}}',
            f'{{"has_id": [{num}, 3]}}',
        ] + ([] if valid else [f'{{"key": {key}, "match": {{"text": "x"}}}}']))

    def filter(self) -> str:
        """One filter of 0-5,000 conditions at its deepest level, nested 0-1,200 deep (bodies
        under the server's 2 MB limit: a larger one is a 413 before any filter is read)."""
        rng = self.rng
        valid = rng.random() < 0.5  # half within every bound: these reach the stores
        width = rng.choice(WIDTHS[:5] if valid else WIDTHS)
        leaves = [self.leaf(valid=valid) if valid or rng.random() < 0.9 else "{}" for _ in range(width)]
        if leaves and not valid and rng.random() < 0.1:
            leaves[0] = self.leaf(long_lists=True)
        text = f'{{"{rng.choice(["must", "should", "must_not"])}": [{", ".join(leaves)}]}}'
        for _ in range(rng.choice(DEPTHS[:5] if valid else DEPTHS)):
            part = rng.choice(["must", "should", "must_not"])
            text = (f'{{"{part}": [{text}, {self.leaf(valid=valid)}]}}' if rng.random() < 0.2
                    else f'{{"{part}": [{text}]}}')
        return text if len(text) < 1_800_000 else self.filter()

    def requests(self, name: str) -> list[tuple[str, str]]:
        """(path, body) of one filter to each endpoint of index ``name``."""
        flt = self.filter()
        vec = json.dumps([round(self.rng.uniform(-1, 1), 3) for _ in range(DIM)])
        return [(f"/indexes/{name}/count", f'{{"filter": {flt}}}'),
                (f"/indexes/{name}/search", f'{{"vectors": [{vec}], "k": 5, "filter": {flt}}}'),
                (f"/collections/{name}/points/count", f'{{"filter": {flt}, "exact": true}}'),
                (f"/collections/{name}/points/query", f'{{"query": {vec}, "limit": 5, "filter": {flt}}}'),
                (f"/indexes/{name}/delete", f'{{"filter": {flt}}}'),
                (f"/collections/{name}/points/delete", f'{{"filter": {flt}}}')]


def _fill(http: httpx.Client, url: str, name: str, rng: np.random.Generator, start: int) -> None:
    rows = [{"id": start + i, "vector": rng.standard_normal(DIM).round(4).tolist(),
             "payload": p or {}} for i, p in enumerate(PAYLOADS.values())]
    r = http.post(f"{url}/indexes/{name}/vectors", json={"vectors": rows})
    assert r.status_code == 200, r.text


def test_generated_filters_never_5xx_on_any_store(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    gen, rng = Gen(SEED), np.random.default_rng(SEED)
    failures: list[str] = []
    statuses: dict[int, int] = {}
    with Server(root, "--max-body-bytes", "2000000") as srv, httpx.Client(timeout=120) as http:
        sample = rng.standard_normal((32, DIM)).tolist()
        for name, store in TARGETS.items():
            body = {"reducer": "rp:4", "store": store, "encoder": None, "sample_vectors": sample}
            assert http.put(f"{srv.url}/indexes/{name}", json=body).status_code == 201
        for rnd in range(10):
            for name in TARGETS:
                _fill(http, srv.url, name, rng, 1000 * rnd)
                for path, body in gen.requests(name):
                    try:
                        r = http.post(srv.url + path, content=body.encode("utf-8", "surrogatepass"),
                                      headers={"content-type": "application/json"})
                    except httpx.HTTPError as exc:
                        failures.append(f"{path} {body[:200]} -> no answer {exc!r}")
                        http = httpx.Client(timeout=120)
                        continue
                    statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                    if r.status_code >= 500 or "Traceback" in r.text:
                        failures.append(f"{path} {body[:300]} -> {r.status_code} {r.text[:300]}")
        assert srv.proc is not None and srv.proc.poll() is None, "the server died"
    assert not failures, f"{len(failures)} failures, statuses {statuses}:\n" + "\n".join(failures[:8])
    assert statuses.get(200, 0) > 20 and sum(v for k, v in statuses.items() if 400 <= k < 500) > 20, statuses
