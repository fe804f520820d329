"""Run the app on uvicorn: SIGTERM / SIGINT stop accepting, finish in-flight requests (reads
stop at their next deadline check, :data:`~slimvec.service.limits.SHUTDOWN`; the rest get
:data:`GRACE_SECONDS`), commit every index (state ``done``), and exit 0."""

from __future__ import annotations

import logging
import signal
from types import FrameType

from slimvec.service.config import ServiceConfig

__all__ = ["serve"]

log = logging.getLogger(__name__)

#: how long a stopping server waits for its in-flight requests before it cancels them (issue
#: 48 F5: a busy server stops within seconds; reads see the stop at once)
GRACE_SECONDS = 5


def serve(config: ServiceConfig, log_level: str = "warning") -> None:
    """Check ``config``, build the app and serve until a stop signal."""
    import uvicorn

    from slimvec.service.app import create_app

    config.check()
    app = create_app(config)
    uv = uvicorn.Config(app, host=config.host, port=config.port, log_level=log_level,
                        timeout_graceful_shutdown=GRACE_SECONDS, access_log=False, lifespan="on")
    _Server(uv).run()


def _server_class():  # noqa: ANN202 - uvicorn is imported lazily
    import uvicorn

    class GracefulServer(uvicorn.Server):
        """uvicorn re-raises a captured SIGTERM after its graceful shutdown (exit -15); a stopped
        service whose indexes are committed exits 0 instead."""

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            from slimvec.service.limits import SHUTDOWN

            SHUTDOWN.set()  # every request deadline is now past: long reads stop
            super().handle_exit(sig, frame)
            if sig == signal.SIGTERM and sig in self._captured_signals:
                self._captured_signals.remove(sig)

    return GracefulServer


def _Server(config):  # noqa: N802, ANN001, ANN202
    return _server_class()(config)
