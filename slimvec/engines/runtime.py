"""Import and start Ray: a clear message without the extra; a local runtime advertised on 127.0.0.1.

Ray 2.60 still binds its gRPC servers to all interfaces whatever address it advertises (see
``docs/scale-out.md``, "Ray on a shared machine"); its default token authentication stays on.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from slimvec.errors import ConfigError

__all__ = ["require_ray", "start_ray"]

log = logging.getLogger(__name__)


def require_ray() -> Any:
    """Return the ``ray`` module with Ray Data, or raise :class:`MissingDependencyError`."""
    from slimvec.extras import require

    feature = "--engine ray (drop it to ingest in one process)"
    ray = require("ray", "ray", feature)
    require("ray", "ray.data", feature)
    return ray


def start_ray(address: str | None = None, num_cpus: int | None = None) -> bool:
    """Connect to a Ray cluster (``auto`` or ``HOST:PORT``) or start a local runtime.

    Parameters
    ----------
    address : str, optional
        ``None``: start a local runtime advertised as 127.0.0.1 (its servers still listen on
        all interfaces) without the dashboard, limited to ``num_cpus``. ``auto`` or ``HOST:PORT``: connect to a running cluster.
    num_cpus : int, optional
        CPUs of the local runtime (default: ``os.cpu_count()``).

    Returns
    -------
    bool
        True when this call started (and so should shut down) the runtime.
    """
    ray = require_ray()
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "configure_logging": False}
    if address:
        if address != "auto" and ":" not in address:
            raise ConfigError(f"--ray-address {address!r}: expected 'auto' or HOST:PORT of a running "
                              "Ray head (ray start --head prints it).")
        log.info("connecting to the Ray cluster at %s", address)
        ray.init(address=address, **kwargs)
    else:
        cpus = int(num_cpus or os.cpu_count() or 1)
        log.info("starting a local Ray runtime with %d CPU(s), advertised as 127.0.0.1", cpus)
        ray.init(num_cpus=cpus, _node_ip_address="127.0.0.1", **kwargs)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    return True
