"""Seeded fuzz of the write and search requests over payload shapes (issue 23, "Done when").

A fixed-seed generator builds a fixed list of raw HTTP bodies: payloads nested 0..200 levels
(dicts, lists, both), keys and values with lone surrogates (``\\udc00`` escapes, as
``json.dumps(ensure_ascii=True)`` writes them), NUL, empty and very long keys, strings near the
body limit, integers beyond 64 bits, ``1e308``, ``-0.0``, the ``NaN`` / ``Infinity`` literals
Python's JSON parser accepts, duplicate keys, payloads and bodies that are not objects, ids of odd
types, payload keys the service fills itself (``text``, ``source_id``), vectors of odd
values, and searches with extreme ``k`` / ``rescore`` and filter fields.
They go to one real ``slimvec serve`` serving vector-only indexes on Qdrant Edge, hnswlib and
FAISS, and two indexes still collecting their fit sample (vectors, and documents of an encoder
index: their rows go to ``pending.jsonl`` without any model being loaded).

What must hold, every failure collected with the request that caused it:

- no response is a 5xx, no connection is dropped, the server never dies;
- every acknowledged row (2xx, ``committed: true``, not in ``rejected``) is counted and its
  payload reads back as sent (types kept: an integer stays an integer);
- after a clean stop + restart, and after kill -9 + restart: every index opens (``state`` ready or
  pending, nothing in ``/readyz`` errors), searches answer 200, counts equal what was acknowledged.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from pydantic import ValidationError

from slimvec.ids import doc_ids
from slimvec.service.models import DocumentsIn, VectorsIn
from tests.service.server import Server

log = logging.getLogger(__name__)
SEED = 23
DIM = 8
MAX_BODY = 400_000
MAX_BATCH = 64
#: cases per target (a case is one request; the checks after each phase add ~10 per index)
CASES = {"qd": 60, "hn": 60, "fa": 60, "pv": 25, "pd": 25}
#: index name -> (store label, create body)
TARGETS: dict[str, tuple[str, dict[str, Any]]] = {
    "qd": ("qdrant-edge", {"reducer": "rp:4", "store": "qdrant-edge", "encoder": None}),
    "hn": ("hnsw", {"reducer": "rp:4", "store": "hnsw", "encoder": None}),
    "fa": ("faiss", {"reducer": "rp:4", "store": "faiss", "encoder": None}),
    "pv": ("pending vectors (qdrant-edge)",
           {"reducer": "rp:4", "store": "qdrant-edge", "encoder": None, "fit_after": 10_000_000}),
    "pd": ("pending documents (minilm, qdrant-edge)",
           {"reducer": "rp:4", "store": "qdrant-edge", "fit_after": 10_000_000}),
}
READY = ("qd", "hn", "fa")

SURROGATES = ["\udc00", "\ud800", "k\udc00", "\udfff\ud800", "a\ud83d", "\ud83d\ude00"]
ODD_KEYS = ["", "\x00", "k\x00k", " ", "source_id", "text", "$", "a.b", "[0]", "__proto__",
            "é😀", "\u202e", "\ufeff", "k" * 1_000, "K" * 60_000]
BIG_NUMBERS: list[Any] = [2 ** 63, 2 ** 63 - 1, 2 ** 64, -2 ** 63, -2 ** 63 - 1, 10 ** 30,
                          -10 ** 40, 2 ** 200, 1e308, -1e308, 5e-324, -0.0, 0, 1.5, True, False,
                          None, float("nan"), float("inf"), float("-inf")]
ODD_IDS: list[Any] = [True, False, 1.0, -0.0, 1.5, -1, -2 ** 63 - 1, 2 ** 63, 2 ** 64, 2 ** 62,
                      1e308, "", " ", "\x00", "\udc00", "id\ud800x", "05", "7.0", "٣",
                      "x" * 5_000, None, [], {}, "e\u0301"]
ODD_VECTOR_VALUES: list[Any] = ["NaN", "nan", "inf", "-Infinity", "1e999", None, True, "1",
                                1e308, -1e308, 1e39, 3.4e38, 5e-324, 2 ** 64, 10 ** 400,
                                float("nan"), float("inf"), [1.0], {}, ""]
DEPTHS = [0, 1, 2, 5, 16, 31, 32, 63, 64, 100, 126, 127, 128, 129, 130, 150, 199, 200]


# ---------------------------------------------------------------------- generator
class Case:
    """One request: where it goes, its raw body, and what the fuzzer knows about it."""

    def __init__(self, target: str, kind: str, method: str, path: str,
                 body: bytes | None, note: str) -> None:
        self.target, self.kind, self.method, self.path = target, kind, method, path
        self.body, self.note = body, note

    def show(self, limit: int = 260) -> str:
        body = b"" if self.body is None else self.body
        text = body[:limit].decode("utf-8", "backslashreplace")
        more = f"... ({len(body):,} bytes)" if len(body) > limit else ""
        return f"{self.method} {self.path} [{self.note}] {text}{more}"


def _raw(obj: Any) -> bytes:
    """JSON bytes as a careless client sends them: ASCII escapes (lone surrogates as
    ``\\udc00``), ``NaN`` / ``Infinity`` literals allowed."""
    return json.dumps(obj, ensure_ascii=True, allow_nan=True).encode("ascii")


class Gen:
    """The seeded request generator (generation never depends on responses)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.np = np.random.default_rng(seed)
        self.next_id = 1_000_000

    # ---- leaves
    def vector(self) -> list[float]:
        v = self.np.standard_normal(DIM)
        return [float(x) for x in v / np.linalg.norm(v)]

    def fresh_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def key(self) -> str:
        r = self.rng.random()
        if r < 0.35:
            return self.rng.choice(SURROGATES)
        if r < 0.8:
            return self.rng.choice(ODD_KEYS)
        return "k" + str(self.rng.randrange(1000))

    def leaf(self) -> Any:
        r = self.rng.random()
        if r < 0.45:
            return self.rng.choice(BIG_NUMBERS)
        if r < 0.7:
            return self.rng.choice(SURROGATES + ["\x00", "nul\x00here", "é😀", "", "x" * 20_000])
        return self.rng.choice([1, -1, 0.25, "plain", True, None, [], {}])

    def nested(self, depth: int, mode: str) -> Any:
        node: Any = self.leaf() if self.rng.random() < 0.5 else "leaf"
        for level in range(depth):
            as_dict = mode == "dict" or (mode == "mixed" and level % 2 == 0)
            node = {"n": node} if as_dict else [node]
        return node

    # ---- payloads
    def payload(self, shape: str) -> Any:
        rng = self.rng
        if shape == "depth":
            depth = rng.choice(DEPTHS) if rng.random() < 0.7 else rng.randrange(0, 201)
            return {"deep": self.nested(depth, rng.choice(["dict", "list", "mixed"]))}
        if shape == "key":
            return {self.key(): self.leaf() for _ in range(rng.randrange(1, 4))}
        if shape == "value":
            return {f"v{i}": self.leaf() for i in range(rng.randrange(1, 6))}
        if shape == "nonobject":
            return rng.choice([[1, 2], "a string", 5, True, 1.5, [{"a": 1}], "\udc00"])
        return {"plain": rng.randrange(100)}

    # ---- requests
    def vector_rows(self, n: int, shape: str) -> list[dict[str, Any]]:
        rows = []
        for _ in range(n):
            row: dict[str, Any] = {"id": self.fresh_id(), "vector": self.vector()}
            if shape != "none":
                row["payload"] = self.payload(shape)
            rows.append(row)
        return rows

    def write_case(self, target: str) -> Case:
        """A vector write (or, for the documents index, a document write)."""
        if target == "pd":
            return self.document_case(target)
        rng = self.rng
        path = f"/indexes/{target}/vectors"
        kind = rng.choice(["depth", "depth", "key", "key", "value", "value", "huge", "dupkeys",
                           "nonobject", "body", "id", "id", "vector", "vector", "mixed-batch",
                           "mixed-batch"])
        if kind in ("depth", "key", "value", "nonobject"):
            rows = self.vector_rows(rng.choice([1, 1, 2, 3]), kind)
            return Case(target, kind, "POST", path, _raw({"vectors": rows}), kind)
        if kind == "huge":  # one string value near the body limit, or just over it
            size = MAX_BODY - rng.choice([400, 2_000, 20_000]) if rng.random() < 0.75 \
                else MAX_BODY + rng.choice([1, 1_000])
            row = self.vector_rows(1, "none")[0]
            row["payload"] = {"big": ""}
            base = len(_raw({"vectors": [row]}))
            char = rng.choice(["x", "é", "\x00"])
            row["payload"]["big"] = char * max(0, (size - base) // (len(_raw(char)) - 2))
            body = _raw({"vectors": [row]})
            return Case(target, kind, "POST", path, body, f"huge string, body {len(body):,} B")
        if kind == "dupkeys":
            i, j = self.fresh_id(), self.fresh_id()
            v = json.dumps(self.vector())
            variants = [
                f'{{"vectors":[{{"id":{i},"vector":{v},"payload":{{"a":1,"a":"two","a":[3]}}}}]}}',
                f'{{"vectors":[{{"id":{i},"id":{j},"vector":{v},"payload":{{"x":1}}}}]}}',
                f'{{"vectors":[{{"id":{i},"vector":[1,2],"vector":{v}}}]}}',
                f'{{"vectors":[],"vectors":[{{"id":{i},"vector":{v}}}]}}',
                f'{{"vectors":[{{"id":{i},"vector":{v},"payload":{{"\\udc00":1,"\\udc00":2}}}}]}}',
            ]
            return Case(target, kind, "POST", path, rng.choice(variants).encode(), "duplicate keys")
        if kind == "body":
            bodies = [b"[]", b'"vectors"', b"null", b"1", b"{}", b'{"vectors":null}',
                      b'{"vectors":{}}', b'{"vectors":[null]}', b'{"vectors":[[1,2]]}',
                      b'{"vectors":[], "extra":1}', b'{"vectors":[{"id":1,"vector":',
                      b"\xff\xfe{}", b"", b'{"vectors":[{"id":1,"vector":[1],"payload":{"k":'
                      + b"[" * 5000 + b"]" * 5000 + b"}}]}",
                      _raw({"vectors": [{"id": self.fresh_id(), "vector": self.vector(),
                                         "extra": "field"}]})]
            return Case(target, kind, "POST", path, rng.choice(bodies), "odd body")
        if kind == "id":
            row = {"id": rng.choice(ODD_IDS), "vector": self.vector(), "payload": {"odd": "id"}}
            return Case(target, kind, "POST", path, _raw({"vectors": [row]}), "odd id")
        if kind == "vector":
            vec: Any = self.vector()
            r = rng.random()
            if r < 0.6:
                vec[rng.randrange(DIM)] = rng.choice(ODD_VECTOR_VALUES)
            elif r < 0.8:
                vec = [rng.choice(ODD_VECTOR_VALUES)] * DIM
            else:
                vec = rng.choice([[], self.vector()[:DIM - 1], self.vector() + [0.0],
                                  [0.1] * 4096, None, "not a vector"])
            row = {"id": self.fresh_id(), "vector": vec}
            return Case(target, kind, "POST", path, _raw({"vectors": [row]}), "odd vector")
        # mixed-batch: up to MAX_BATCH rows, a few of them bad, the rest plain
        n = rng.choice([5, 20, MAX_BATCH, MAX_BATCH + 1])
        rows = self.vector_rows(n, "none")
        for row in rng.sample(rows, k=min(len(rows), rng.randrange(0, 4))):
            what = rng.choice(["depth", "key", "value", "vector"])
            if what == "vector":
                row["vector"] = [rng.choice(ODD_VECTOR_VALUES)] * DIM
            else:
                row["payload"] = self.payload(what)
        return Case(target, "mixed-batch", "POST", path, _raw({"vectors": rows}),
                    f"{n} rows, some bad")

    def document_case(self, target: str) -> Case:
        rng = self.rng
        path = f"/indexes/{target}/documents"
        docs = []
        for _ in range(rng.choice([1, 1, 2, 5])):
            text = rng.choice(["a plain sentence", "lone \udc00 surrogate", "\ud800", "nul\x00",
                               "", "   ", "é😀" * 50, "t" * 50_000, None, 5, ["list"]])
            doc: dict[str, Any] = {"text": text}
            if rng.random() < 0.7:
                doc["id"] = rng.choice(ODD_IDS) if rng.random() < 0.3 else self.fresh_id()
            if rng.random() < 0.8:
                doc["payload"] = self.payload(rng.choice(["depth", "key", "value", "nonobject"]))
            docs.append(doc)
        return Case(target, "document", "POST", path, _raw({"documents": docs}), "documents")

    def search_case(self, target: str) -> Case:
        rng = self.rng
        path = f"/indexes/{target}/search"
        body: dict[str, Any] = {"vectors": [self.vector()]}
        r = rng.random()
        note = "search"
        if r < 0.3:
            body["k"] = rng.choice([0, 1, 2, 10, 1000, 1001, -1, 2 ** 31, 2 ** 63, 2 ** 64,
                                    1e308, "10", True, None, 1.5, float("nan")])
            note = "k extreme"
        elif r < 0.45:
            body["rescore"] = rng.choice([1, 1000, 0, 1001, -5, 2 ** 64, "x", None])
            body["k"] = rng.choice([1, 10, 1000])
            note = "rescore extreme"
        elif r < 0.6:
            body[rng.choice(["filter", "filters", "where"])] = rng.choice([
                {"must": [{"key": "plain", "match": {"value": 1}}]}, {"\udc00": 1},
                self.nested(150, "dict"), [1], "x", None])
            note = "filter field"
        elif r < 0.8:
            q = rng.choice([[[]], [], [self.vector()[:3]], [self.vector(), self.vector()[:5]],
                            [["NaN"] * DIM], [[1e308] * DIM], [[3e38] * DIM], [[1e-45] * DIM],
                            [[0.0] * DIM], [[2 ** 64] * DIM], [[None] * DIM], None])
            body = {"vectors": q} if q is not None else {}
            note = "odd query vectors"
        else:
            body = rng.choice([{"texts": ["\udc00"]}, {"texts": ["q"], "vectors": [self.vector()]},
                               {"vectors": [self.vector()], "payloads": "yes"},
                               {"vectors": [self.vector()] * 50, "k": 1000},
                               {"vectors": [self.vector()], "k": 1000, "payloads": True}])
            note = "odd search body"
        return Case(target, "search", "POST", path, _raw(body), note)

    def cases(self) -> list[Case]:
        out: list[Case] = []
        for target, n in CASES.items():
            for _ in range(n):
                ready = target in READY
                r = self.rng.random()
                if ready and r < 0.22:
                    out.append(self.search_case(target))
                elif ready and r < 0.26:
                    out.append(self.document_case(target))  # vector-only index: a 422
                else:
                    out.append(self.write_case(target))
        for target in READY:  # payload keys the service fills itself, holding other types
            rows = self.vector_rows(4, "none")
            for row, payload in zip(rows, [{"text": 5}, {"text": None}, {"text": ["a"]},
                                           {"source_id": "spoof", "text": {"n": 1}}]):
                row["payload"] = payload
            out.append(Case(target, "reserved-keys", "POST", f"/indexes/{target}/vectors",
                            _raw({"vectors": rows}), "payload keys text / source_id"))
        self.rng.shuffle(out)  # interleave the indexes, as concurrent clients would
        return out


# ---------------------------------------------------------------------- oracle
def _diff(a: Any, b: Any, path: str = "") -> str | None:
    """Where JSON values ``a`` (sent) and ``b`` (read back) differ, keeping types apart
    (1 != 1.0 != True); NaN equals NaN, -0.0 equals 0.0. None when they are the same."""
    def kind(x: Any) -> str:
        return type(x).__name__

    if isinstance(a, float) and isinstance(b, float):
        same = a == b or (math.isnan(a) and math.isnan(b))
    elif type(a) is not type(b):
        same = False
    elif isinstance(a, dict):
        if a.keys() != b.keys():
            return (f"{path or '.'}: keys {sorted(map(repr, a.keys() - b.keys()))[:3]} lost, "
                    f"{sorted(map(repr, b.keys() - a.keys()))[:3]} added")
        return next((d for k in a if (d := _diff(a[k], b[k], f"{path}.{k!r}"[:120]))), None)
    elif isinstance(a, list):
        if len(a) != len(b):
            return f"{path or '.'}: {len(a)} items sent, {len(b)} read back"
        return next((d for i, (x, y) in enumerate(zip(a, b))
                     if (d := _diff(x, y, f"{path}[{i}]"[:120]))), None)
    else:
        same = a == b
    if same:
        return None
    return f"{path or '.'}: sent {kind(a)} {_raw(a)[:80]!r}, read back {kind(b)} {_raw(b)[:80]!r}"


class Ledger:
    """What the service acknowledged, per index: store id -> expected payload (ready indexes)
    or the number of rows (pending indexes)."""

    def __init__(self) -> None:
        self.payloads: dict[str, dict[int, dict[str, Any] | None]] = defaultdict(dict)
        self.pending: dict[str, int] = defaultdict(int)

    def record(self, case: Case, answer: dict[str, Any]) -> str | None:
        """Book an acknowledged write; returns a complaint when the answer contradicts it."""
        if not answer.get("committed"):
            return f"write answered 2xx without committed: true: {answer}"
        parsed = json.loads(case.body)  # what the server's parser sees (duplicate keys: last)
        docs = case.path.endswith("/documents")
        model = DocumentsIn if docs else VectorsIn
        try:
            rows = [r.model_dump() for r in getattr(model.model_validate(parsed),
                                                    "documents" if docs else "vectors")]
        except ValidationError as exc:
            return f"2xx for a body the request model refuses: {str(exc)[:200]}"
        dropped = {r["row"] for r in answer.get("rejected", []) if not r.get("kept")}
        kept = [i for i in range(len(rows)) if i not in dropped]
        if answer.get("accepted") != len(kept):
            return f"accepted {answer.get('accepted')} but {len(kept)} rows not rejected"
        if case.target not in READY:
            self.pending[case.target] += len(kept)
            return None
        ids = doc_ids([rows[i]["id"] for i in kept]).tolist()
        book = self.payloads[case.target]
        warned = {r["row"] for r in answer.get("warnings", []) + answer.get("rejected", [])
                  if r.get("kept")}
        for sid, i in zip(ids, kept):
            sent = {**(rows[i].get("payload") or {}), "source_id": rows[i]["id"]}
            expect = _storable(sent)
            if expect != sent and i not in warned:
                return f"row {i}: a value was made storable without a warning: {_raw(sent)[:160]}"
            book[int(sid)] = None if int(sid) in book else expect  # rewritten: check presence only
        return None


def _storable(value: Any) -> Any:
    """A payload as every store keeps it (the README's rule): NaN / +-Infinity become null,
    integers outside int64 their decimal string."""
    if isinstance(value, dict):
        return {k: _storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_storable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, int) and not isinstance(value, bool) and not (
            -(1 << 63) <= value < (1 << 63)):
        return str(value)
    return value


# ---------------------------------------------------------------------- the run
class Run:
    """One fuzz run: the server (restarted as the phases need), the client, the failures."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.srv: Server | None = None
        self.http = httpx.Client(timeout=120)
        self.failures: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        self.deaths = 0

    def fail(self, target: str, what: str, status: str, detail: str) -> None:
        self.failures[(TARGETS[target][0] if target in TARGETS else target, what, status)].append(
            detail)

    def start(self) -> None:
        self.srv = Server(self.root, "--max-batch", str(MAX_BATCH), "--max-body-bytes",
                          str(MAX_BODY)).start()

    def request(self, method: str, path: str, body: bytes | None = None) -> httpx.Response | str:
        """The response, or why there is none. A body over the limit goes on a connection of
        its own: the server answers 413 before reading it and closes that connection."""
        assert self.srv is not None
        headers = {"content-type": "application/json"}
        try:
            if body is not None and len(body) > MAX_BODY:
                with httpx.Client(timeout=120) as one:
                    return one.request(method, self.srv.url + path, content=body, headers=headers)
            r = self.http.request(method, self.srv.url + path, content=body, headers=headers)
        except httpx.HTTPError as exc:
            self.reconnect()
            return f"{type(exc).__name__}: {exc}"
        if r.status_code >= 500:  # the server closes the connection after an unhandled error:
            self.reconnect()  # the next request must not be blamed for that
        return r

    def reconnect(self) -> None:
        self.http.close()
        self.http = httpx.Client(timeout=120)

    def alive(self, target: str, what: str) -> None:
        """Restart a server that died (at most 5 times), noting who killed it."""
        assert self.srv is not None and self.srv.proc is not None
        if self.srv.proc.poll() is None:
            return
        self.fail(target, what, f"server died rc={self.srv.proc.returncode}",
                  self.srv.output()[-600:])
        self.srv.kill()
        self.deaths += 1
        assert self.deaths <= 5, self.report("the server died 5 times; stopped the fuzz")
        self.start()

    def send(self, case: Case, ledger: Ledger) -> None:
        r = self.request(case.method, case.path, case.body)
        if isinstance(r, str):
            oversize = len(case.body or b"") > MAX_BODY
            if not (oversize and self.srv.proc.poll() is None):  # a refused upload may be cut
                self.fail(case.target, case.kind, "no answer", f"{case.show()} -> {r}")
            self.alive(case.target, case.kind)
            return
        if r.status_code >= 500 or "Traceback" in r.text:
            # after a writer died, every request to its index fails alike: one class for them
            kind = ("any later write: writer stopped" if "writer is stopped" in r.text
                    else "any later read: store closed" if "is not open" in r.text
                    else case.kind)
            self.fail(case.target, kind, str(r.status_code), f"{case.show()} -> {r.text[:300]}")
        elif r.status_code < 300 and case.path.endswith(("/vectors", "/documents")):
            problem = ledger.record(case, r.json())
            if problem:
                self.fail(case.target, case.kind, "2xx inconsistent", f"{case.show()} -> {problem}")

    def check(self, phase: str, ledger: Ledger, gen: Gen) -> None:
        """Every index open, counted as acknowledged, payloads as sent, searches 200."""
        try:
            self._check(phase, ledger, gen)
        finally:
            self.alive(phase, "checks (the server died during them)")

    def _check(self, phase: str, ledger: Ledger, gen: Gen) -> None:
        ready = self.request("GET", "/readyz")
        if isinstance(ready, str) or ready.status_code != 200 or ready.json().get("errors"):
            self.fail(phase, "GET /readyz",
                      "index errors listed" if getattr(ready, "status_code", 0) == 200
                      else str(getattr(ready, "status_code", "no answer")),
                      ready if isinstance(ready, str) else ready.text[:600])
        for name in TARGETS:
            info = self.request("GET", f"/indexes/{name}")
            if isinstance(info, str) or info.status_code != 200:
                self.fail(name, f"{phase}: GET /indexes/{name}",
                          str(getattr(info, "status_code", "no answer")),
                          info if isinstance(info, str) else info.text[:600])
                continue
            got = info.json()
            if name not in READY:
                want = ledger.pending[name]
                if got.get("state") != "pending" or got.get("pending") != want:
                    self.fail(name, f"{phase}: pending count", "wrong",
                              f"state {got.get('state')!r}, pending {got.get('pending')} rows, "
                              f"acknowledged {want}")
                continue
            book = ledger.payloads[name]
            if got.get("state") != "ready" or got.get("count") != len(book):
                self.fail(name, f"{phase}: count", "wrong",
                          f"state {got.get('state')!r}, count {got.get('count')}, acknowledged "
                          f"{len(book)} distinct ids")
            self.read_back(name, phase, book)
            for body in ({"vectors": [gen.vector()], "k": 1000, "payloads": True},
                         {"vectors": [gen.vector()], "k": 5, "payloads": False}):
                r = self.request("POST", f"/indexes/{name}/search", _raw(body))
                if isinstance(r, str) or r.status_code != 200:
                    self.fail(name, f"{phase}: search k={body['k']} payloads={body['payloads']}",
                              str(getattr(r, "status_code", "no answer")),
                              r if isinstance(r, str) else r.text[:300])

    def read_back(self, name: str, phase: str, book: dict[int, dict[str, Any] | None]) -> None:
        ids = sorted(book)
        for start in range(0, len(ids), MAX_BATCH):
            chunk = ids[start:start + MAX_BATCH]
            r = self.request("POST", f"/indexes/{name}/payloads", _raw(chunk))
            if not isinstance(r, str) and r.status_code == 200:
                got = dict(zip(chunk, r.json()["payloads"]))
            else:
                self.fail(name, f"{phase}: POST payloads", str(getattr(r, "status_code", "none")),
                          (r if isinstance(r, str) else r.text[:300]) + f" (ids {chunk[:3]}...)")
                got = {}
                for sid in chunk:  # one by one, to name the rows that cannot be read
                    one = self.request("POST", f"/indexes/{name}/payloads", _raw([sid]))
                    if not isinstance(one, str) and one.status_code == 200:
                        got[sid] = one.json()["payloads"][0]
                    else:
                        self.fail(name, f"{phase}: payload of one row unreadable",
                                  str(getattr(one, "status_code", "none")),
                                  f"sent payload {_raw(book[sid])[:200]!r}")
            for sid, payload in got.items():
                want = book[sid]
                if payload is None:
                    self.fail(name, f"{phase}: acknowledged row missing", "lost",
                              f"store id {sid}, sent payload {_raw(want)[:200]!r}")
                elif want is not None and (where := _diff(want, payload)):
                    self.fail(name, f"{phase}: payload changed on read-back", "changed",
                              f"store id {sid}: {where}")

    def report(self, headline: str) -> str:
        lines = [headline]
        for (store, what, status), details in sorted(self.failures.items()):
            lines.append(f"- [{store}] {what} -> {status}: {len(details)}x, e.g. {details[0]}")
        return "\n".join(lines)


def test_fuzzed_writes_never_5xx_and_every_index_reopens(tmp_path: Path) -> None:
    gen = Gen(SEED)
    cases = gen.cases()
    root = tmp_path / "root"
    root.mkdir()
    run, ledger = Run(root), Ledger()
    run.start()
    try:
        sample = [gen.vector() for _ in range(32)]
        for name, (store, body) in TARGETS.items():
            create = {**body, **({"sample_vectors": sample} if name in READY else {})}
            r = run.http.put(f"{run.srv.url}/indexes/{name}", json=create)
            assert r.status_code == 201, (store, r.status_code, r.text)
        t0 = time.perf_counter()
        for case in cases:
            run.send(case, ledger)
        t1 = time.perf_counter()
        run.check("after the fuzz", ledger, gen)
        rc = run.srv.terminate()
        if rc != 0:
            run.fail("clean stop", "SIGTERM", f"exit {rc}", run.srv.output()[-600:])
        t2 = time.perf_counter()
        run.start()
        run.check("after a clean restart", ledger, gen)
        run.srv.kill()
        run.start()
        run.check("after kill -9 + restart", ledger, gen)
        log.info("fuzz: %d requests in %.1f s; checks + clean stop %.1f s; two restarts with "
                 "checks %.1f s", len(cases), t1 - t0, t2 - t1, time.perf_counter() - t2)
    finally:
        if run.srv is not None:
            run.srv.kill()
        run.http.close()
    sent = len(cases)
    acked = {n: len(b) for n, b in ledger.payloads.items()} | dict(ledger.pending)
    assert not run.failures, run.report(
        f"{sum(map(len, run.failures.values()))} failures in {len(run.failures)} classes over "
        f"{sent} fuzzed requests (seed {SEED}; acknowledged rows per index: {acked}):")
    # the fuzz wrote something worth restarting over
    assert all(acked.get(name, 0) >= 10 for name in READY), acked
