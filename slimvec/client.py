"""A small Python client of ``slimvec serve``, shaped like :func:`slimvec.open`.

>>> import slimvec
>>> c = slimvec.Client("http://127.0.0.1:8000", api_key="...")     # doctest: +SKIP
>>> idx = c.index("docs")                                           # doctest: +SKIP
>>> res = idx.search("a man plays a guitar", k=10)   # SearchResult(ids, scores), as slimvec.open
>>> res.source_ids[0]                                 # your ids of the hits (one /payloads call)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from slimvec.connectors.base import SearchResult
from slimvec.errors import ConfigError, IndexBusyError, SlimvecError

__all__ = ["Client", "RemoteIndex", "ServiceError"]


class ServiceError(SlimvecError):
    """The service answered with an error; ``status`` is the HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(f"HTTP {status}: {message}")


class Client:
    """Client of a ``slimvec serve`` server.

    Parameters
    ----------
    url : str
        Base URL, e.g. ``http://127.0.0.1:8000``.
    api_key : str, optional
        Sent as ``Authorization: Bearer``.
    timeout : float
        Seconds per request.
    """

    def __init__(self, url: str, api_key: str | None = None, timeout: float = 60.0) -> None:
        from slimvec.extras import require

        httpx = require("serve", "httpx", "slimvec.Client")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One request; errors raise :class:`ServiceError` (409: :class:`IndexBusyError`)."""
        r = self._http.request(method, path, **kwargs)
        _raise_for(r)
        return r.json() if r.content else None

    def health(self) -> dict[str, Any]:
        """``{"status": "ok"}`` while the server process answers (``GET /healthz``)."""
        return self.request("GET", "/healthz")

    def ready(self) -> dict[str, Any]:
        """Readiness (``GET /readyz``): ``{"status": "starting"}`` until the indexes are open
        (the server's 503, returned here rather than raised, so it can be polled), then
        ``{"status": "ready", "counts": {...}}`` (with a key also the index names and errors)."""
        r = self._http.request("GET", "/readyz")
        if r.status_code != 503:
            _raise_for(r)
        return r.json()

    def metrics(self) -> str:
        """The Prometheus metrics text (``GET /metrics``)."""
        r = self._http.request("GET", "/metrics")
        _raise_for(r)
        return r.text

    def indexes(self) -> list[dict[str, Any]]:
        """Info of every served index."""
        return self.request("GET", "/indexes")["indexes"]

    def index(self, name: str) -> RemoteIndex:
        """A handle on index ``name`` (no request is made)."""
        return RemoteIndex(self, name)

    def create(self, name: str, **spec: Any) -> RemoteIndex:
        """Create index ``name`` (``recipe``, ``reducer``, ``store``, ``encoder``, ``keep_full``,
        ``fit_after``, ``sample_vectors`` / ``sample_texts``, ``payload_index``: payload fields to
        index, ``["lang:keyword", "year:integer"]``)."""
        if "sample_vectors" in spec and spec["sample_vectors"] is not None:
            spec["sample_vectors"] = np.asarray(spec["sample_vectors"], np.float32).tolist()
        self.request("PUT", f"/indexes/{name}", json=spec)
        return self.index(name)

    def delete(self, name: str) -> None:
        """Delete index ``name``."""
        self.request("DELETE", f"/indexes/{name}")

    def snapshot(self, name: str, file: str | None = None) -> dict[str, Any]:
        """Snapshot index ``name`` on the server (``POST /indexes/NAME/snapshot``); returns the
        snapshot's file name, count, size and SHA-256."""
        return self.request("POST", f"/indexes/{name}/snapshot", json={"file": file})

    def snapshots(self) -> list[dict[str, Any]]:
        """Snapshot files on the server, newest first."""
        return self.request("GET", "/snapshots")["snapshots"]

    def restore(self, name: str, snapshot: str, force: bool = False,
                trust_unsigned: bool = False) -> dict[str, Any]:
        """Restore index ``name`` from a server snapshot file (by name, never a path); returns
        the restored index's info. ``trust_unsigned`` accepts a snapshot not signed with the
        server's snapshot key."""
        return self.request("POST", f"/indexes/{name}/restore",
                            json={"snapshot": snapshot, "force": force,
                                  "trust_unsigned": trust_unsigned})

    def rebuild(self, name: str, recipe: str, sample: int = 10_000) -> dict[str, Any]:
        """Start a job rebuilding index ``name`` with ``recipe`` from its kept full vectors (no
        text re-encoded; searches answer from the old index until the swap). Poll it with
        :meth:`job`: ``phase``, ``rows``, then ``state`` ``done`` and the ``summary``."""
        return self.request("POST", f"/indexes/{name}/rebuild",
                            json={"recipe": recipe, "sample": sample})

    def job(self, job_id: str) -> dict[str, Any]:
        """State of a job."""
        return self.request("GET", f"/jobs/{job_id}")

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class RemoteIndex:
    """An index on the server, with the search / payloads / info of :class:`slimvec.open`'s."""

    def __init__(self, client: Client, name: str) -> None:
        self.client, self.name = client, name

    def search(self, queries: str | Sequence[str] | np.ndarray, k: int = 10,
               rescore: int | None = None, filter: dict[str, Any] | None = None) -> SearchResult:
        """Same arguments and result shape as ``slimvec.open(DIR).search``; ``filter`` is
        Qdrant's filter JSON subset (``slimvec.filters``)."""
        body = _queries(queries)
        body.update(k=k, rescore=rescore, payloads=False, filter=filter)
        out = self.client.request("POST", f"/indexes/{self.name}/search", json=body)
        scores = np.array([[(-np.inf if s is None else s) for s in row] for row in out["scores"]],
                          dtype=np.float32)
        res = SearchResult(np.asarray(out["ids"], dtype=np.int64).reshape(len(scores), -1),
                           scores.reshape(len(scores), -1))
        res.lookup = self._user_ids  # SearchResult.source_ids: one /payloads call when asked
        return res

    def _user_ids(self, ids: list[int]) -> list[Any]:
        from slimvec.ids import user_id

        return [user_id(i, p) for i, p in zip(ids, self.payloads(ids))]

    def hits(self, queries: str | Sequence[str] | np.ndarray, k: int = 10,
             rescore: int | None = None, filter: dict[str, Any] | None = None
             ) -> list[list[dict[str, Any]]]:
        """Per query, the hits: id (yours, as given at ingest), store_id, score, text and payload."""
        body = _queries(queries)
        body.update(k=k, rescore=rescore, payloads=True, filter=filter)
        return self.client.request("POST", f"/indexes/{self.name}/search", json=body)["hits"]

    def payloads(self, ids: Sequence[int]) -> list[dict[str, Any] | None]:
        """Stored payloads of store ids."""
        return self.client.request("POST", f"/indexes/{self.name}/payloads",
                                   json=[int(i) for i in ids])["payloads"]

    def delete(self, ids: Sequence[int | str] | None = None,
               filter: dict[str, Any] | None = None) -> int:
        """Delete documents by your ids or by filter (exactly one); returns how many were
        removed, once the deletion is committed."""
        return self.client.request("POST", f"/indexes/{self.name}/delete",
                                   json=_select(ids, filter))["deleted"]

    def set_payload(self, fields: dict[str, Any], ids: Sequence[int | str] | None = None,
                    filter: dict[str, Any] | None = None, overwrite: bool = False) -> int:
        """Set payload ``fields`` (merged; ``overwrite``: the whole payload replaced) of
        documents by your ids or by filter, without re-encoding; returns how many changed."""
        return self.client.request("POST", f"/indexes/{self.name}/payload",
                                   json={**_select(ids, filter), "fields": fields,
                                         "overwrite": overwrite})["updated"]

    def delete_payload_keys(self, keys: Sequence[str], ids: Sequence[int | str] | None = None,
                            filter: dict[str, Any] | None = None) -> int:
        """Remove payload ``keys`` of documents by your ids or by filter."""
        return self.client.request("POST", f"/indexes/{self.name}/payload/delete",
                                   json={**_select(ids, filter), "keys": list(keys)})["updated"]

    def get(self, ids: Sequence[int | str]) -> list[dict[str, Any] | None]:
        """Documents ``{id, store_id, payload}`` of your ids (None where unknown)."""
        return self.client.request("POST", f"/indexes/{self.name}/get",
                                   json={"ids": list(ids)})["documents"]

    def scroll(self, limit: int = 100, offset: int | None = None,
               filter: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], int | None]:
        """One page of documents and the offset of the next (None at the end)."""
        out = self.client.request("POST", f"/indexes/{self.name}/scroll",
                                  json={"limit": limit, "offset": offset, "filter": filter})
        return out["documents"], out["next_offset"]

    def count(self, filter: dict[str, Any] | None = None) -> int:
        """Documents (matching ``filter``), exact."""
        return self.client.request("POST", f"/indexes/{self.name}/count",
                                   json={"filter": filter})["count"]

    def info(self) -> dict[str, Any]:
        """The fields of ``slimvec info --json``."""
        return self.client.request("GET", f"/indexes/{self.name}")

    def add(self, documents: Sequence[dict[str, Any] | str], wait: bool = True) -> dict[str, Any]:
        """Add documents (dicts ``{id?, text, payload?}`` or plain texts)."""
        docs = [{"text": d} if isinstance(d, str) else dict(d) for d in documents]
        return self.client.request("POST", f"/indexes/{self.name}/documents",
                                   params={"wait": str(wait).lower()}, json={"documents": docs})

    def add_vectors(self, ids: Sequence[int | str], vectors: np.ndarray,
                    payloads: Sequence[dict[str, Any]] | None = None,
                    wait: bool = True) -> dict[str, Any]:
        """Add full vectors with ids."""
        vecs = np.asarray(vectors, dtype=np.float32).tolist()
        items = [{"id": (int(i) if isinstance(i, (int, np.integer)) else i), "vector": v,
                  **({"payload": payloads[j]} if payloads else {})}
                 for j, (i, v) in enumerate(zip(ids, vecs))]
        return self.client.request("POST", f"/indexes/{self.name}/vectors",
                                   params={"wait": str(wait).lower()}, json={"vectors": items})

    def fit(self) -> dict[str, Any]:
        """Fit the reducer now on the documents collected so far (an index created without a
        sample is otherwise fitted once ``fit_after`` documents arrived); returns its info."""
        return self.client.request("POST", f"/indexes/{self.name}/fit")

    def calibrate(self, queries: str | Sequence[str] | np.ndarray) -> dict[str, Any]:
        """Re-measure a ``rescore=auto`` index's depth on real queries (kept for its later
        calibrations), as ``slimvec calibrate`` does."""
        return self.client.request("POST", f"/indexes/{self.name}/calibrate",
                                   json=_queries(queries))

    def ingest(self, path: str, **options: Any) -> dict[str, Any]:
        """Start a background job ingesting a file on the server (under ``--allow-dir``);
        ``options`` as ``POST /indexes/NAME/jobs`` takes them. Poll it with ``Client.job``."""
        return self.client.request("POST", f"/indexes/{self.name}/jobs",
                                   json={"path": path, **options})

    def sync(self, path: str, force: bool = False, **options: Any) -> dict[str, Any]:
        """Start a background job making this index equal to a file on the server (under
        ``--allow-dir``), as ``slimvec ingest PATH --sync`` does: unchanged documents are
        skipped, changed ones re-encoded, documents whose id left the file deleted.

        Parameters
        ----------
        path : str
            The file on the server.
        force : bool
            Delete even when the file had unreadable rows or no document.
        **options
            As ``POST /indexes/NAME/jobs`` takes them (``text_column``, ``id_column``...).

        Returns
        -------
        dict
            The job; poll it with ``Client.job``: once done, its ``summary`` says added /
            updated / unchanged / deleted.
        """
        return self.client.request("POST", f"/indexes/{self.name}/sync",
                                   json={"path": path, "force": force, **options})

    def reduce(self, queries: str | Sequence[str] | np.ndarray) -> np.ndarray:
        """Reduced vectors of texts or full vectors."""
        out = self.client.request("POST", f"/indexes/{self.name}/reduce", json=_queries(queries))
        return np.asarray(out["vectors"], dtype=np.float32)


def _select(ids: Sequence[int | str] | None, filter: dict[str, Any] | None) -> dict[str, Any]:
    if (ids is None) == (filter is None):
        raise ConfigError("Pass exactly one of ids (your document ids) or filter.")
    if ids is not None:
        return {"ids": [int(i) if isinstance(i, (int, np.integer)) else i for i in ids]}
    return {"filter": filter}


def _queries(queries: str | Sequence[str] | np.ndarray) -> dict[str, Any]:
    if isinstance(queries, str):
        return {"texts": [queries]}
    if isinstance(queries, np.ndarray) or (len(queries) and not isinstance(queries[0], str)):
        arr = np.asarray(queries, dtype=np.float32)
        return {"vectors": (arr[None, :] if arr.ndim == 1 else arr).tolist()}
    return {"texts": list(queries)}


def _raise_for(r: Any) -> None:
    """Raise the error an HTTP error response stands for: :class:`ConfigError` (422),
    :class:`IndexBusyError` (409), else :class:`ServiceError` with the status."""
    if r.status_code < 400:
        return
    try:
        msg = r.json().get("detail", r.text)
    except ValueError:
        msg = r.text
    if r.status_code == 422:
        raise ConfigError(str(msg))
    if r.status_code == 409:
        raise IndexBusyError(str(msg))
    raise ServiceError(r.status_code, str(msg))
