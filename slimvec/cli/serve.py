"""``slimvec serve``: the HTTP service over the index folders under a root."""

from __future__ import annotations

from pathlib import Path

import typer

from slimvec.buildspec import DEFAULTS, default_recipe
from slimvec.cli.checks import int_range, number_range

__all__ = ["serve"]


def serve(
    root: Path = typer.Option(..., "--root", help="Folder whose sub-folders are index folders."),
    host: str = typer.Option("127.0.0.1", help="Address to bind (non-loopback needs an API key)."),
    port: int = typer.Option(8000, callback=int_range(1, 65535), help="Port."),
    api_key_env: str = typer.Option("SLIMVEC_API_KEY", help="Environment variable holding the read-write API key."),
    read_only_key_env: str = typer.Option("SLIMVEC_READ_ONLY_KEY", help="Environment variable holding a read-only key."),
    reports: Path | None = typer.Option(None, "--reports", help="Folder served at /reports/, behind the read key when keys are set; not the root nor an index folder under it [default: ROOT/.reports if it exists]."),
    allow_dir: list[Path] = typer.Option([], "--allow-dir", help="Folder whose files ingest jobs may read (repeatable)."),
    allow_store: list[str] = typer.Option([], "--allow-store", help="Store location outside the index folders that requests may name, e.g. qdrant:http://qdrant:6333 (gets $QDRANT_API_KEY) or qdrant-edge:/srv/stores (repeatable; none: every index keeps its store in its folder)."),
    fit_after: int = typer.Option(1000, help="Documents a new index collects before its reducer is fitted."),
    max_body_bytes: int = typer.Option(32 * 1024 * 1024, callback=int_range(1), help="Largest request body (413 above)."),
    max_batch: int = typer.Option(4096, callback=int_range(1), help="Most documents / vectors / queries per request (413 above)."),
    queue_size: int = typer.Option(64, callback=int_range(1), help="Write requests in flight before 429 + Retry-After."),
    batch_wait_ms: float = typer.Option(2.0, callback=number_range(0), help="Dynamic batching wait for query texts (0: off)."),
    device: str = typer.Option("auto", "--device", help="Torch device of the encoders: auto (cuda when available, else cpu), cpu, cuda, cuda:1, ..."),
    encode_batch: int | None = typer.Option(None, "--encode-batch", callback=int_range(1), help="Texts per forward pass of a document encoder [default: 32 on a CPU, 256 on CUDA]."),
    cors_origin: list[str] = typer.Option([], "--cors-origin", help="Origin whose browser pages may call the service, e.g. https://app.example (repeatable; none: no CORS headers; never '*')."),
    query_timeout: float = typer.Option(30.0, "--query-timeout", envvar="SLIMVEC_QUERY_TIMEOUT", callback=number_range(0, low_open=True), help="Seconds a Qdrant query may run before its work stops and it is answered 408."),
    log_level: str = typer.Option("warning", help="uvicorn log level."),
    recipe: str | None = typer.Option(None, "--recipe", help=f"Recipe (string or tuned.json) of new indexes whose request names no recipe, reducer, store or keep_full [default: {default_recipe()}, as slimvec ingest]; 'none': {DEFAULTS['reducer']} on {DEFAULTS['store']} without rescoring."),
) -> None:
    """Serve every index under --root over HTTP (OpenAPI docs at /docs)."""
    from slimvec.extras import require_extra

    require_extra("serve", "slimvec serve")  # one line naming the extra, not a traceback
    from slimvec.recipe import DEFAULT_RECIPE, resolve_recipe
    from slimvec.service.config import REPORTS_DIR, ServiceConfig
    from slimvec.service.server import serve as run

    default_recipe: str | None = DEFAULT_RECIPE
    if recipe is not None:
        default_recipe = None if recipe.strip().lower() == "none" else str(resolve_recipe(recipe))

    if reports is None and (root / REPORTS_DIR).is_dir():
        reports = root / REPORTS_DIR
    config = ServiceConfig(
        root=root, host=host, port=port, api_key=ServiceConfig.key_from_env(api_key_env),
        read_only_key=ServiceConfig.key_from_env(read_only_key_env), max_body_bytes=max_body_bytes,
        max_batch=max_batch, queue_size=queue_size, batch_wait_ms=batch_wait_ms,
        fit_after=fit_after, allow_dirs=list(allow_dir), allow_stores=list(allow_store), reports=reports, recipe=default_recipe,
        cors_origins=list(cors_origin), device=device, encode_batch=encode_batch,
        query_timeout=query_timeout)
    run(config, log_level=log_level)
