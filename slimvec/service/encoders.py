"""The service's encoders: one per encoder spec, loaded once, each with its query batcher."""

from __future__ import annotations

import threading
from typing import Any, Callable

from slimvec.service.batching import QueryBatcher

__all__ = ["Encoders"]


class Encoders:
    """One encoder (and one query batcher) per encoder spec, loaded once."""

    def __init__(self, wait_ms: float, max_batch: int,
                 on_batch: Callable[[int], None] | None = None) -> None:
        self.wait_ms, self.max_batch, self.on_batch = wait_ms, max_batch, on_batch
        self._enc: dict[str, Any] = {}
        self._batchers: dict[str, QueryBatcher] = {}
        self._lock = threading.Lock()

    def get(self, spec: str) -> Any:
        """The loaded encoder of ``spec``."""
        with self._lock:
            if spec not in self._enc:
                from slimvec.indexer.encoder import INGEST_ENCODE_BATCH, Encoder

                # the CLI ingest's pass size: 32 encoded 3-4 % faster than 64 on 256-document
                # requests (2 requests at once, one torch thread each, STS-B sentences)
                self._enc[spec] = Encoder(spec, batch_size=INGEST_ENCODE_BATCH)
                self._batchers[spec] = QueryBatcher(self._enc[spec].encode, self.wait_ms,
                                                    self.max_batch, self.on_batch)
            return self._enc[spec]

    def batcher(self, spec: str) -> QueryBatcher:
        """The query batcher of ``spec``."""
        self.get(spec)
        return self._batchers[spec]

    def close(self) -> None:
        """Stop the batchers."""
        for b in self._batchers.values():
            b.close()
