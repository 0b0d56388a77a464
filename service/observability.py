"""Metrics (Prometheus), JSON logs and request ids.

* ``Observability`` is a pure ASGI middleware (outermost): it takes the client's ``X-Request-ID`` or makes
  one, echoes it on the response, times the request, counts it by method, route template and status, and
  writes one JSON access-log line. The predict fast path is below it, so it is counted like any route.
* ``OrchardCollector`` reads job counts by kind and status and the queue depth from the metadata store at
  scrape time, so the figures are right when jobs run in other processes (embedded pool or RQ workers),
  and the model cache's hits, misses and size from this process.
* ``configure_logging`` makes every log line one JSON object carrying the current request id.

See docs/decisions/observability.md.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import logging
import re
import sys
import time
import uuid

import orjson
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("orchard_request_id", default=None)
access_log = logging.getLogger("orchard.access")
_VALID_ID = re.compile(rb"^[A-Za-z0-9._:/+=@-]{1,128}$")
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


# -- logging ---------------------------------------------------------------------------------------
class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, request_id, extra fields, exc."""

    _SKIP = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
               "level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage()}
        rid = getattr(record, "request_id", None) or request_id_var.get()
        if rid:
            out["request_id"] = rid
        for k, v in record.__dict__.items():
            if k not in self._SKIP and k not in out:
                out[k] = v
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


def configure_logging(level: str = "info", fmt: str = "json") -> None:
    """Root logging to stderr, JSON lines (``fmt="json"``) or plain text; uvicorn's loggers propagate to it."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        lg = logging.getLogger(name)
        lg.handlers.clear()
        lg.propagate = True


# -- metrics ---------------------------------------------------------------------------------------
class OrchardCollector:
    """Scrape-time figures read from the stores: jobs by kind/status, queue depth, model cache."""

    def __init__(self, get_runtime):
        self.get_runtime = get_runtime

    def describe(self):
        return []

    def collect(self):
        try:
            r = self.get_runtime()
        except AttributeError:  # app not started
            return
        jobs = GaugeMetricFamily("orchard_jobs", "Jobs in the metadata store by kind and status",
                                 labels=["kind", "status"])
        depth = GaugeMetricFamily("orchard_queue_depth", "Jobs queued and not yet started")
        try:
            counts = r.meta.job_counts()
        except Exception:  # noqa: BLE001 - a scrape must not fail because the database blinks
            counts = None
        if counts is not None:
            queued = 0
            for (kind, status), n in sorted(counts.items()):
                jobs.add_metric([kind, status], n)
                if status == "queued":
                    queued += n
            depth.add_metric([], queued)
            yield jobs
            yield depth
        cache = r.cache
        yield CounterMetricFamily("orchard_model_cache_hits", "Model cache hits", value=cache.hits)
        yield CounterMetricFamily("orchard_model_cache_misses", "Model cache misses (bundle loads)",
                                  value=cache.misses)
        yield GaugeMetricFamily("orchard_model_cache_size_bytes", "Estimated bytes of loaded models",
                                value=cache.size_bytes)
        yield GaugeMetricFamily("orchard_model_cache_models", "Models loaded in the cache", value=len(cache))


class Metrics:
    """The app's own registry (one per app, so several apps in one process never clash)."""

    def __init__(self, get_runtime):
        disable_created_metrics()  # no *_created series: half the exposition for nothing a dashboard uses
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter("orchard_http_requests", "HTTP requests by method, route template and status",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("orchard_http_request_duration_seconds",
                                 "HTTP request latency by method and route template", ["method", "route"],
                                 buckets=_BUCKETS, registry=self.registry)
        self.rows = Counter("orchard_predicted_rows", "Rows predicted, by protocol (v1 predict, v2 infer)",
                            ["protocol"], registry=self.registry)
        self._rows_v1 = self.rows.labels("v1")
        self._rows_v2 = self.rows.labels("v2")
        self.registry.register(OrchardCollector(get_runtime))
        self._children: dict[tuple, tuple] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, status)
        pair = self._children.get(key)
        if pair is None:  # cache the labelled children: labels() costs a lock and a dict lookup each time
            pair = (self.requests.labels(method, route, str(status)), self.latency.labels(method, route))
            self._children[key] = pair
        pair[0].inc()
        pair[1].observe(seconds)

    def on_predict_v1(self, model_id: str, n_rows: int, status: int) -> None:
        if n_rows:
            self._rows_v1.inc(n_rows)

    def on_predict_v2(self, model_id: str, n_rows: int, status: int) -> None:
        if n_rows:
            self._rows_v2.inc(n_rows)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


CONTENT_TYPE = CONTENT_TYPE_LATEST


# -- middleware ------------------------------------------------------------------------------------
class Observability:
    """Request id, access log and request metrics for every HTTP request (pure ASGI)."""

    def __init__(self, app, metrics: Metrics | None, access_log_on: bool):
        self.app = app
        self.metrics = metrics
        self.access_log_on = access_log_on

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        rid = None
        for k, v in scope["headers"]:
            if k == b"x-request-id":
                if _VALID_ID.match(v):
                    rid = v.decode()
                break
        if rid is None:
            rid = uuid.uuid4().hex
        token = request_id_var.set(rid)
        rid_header = (b"x-request-id", rid.encode())
        status = 500
        size = 0
        start = time.perf_counter()

        async def send_wrapper(message):
            nonlocal status, size
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), rid_header]
            elif message["type"] == "http.response.body":
                size += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            elapsed = time.perf_counter() - start
            route = scope.get("orchard.route")
            if route is None:
                r = scope.get("route")
                route = getattr(r, "path", None) or "<unmatched>"
            if self.metrics is not None:
                self.metrics.observe(scope["method"], route, status, elapsed)
            if self.access_log_on:
                access_log.info("%s %s %d", scope["method"], scope["path"], status,
                                extra={"request_id": rid, "method": scope["method"], "path": scope["path"],
                                       "route": route, "status": status, "duration_ms": round(elapsed * 1000, 3),
                                       "bytes": size, "client": (scope.get("client") or ("", 0))[0]})
            request_id_var.reset(token)
