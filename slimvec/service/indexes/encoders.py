"""The service's encoders: one per encoder spec and encoding, loaded once, each with its query batcher."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from slimvec.buildspec import BuildSpec
from slimvec.service.indexes.batching import QueryBatcher

__all__ = ["Encoders"]


class Encoders:
    """One encoder (and one query batcher) per encoder spec and encoding, loaded once."""

    def __init__(self, wait_ms: float, max_batch: int,
                 on_batch: Callable[[int], None] | None = None, device: str = "auto",
                 encode_batch: int | None = None) -> None:
        self.wait_ms, self.max_batch, self.on_batch = wait_ms, max_batch, on_batch
        self.device, self.encode_batch = device, encode_batch
        self._enc: dict[Any, Any] = {}
        self._batchers: dict[Any, QueryBatcher] = {}
        self._lock = threading.Lock()

    def get(self, spec: BuildSpec) -> Any:
        """The loaded encoder of an index's ``spec`` (:meth:`BuildSpec.load_encoder`)."""
        key = _key(spec)
        with self._lock:
            if key not in self._enc:
                from slimvec.encoder import ingest_encode_batch

                # the CLI ingest's pass size: on a CPU 32 encoded 3-4 % faster than 64 on
                # 256-document requests (2 requests at once, one torch thread each, STS-B)
                self._enc[key] = spec.load_encoder(self.device, self.encode_batch
                                                   or ingest_encode_batch(self.device))
                self._batchers[key] = QueryBatcher(self._enc[key].encode_queries, self.wait_ms,
                                                   self.max_batch, self.on_batch)
            return self._enc[key]

    def batcher(self, spec: BuildSpec) -> QueryBatcher:
        """The query batcher of ``spec``."""
        self.get(spec)
        return self._batchers[_key(spec)]

    def close(self) -> None:
        """Stop the batchers."""
        for b in self._batchers.values():
            b.close()


def _key(spec: BuildSpec) -> BuildSpec:
    return BuildSpec(encoder=spec.encoder, **spec.encoding)  # what the encoder is (hashable)
