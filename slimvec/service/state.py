"""What the routes share: the config, the registry of indexes, the jobs, the write slots, the
metrics and the ready flag. One per app (``app.state.slimvec``); every router takes it."""

from __future__ import annotations

import logging
import threading
import time

from slimvec.errors import SlimvecError
from slimvec.service.config import ServiceConfig
from slimvec.service.indexes.encoders import Encoders
from slimvec.service.indexes.jobs import Jobs
from slimvec.service.indexes.registry import Registry
from slimvec.service.limits import WriteSlots
from slimvec.service.metrics import Metrics

__all__ = ["ServiceState"]

log = logging.getLogger(__name__)


class ServiceState:
    """What the routes share; :meth:`startup` / :meth:`shutdown` run in the app's lifespan."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.metrics = Metrics()
        self.encoders = Encoders(config.batch_wait_ms, config.max_query_batch,
                                 self.metrics.query_batch.observe, config.device,
                                 config.encode_batch)
        self.registry = Registry(config.root, self.encoders, self.metrics.on_commit,
                                 config.allowed_stores())
        self.jobs = Jobs(config.root, self.registry, config.allow_dirs,
                         config.job_checkpoint_seconds)
        self.slots = WriteSlots(config.queue_size)
        self.ready = threading.Event()
        self.started = time.time()
        self.metrics.track_sizes(self._sizes)

    def _sizes(self) -> dict[str, int]:
        out = {}
        for name in self.registry.names():
            try:
                out[name] = int(self.registry.get(name).info().get("count", 0))
            except SlimvecError:
                continue
        return out

    def startup(self) -> None:
        """Open the indexes (those a job holds are left to it), resume the jobs."""
        skip = self.jobs.pending_names()
        self.registry.open_all(skip)
        self.jobs.resume_all()
        self.ready.set()
        log.info("ready: %d index(es) under %s", len(self.registry.names()), self.config.root)

    def shutdown(self) -> None:
        """Stop the jobs, commit and close every index, stop the batchers."""
        self.jobs.stop()
        self.registry.close_all()
        self.encoders.close()
