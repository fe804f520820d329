"""Settings of one ``slimvec serve`` process."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path

from slimvec.errors import ConfigError
from slimvec.recipe import DEFAULT_RECIPE, resolve_recipe

__all__ = ["ServiceConfig", "is_loopback", "check_origin", "REPORTS_DIR"]

#: bench reports under the root: a hidden folder, so no index can be named so (index names start
#: with a letter or digit) and the registry never opens it as an index
REPORTS_DIR = ".reports"


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_origin(origin: str) -> str:
    """``origin`` as a browser sends it in its ``Origin`` header (``scheme://host[:port]``; one
    trailing ``/`` dropped, lower-cased), or a :class:`ConfigError` saying what an origin looks
    like."""
    from urllib.parse import urlsplit

    text = origin[:-1] if origin.endswith("/") and not origin.endswith("//") else origin
    try:
        parts = urlsplit(text)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        parts, port_ok = None, False
    if (parts is None or not port_ok or text != text.strip()
            or parts.scheme not in ("http", "https") or not parts.hostname
            or "@" in parts.netloc or parts.path or parts.query
            or parts.fragment or "*" in text or any(c.isspace() for c in text)):
        raise ConfigError(
            f"--cors-origin {origin!r} is not an origin: expected scheme://host[:port] as a "
            "browser sends it, e.g. https://app.example or http://localhost:5173 (no path, no "
            "'*': name each site whose pages may call the service, one --cors-origin each).")
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"  # browsers send it lower-case


@dataclass
class ServiceConfig:
    """What to serve and how.

    Parameters
    ----------
    root : Path
        Folder whose sub-folders are index folders (made by the CLI or the service).
    host, port : str, int
        Bind address. A non-loopback host needs ``api_key``.
    api_key, read_only_key : str or None
        Keys (from the environment, never logged). With a key every route but ``/healthz`` and
        ``/readyz`` needs it; the read-only key may search and read but not write.
    max_body_bytes : int
        Largest request body (413 above).
    max_batch : int
        Most documents / vectors / queries in one request (413 above).
    queue_size : int
        Write requests waiting for an index writer, over all indexes (429 above).
    batch_wait_ms : float
        Dynamic batching: how long a text query waits for others to encode with (0: off).
    max_query_batch : int
        Most texts encoded together.
    fit_after : int
        Default number of documents a new index collects before its reducer is fitted.
    device : str
        Torch device of the encoders (``auto``: cuda when available, else cpu).
    encode_batch : int or None
        Texts per forward pass of a document encoder; None: 32 on a CPU, 256 on CUDA
        (:func:`slimvec.encoder.ingest_encode_batch`).
    allow_dirs : list of Path
        Folders whose files a job may ingest (none: jobs are refused).
    allow_stores : list of str
        Store locations outside the index folders that requests may name (``--allow-store``,
        e.g. ``qdrant:http://qdrant:6333``); see :mod:`slimvec.service.indexes.stores`. The store of the
        default ``recipe`` is the operator's choice and allowed too.
    reports : Path or None
        Folder served at ``/reports/`` (bench reports; behind the read key when keys are set).
        It may not be the root nor an index folder under it (``ROOT/.reports`` is the default).
    recipe : str or None
        Recipe of new indexes whose request names none of recipe, reducer, store, keep_full
        (default :data:`slimvec.recipe.DEFAULT_RECIPE`, as ``slimvec ingest``); None: the default
        reducer and store (:data:`slimvec.buildspec.DEFAULTS`) without rescoring.
    query_timeout : float
        Seconds a Qdrant query request may run (``--query-timeout``, env
        ``SLIMVEC_QUERY_TIMEOUT``; a request's own ``timeout`` parameter may ask for less): its
        work stops at the next check after that and it is answered 408.
    cors_origins : list of str
        Origins (``scheme://host[:port]``) whose browser pages may call the service
        (``--cors-origin``); none: no CORS headers. Never ``*``, never credentials (keys travel
        in headers).
    """

    root: Path
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    read_only_key: str | None = None
    max_body_bytes: int = 32 * 1024 * 1024
    max_batch: int = 4096
    queue_size: int = 64
    batch_wait_ms: float = 2.0
    max_query_batch: int = 64
    fit_after: int = 1000
    device: str = "auto"
    encode_batch: int | None = None
    allow_dirs: list[Path] = field(default_factory=list)
    allow_stores: list[str] = field(default_factory=list)
    reports: Path | None = None
    job_checkpoint_seconds: float = 5.0
    recipe: str | None = DEFAULT_RECIPE
    cors_origins: list[str] = field(default_factory=list)
    query_timeout: float = 30.0

    def check(self) -> None:
        """Refuse unsafe or impossible settings with a message saying what to do."""
        if self.recipe is not None:
            self.recipe = str(resolve_recipe(self.recipe))  # a bad --recipe fails at start-up
        if not self.root.is_dir():
            raise ConfigError(f"--root {self.root} is not a folder. Create it first (mkdir -p).")
        if not self.api_key and not is_loopback(self.host):
            raise ConfigError(
                f"Refusing to listen on {self.host} without an API key: anyone on the network could "
                "write and delete indexes. Set the key in the environment variable named by "
                "--api-key-env (default SLIMVEC_API_KEY), or bind to 127.0.0.1."
            )
        if self.reports is not None:
            self._check_reports()
        if self.read_only_key and not self.api_key:
            raise ConfigError("A read-only key needs a read-write key too (--api-key-env).")
        from slimvec.service.indexes.stores import check_allow_entry

        self.allow_stores = [check_allow_entry(s) for s in self.allow_stores]
        self.cors_origins = [check_origin(o) for o in self.cors_origins]
        if not float(self.query_timeout) > 0:
            raise ConfigError(f"query_timeout (--query-timeout, SLIMVEC_QUERY_TIMEOUT) must be "
                              f"a number of seconds above 0, got {self.query_timeout!r}.")
        for name in ("max_body_bytes", "max_batch", "queue_size", "max_query_batch", "fit_after"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)!r}.")

    def _check_reports(self) -> None:
        reports, root = Path(self.reports).resolve(), self.root.resolve()
        if root.is_relative_to(reports) or (reports.is_relative_to(root) and
                                            not reports.is_relative_to(root / REPORTS_DIR)):
            raise ConfigError(
                f"--reports {self.reports} would publish index data at /reports/: it is the root, "
                f"holds it, or lies in the index namespace under it. Put bench reports in "
                f"{self.root / REPORTS_DIR} (served by default) or a folder outside --root.")

    def allowed_stores(self) -> list[str]:
        """``allow_stores`` plus the store of the default recipe (chosen by the operator)."""
        out = list(self.allow_stores)
        if self.recipe is not None:
            from slimvec.recipe import resolve_recipe
            from slimvec.service.indexes.stores import external_location

            store = resolve_recipe(self.recipe).store
            if store and external_location(store) is not None:
                out.append(store)
        return out

    @staticmethod
    def key_from_env(var: str | None) -> str | None:
        """The key held by environment variable ``var`` (``None`` when unset or empty)."""
        return (os.environ.get(var) or None) if var else None
