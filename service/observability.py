"""Metrics (Prometheus), JSON logs and request ids.

* ``Observability`` is a pure ASGI middleware (outermost): it takes the client's ``X-Request-ID`` or makes
  one, echoes it on the response, times the request, counts it by method, route template and status, and
  writes one JSON access-log line (``RequestRecorder.record``, service/request_recorder.py). The predict front
  door (api/fastpath.py) answers before the middleware stack and records its requests through the same
  ``record``.
* ``OrchardCollector`` reads job counts by kind and status and the queue depth from the metadata store at
  scrape time, so the figures are right when jobs run in other processes (embedded pool or RQ workers),
  and the model cache's hits, misses and size from this process.
* ``configure_logging`` makes every log line one JSON object carrying the current request id.

See docs/decisions/observability.md.
"""

from __future__ import annotations

import atexit
import contextvars
import logging
import os
import re
import sys
import threading
import time
from collections import deque
from itertools import count
from time import perf_counter_ns

import orjson
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import ClientDisconnect

from .errors import unexpected_response
from .request_recorder import BUCKETS as _BUCKETS
from .request_recorder import RequestRecorder

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("orchard_request_id", default=None)
access_log = logging.getLogger("orchard.access")
_VALID_ID = re.compile(rb"^[A-Za-z0-9._:/+=@-]{1,128}$")
_RID_PREFIX = os.urandom(10).hex()  # 80 random bits per process + a counter: unique, no syscall per request
_rid_counter = count(1)


def _renew_rid_prefix() -> None:
    global _RID_PREFIX
    _RID_PREFIX = os.urandom(10).hex()


os.register_at_fork(after_in_child=_renew_rid_prefix)


# -- logging ---------------------------------------------------------------------------------------
class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, extra fields, request_id, exc."""

    _SKIP = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}

    def __init__(self):
        super().__init__()
        self._sec = -1
        self._prefix = ""

    def _ts(self, created: float) -> str:
        sec = int(created)
        if sec != self._sec:  # the formatted second is cached: isoformat per line is a measurable cost
            self._sec = sec
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        return f"{self._prefix}.{int((created - sec) * 1000):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": self._ts(record.created), "level": record.levelname.lower(), "logger": record.name,
               "msg": record.getMessage()}
        fields = getattr(record, "fields", None)
        if fields is not None:  # the access log's fields
            out.update(fields)
        else:
            for k, v in record.__dict__.items():
                if k not in self._SKIP and k not in out:
                    out[k] = v
        rid = getattr(record, "request_id", None) or request_id_var.get()
        if rid:
            out["request_id"] = rid
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


class BufferedStreamHandler(logging.Handler):
    """Collects formatted lines in memory and writes them to a file descriptor in one ``os.write`` every
    ``interval`` seconds (from a daemon thread), when 512 lines are pending, and at once for warnings and
    errors, instead of one write system call per line. ``os.write`` on the descriptor keeps the offset it
    shares with the other processes writing to the same stderr (worker processes), so their lines never
    overlap. Lines wait in a deque: appending and popping are atomic, so writers take no lock.
    ``write_line`` lets the access log skip the LogRecord machinery: ``RequestRecorder.drain`` queues a whole
    batch of formatted access lines as one item."""

    PENDING = 512

    def __init__(self, fd: int, interval: float = 0.5):
        super().__init__()
        self.fd = fd
        self.interval = interval
        self._buf: deque[bytes] = deque()
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        threading.Thread(target=self._flusher, name="orchard-log-flush", daemon=True).start()
        atexit.register(self.flush)

    on_tick = None  # called from the flusher thread every interval (see configure_logging)

    def _flusher(self):
        while not self._stop.wait(self.interval):
            tick = self.on_tick
            if tick is not None:
                tick()  # first: the access lines recorders still hold go out with this write
            self.flush()

    def flush(self):
        buf = self._buf
        with self._write_lock:  # one writer at a time keeps the lines in order
            if not buf:
                return
            popleft = buf.popleft
            data = b"".join([popleft() for _ in range(len(buf))])
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(self.fd, view):]
            except OSError:
                pass

    def write_line(self, line: bytes) -> None:
        """Queue formatted bytes: one line, or a batch of access lines (``RequestRecorder.drain``)."""
        buf = self._buf
        buf.append(line)
        if len(buf) >= self.PENDING:
            self.flush()

    def emit(self, record):
        try:
            self.write_line(self.format(record).encode("utf-8", "replace") + b"\n")
            if record.levelno >= logging.WARNING:
                self.flush()
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 - logging must never raise into the caller
            self.handleError(record)

    def close(self):
        self._stop.set()
        self.flush()
        super().close()


def flush_logs() -> None:
    """Write out buffered log lines now (shutdown, fatal signals), the access lines recorders hold included."""
    RequestRecorder.drain_all()
    for h in logging.getLogger().handlers:
        try:
            h.flush()
        except Exception:  # noqa: BLE001
            pass




def configure_logging(level: str = "info", fmt: str = "json") -> None:
    """Root logging to stderr, JSON lines (``fmt="json"``) or plain text; uvicorn's loggers propagate to it."""
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    handler = BufferedStreamHandler(sys.stderr.fileno())
    text = logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    formatter = JsonFormatter() if fmt == "json" else text
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        lg = logging.getLogger(name)
        lg.handlers.clear()
        lg.propagate = True
    # the access log may write its JSON lines straight into this handler while nothing else is attached
    RequestRecorder.use_sink(handler if fmt == "json" else None, formatter)
    handler.on_tick = tick
    atexit.unregister(RequestRecorder.drain_all)
    # after the handler's own: runs before it (atexit is last-in, first-out)
    atexit.register(RequestRecorder.drain_all)


def tick() -> None:
    """The log flusher's periodic work before it writes: is the setup still Orchard's, and the queued lines."""
    RequestRecorder.refresh_sink()
    RequestRecorder.drain_all()


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
        yield CounterMetricFamily("orchard_model_cache_loads", "Model bundles loaded from the artifact store",
                                  value=cache.loads)
        yield CounterMetricFamily("orchard_model_cache_evictions", "Models evicted from the cache to fit its budget",
                                  value=cache.evictions)
        yield CounterMetricFamily("orchard_model_cache_load_seconds", "Seconds spent loading model bundles",
                                  value=cache.load_seconds)
        yield GaugeMetricFamily("orchard_model_cache_size_bytes", "Measured in-memory bytes of loaded models",
                                value=cache.size_bytes)
        yield GaugeMetricFamily("orchard_model_cache_models", "Models loaded in the cache", value=len(cache))


class RequestStats:
    """Request counts and latency histograms in plain Python lists, counted in batches by
    ``RequestRecorder.drain`` (under its lock) and turned into Prometheus families at scrape time.
    prometheus-client's own Counter/Histogram cost ~3 us per request with their locks."""

    def __init__(self):
        self.series: dict[tuple[str, str], list] = {}  # (method, route) -> [bucket counts, sum, {status: n}]

    def entry(self, method: str, route: str) -> list:
        """The series of (method, route): [bucket counts, sum of seconds, {status: count}]."""
        entry = self.series.get((method, route))
        if entry is None:
            entry = self.series[(method, route)] = [[0] * (len(_BUCKETS) + 1), 0.0, {}]
        return entry

    def collect(self):
        requests = CounterMetricFamily("orchard_http_requests", "HTTP requests by method, route template and status",
                                       labels=["method", "route", "status"])
        latency = HistogramMetricFamily("orchard_http_request_duration_seconds",
                                        "HTTP request latency by method and route template", labels=["method", "route"])
        for (method, route), (buckets, total, by_status) in sorted(self.series.copy().items()):
            for status, n in sorted(by_status.copy().items()):
                requests.add_metric([method, route, str(status)], n)
            cum, acc = [], 0
            for bound, n in zip((*_BUCKETS, float("inf")), list(buckets), strict=True):
                acc += n
                cum.append((str(bound) if bound != float("inf") else "+Inf", acc))
            latency.add_metric([method, route], cum, total)
        yield requests
        yield latency


class Metrics:
    """The app's own registry (one per app, so several apps in one process never clash)."""

    def __init__(self, get_runtime):
        self.registry = CollectorRegistry(auto_describe=False)
        self.stats = RequestStats()
        self.rows = {"v1": 0, "v2": 0}
        self.drains: list = []  # RequestRecorder.drain of each recorder counting into these stats
        self.registry.register(self)
        self.registry.register(OrchardCollector(get_runtime))

    def describe(self):
        return []

    def collect(self):
        yield from self.stats.collect()
        rows = CounterMetricFamily("orchard_predicted_rows", "Rows predicted, by protocol (v1 predict, v2 infer)",
                                   labels=["protocol"])
        for k, v in sorted(self.rows.items()):
            rows.add_metric([k], v)
        yield rows

    def on_rows(self, protocol: str, model_id: str, n_rows: int, status: int) -> None:
        """Rows one request predicted (``protocol``: "v1" or "v2")."""
        self.rows[protocol] += n_rows

    def exposition(self) -> bytes:
        for drain in self.drains:  # requests still queued in a recorder count in this scrape
            drain()
        return generate_latest(self.registry)


CONTENT_TYPE = CONTENT_TYPE_LATEST


# -- per-request record and middleware -------------------------------------------------------------
def valid_request_id(value: bytes) -> bool:
    """A client's ``X-Request-ID`` is echoed only if it is 1-128 safe characters."""
    return _VALID_ID.match(value) is not None


def new_request_id() -> str:
    """80 random bits of this process and a 48-bit counter, in 32 hex digits (``to_bytes().hex()`` is the
    cheapest zero-padded hex formatting)."""
    return _RID_PREFIX + next(_rid_counter).to_bytes(6, "big").hex()


class Observability:
    """Request id, access log and request metrics for every HTTP request (pure ASGI, outermost).

    The predict front door (api/fastpath.py) does the same for its route without this layer."""

    def __init__(self, app, recorder: RequestRecorder):
        self.app = app
        self.record = recorder.record

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        rid = None
        for k, v in scope["headers"]:
            if k == b"x-request-id":
                if valid_request_id(v):
                    rid = v.decode()
                break
        if rid is None:
            rid = new_request_id()
        token = request_id_var.set(rid)
        rid_header = (b"x-request-id", rid.encode())
        state = [500, 0]  # status, body bytes
        start = perf_counter_ns()

        started = [False]

        async def send_wrapper(message):
            if message["type"] == "http.response.start":
                started[0] = True
                state[0] = message["status"]
                message["headers"] = [*message.get("headers", ()), rid_header]
            else:
                state[1] += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except ClientDisconnect:
            state[0] = 499  # the client went away (or was cut off: service/server.py) before its body came
        except Exception:
            # the last resort answered here, not by Starlette's ServerErrorMiddleware (outside this layer): the
            # 500 carries the request id too
            logging.getLogger("orchard").exception("unhandled error on %s %s", scope.get("method"),
                                                   scope.get("path"))
            if started[0]:
                raise  # too late for an answer: the server closes the connection
            await unexpected_response(scope.get("path", ""))(scope, receive, send_wrapper)
        finally:
            route = getattr(scope.get("route"), "path", None) or "<unmatched>"
            self.record(scope, route, state[0], perf_counter_ns() - start, state[1], rid_header[1])
            request_id_var.reset(token)
