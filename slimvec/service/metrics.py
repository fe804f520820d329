"""Prometheus metrics of one service process (its own registry, served at ``/metrics``)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["Metrics"]


class Metrics:
    """Requests and latency per route, documents written and rejected, queue depth, index sizes."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("slimvec_requests_total", "HTTP requests", ["route", "method", "status"],
                                registry=r)
        self.latency = Histogram("slimvec_request_seconds", "Request latency", ["route", "method"],
                                 registry=r, buckets=(.001, .0025, .005, .01, .025, .05, .1, .25,
                                                      .5, 1, 2.5, 5, 10, 30))
        self.ingested = Counter("slimvec_documents_ingested_total", "Rows committed", ["index"],
                                registry=r)
        self.rejected = Counter("slimvec_documents_rejected_total", "Rows rejected", ["index"],
                                registry=r)
        self.queue_depth = Gauge("slimvec_ingest_queue_depth", "Write requests in flight",
                                 registry=r)
        self.query_batch = Histogram("slimvec_query_encode_batch_size", "Texts per encoder pass",
                                     registry=r, buckets=(1, 2, 4, 8, 16, 32, 64, 128))
        self.index_docs = Gauge("slimvec_index_documents", "Documents per index", ["index"],
                                registry=r)
        self._sizes: Callable[[], dict[str, int]] = dict

    def on_commit(self, index: str, ok: int, bad: int) -> None:
        """Count a committed write."""
        self.ingested.labels(index).inc(ok)
        if bad:
            self.rejected.labels(index).inc(bad)

    def track_sizes(self, sizes: Callable[[], dict[str, int]]) -> None:
        """Where index sizes come from at scrape time."""
        self._sizes = sizes

    def render(self) -> bytes:
        """The text exposition format."""
        self.index_docs.clear()
        for name, n in self._sizes().items():
            self.index_docs.labels(name).set(n)
        return generate_latest(self.registry)
