"""The standard library's way to record requests, for comparison with ``RequestRecorder`` (bench/service.py
``--callgrind``, docs/decisions/observability.md): ``prometheus_client`` Counter and Histogram objects for the
metrics, and the access line through ``logging`` into a ``QueueHandler``, formatted and written by a
``QueueListener`` thread with Orchard's ``JsonFormatter``: the same lines and series, no hand-built batching."""

from __future__ import annotations

import logging
import logging.handlers
import queue
import sys

from prometheus_client import CollectorRegistry, Counter, Histogram

from service.observability import JsonFormatter
from service.request_recorder import BUCKETS


class StdlibRecorder:
    def __init__(self):
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter("orchard_http_requests", "HTTP requests", ["method", "route", "status"],
                                registry=self.registry)
        self.latency = Histogram("orchard_http_request_duration_seconds", "HTTP request latency",
                                 ["method", "route"], buckets=BUCKETS, registry=self.registry)
        self.log = logging.getLogger("orchard.access")
        q: queue.SimpleQueue = queue.SimpleQueue()
        out = logging.StreamHandler(sys.stderr)
        out.setFormatter(JsonFormatter())
        self.listener = logging.handlers.QueueListener(q, out)
        root = logging.getLogger()
        root.handlers[:] = [logging.handlers.QueueHandler(q)]
        root.setLevel(logging.INFO)
        self.listener.start()

    def record(self, scope, route: str, status: int, elapsed_ns: int, nbytes: int, rid: bytes) -> None:
        method, path, client = scope["method"], scope["path"], scope.get("client")
        us = (elapsed_ns + 500) // 1000
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(us / 1e6)
        self.log.info("%s %s %d", method, path, status, extra={"request_id": rid.decode(), "fields": {
            "method": method, "path": path, "route": route, "status": status, "duration_ms": us / 1000,
            "bytes": nbytes, "client": client[0] if client else ""}})

    def flush(self) -> None:
        self.listener.stop()  # every queued record formatted and written
        self.listener.start()
