"""What the routes share: the config, the registry of indexes, the jobs, the write slots, the
metrics and the ready flag. One per app (``app.state.slimvec``); every router takes it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from slimvec.errors import ConfigError, SlimvecError
from slimvec.service.config import ServiceConfig
from slimvec.service.indexes.encoders import Encoders
from slimvec.service.indexes.jobs import Jobs
from slimvec.service.indexes.registry import Registry
from slimvec.service.indexes.served import ServedIndex
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
        #: run at start-up once the indexes are open, before any request (the Qdrant
        #: collections' journal recovery)
        self.on_start: list[Callable[[], None]] = []
        #: the Qdrant API's collections (set by its router): a native delete, snapshot or
        #: restore of a collection's home takes the whole collection
        self.collections: Any = None
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

    def writable(self, name: str) -> ServedIndex:
        """The served index ``name`` for a native write (a :class:`ConfigError` when only the
        Qdrant API may write it: :func:`~slimvec.service.qdrant_api.journal.native_write_refusal`)."""
        from slimvec.service.qdrant_api.journal import native_write_refusal
        from slimvec.service.qdrant_api.translate import QDRANT_DIR

        served = self.registry.get(name)
        why = native_write_refusal(self.config.root / QDRANT_DIR, name)
        if why is not None:
            raise ConfigError(why)
        return served

    def delete_index(self, name: str) -> None:
        """Delete served index ``name``: a Qdrant collection's home deletes the collection
        whole; the index of one of its named vectors is refused (delete the collection)."""
        if "~" in name:
            self.writable(name)
        if self.collections is None or not self.collections.delete(name):
            self.registry.delete(name)

    def startup(self) -> None:
        """Open the indexes (those a job holds are left to it), resume the jobs."""
        skip = self.jobs.pending_names()
        self.registry.open_all(skip)
        for step in self.on_start:
            step()
        self.jobs.resume_all()
        self.ready.set()
        log.info("ready: %d index(es) under %s", len(self.registry.names()), self.config.root)

    def shutdown(self) -> None:
        """Stop the jobs, commit and close every index, stop the batchers."""
        self.jobs.stop()
        self.registry.close_all()
        self.encoders.close()
