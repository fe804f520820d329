"""Run the app on uvicorn: SIGTERM / SIGINT stop accepting, finish in-flight requests, commit
every index (state ``done``), and exit 0."""

from __future__ import annotations

import logging

from slimvec.service.config import ServiceConfig

__all__ = ["serve"]

log = logging.getLogger(__name__)


def serve(config: ServiceConfig, log_level: str = "warning") -> None:
    """Check ``config``, build the app and serve until a stop signal."""
    import uvicorn

    from slimvec.service.app import create_app

    config.check()
    app = create_app(config)
    uv = uvicorn.Config(app, host=config.host, port=config.port, log_level=log_level,
                        timeout_graceful_shutdown=30, access_log=False, lifespan="on")
    uvicorn.Server(uv).run()
