"""Metrics (Prometheus), JSON logs and request ids.

* ``Observability`` is a pure ASGI middleware (outermost): it takes the client's ``X-Request-ID`` or makes
  one, echoes it on the response, times the request, counts it by method, route template and status, and
  writes one JSON access-log line (``RequestRecorder.record``). The predict front door (api/fastpath.py)
  answers before the middleware stack and records its requests through the same ``record``.
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
import weakref
from bisect import bisect_right
from collections import deque
from itertools import chain, count, islice, repeat
from operator import itemgetter
from time import perf_counter_ns

import orjson
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import ClientDisconnect

from .errors import unexpected_response

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("orchard_request_id", default=None)
access_log = logging.getLogger("orchard.access")
_VALID_ID = re.compile(rb"^[A-Za-z0-9._:/+=@-]{1,128}$")
_RID_PREFIX = os.urandom(10).hex()  # 80 random bits per process + a counter: unique, no syscall per request
_rid_counter = count(1)


def _renew_rid_prefix() -> None:
    global _RID_PREFIX
    _RID_PREFIX = os.urandom(10).hex()


os.register_at_fork(after_in_child=_renew_rid_prefix)
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


# -- logging ---------------------------------------------------------------------------------------
class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, request_id, extra fields, exc."""

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
        rid = getattr(record, "request_id", None) or request_id_var.get()
        if rid:
            out["request_id"] = rid
        fields = getattr(record, "fields", None)
        if fields is not None:  # the access log's pre-built fields
            out.update(fields)
        else:
            for k, v in record.__dict__.items():
                if k not in self._SKIP and k not in out:
                    out[k] = v
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

    on_tick = None  # called from the flusher thread every interval (see refresh_access_sink)

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
    drain_recorders()
    for h in logging.getLogger().handlers:
        try:
            h.flush()
        except Exception:  # noqa: BLE001
            pass


_access_sink: tuple | None = None  # (handler, formatter, [handler]) once configure_logging ran


def configure_logging(level: str = "info", fmt: str = "json") -> None:
    """Root logging to stderr, JSON lines (``fmt="json"``) or plain text; uvicorn's loggers propagate to it."""
    global _access_sink
    logging._srcfile = None  # no caller frame lookup per record (the logging HOWTO's optimisation)
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
    _access_sink = (handler, formatter, [handler]) if fmt == "json" else None
    handler.on_tick = _tick
    refresh_access_sink()
    atexit.unregister(drain_recorders)
    atexit.register(drain_recorders)  # after the handler's own: runs before it (atexit is last-in, first-out)


def _tick() -> None:
    refresh_access_sink()
    drain_recorders()


_root = logging.getLogger()


def _access_fast() -> bool:
    """The access logger still propagates to the root's only handler (Orchard's) at info level."""
    return (not access_log.handlers and access_log.propagate and not access_log.disabled
            and access_log.isEnabledFor(logging.INFO))


_direct: tuple | None = None  # (handler, formatter) while access lines may go straight into Orchard's handler


def refresh_access_sink() -> None:
    """Decide whether access lines may bypass ``logging`` (the setup is still ours: the root's only handler
    is Orchard's and the access logger propagates to it at info level). Run by ``configure_logging`` and by
    the log flusher every interval, so a later change of the logging setup is honoured within that interval;
    a handler added to the root is noticed at once (``RequestRecorder.record`` also checks their number)."""
    global _direct
    sink = _access_sink
    _direct = sink[:2] if sink is not None and _root.handlers == sink[2] and _access_fast() else None


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

    def on_predict_v1(self, model_id: str, n_rows: int, status: int) -> None:
        self.rows["v1"] += n_rows

    def on_predict_v2(self, model_id: str, n_rows: int, status: int) -> None:
        self.rows["v2"] += n_rows

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


class RequestRecorder:
    """What every request leaves behind: its metrics (``RequestStats``) and its JSON access-log line.

    ``record`` runs once per request, from the ``Observability`` middleware or from the predict front door
    (api/fastpath.py), on the request's hot path, so it only queues the request's fields (one deque append).
    ``drain`` turns the queue into metrics and access lines in a batch: when ``BATCH`` requests are queued, at
    every tick of the log flusher (0.5 s), before each /metrics scrape and at shutdown (``flush_logs``).
    The drain works on columns (``zip(*items)``) with C-level loops (``map``, ``zip``, ``sorted``, ``join``):
    each line is joined from texts made once and reused, looked up in dicts that make a missing text on first
    use (per (method, path, route, status) the text from ``level`` to ``duration_ms``, per millisecond the
    timestamp, per microsecond the duration, per size and per client the rest but the request id), and the
    latency histogram is counted by bisecting the batch's sorted durations once per bucket bound. A Python
    loop over the batch, formatting each line with ``%``, cost more than twice as much
    (docs/decisions/observability.md has the figures).
    While the logging setup is not Orchard's own (``refresh_access_sink``), access lines go through
    ``logging`` at once, as any log record does."""

    # requests per drain: a drain blocks the event loop ~1 us per request (docs/decisions/observability.md)
    BATCH = 256

    def __init__(self, metrics: Metrics | None, access_log_on: bool):
        self.stats = metrics.stats if metrics is not None else None
        self.access_log_on = access_log_on
        self._queue: deque[tuple] = deque()  # requests with an access line to write (and to count)
        self._counted: deque[tuple] = deque()  # requests only to count (no line, or the line went through logging)
        self._lock = threading.Lock()  # one drain at a time: lines stay in order, stats have one writer
        # (method, path, route, status) -> (the line's text from level to duration_ms, stats series, status)
        self._entries = _Texts(self._entry)
        if metrics is not None:
            metrics.drains.append(self.drain)
        _recorders.add(self)
        self.record = self._recorder() if access_log_on or metrics is not None else _ignore

    def _recorder(self):
        """``record(scope, route, status, elapsed_ns, nbytes, rid)`` for this configuration: queue one finished
        request (``elapsed_ns``: its duration in integer nanoseconds, from ``perf_counter_ns``; ``rid``: its
        request id, ASCII bytes as in the X-Request-ID header). The queued tuple holds the scope's fields, not
        the scope: holding whole scopes until the drain kept each request's objects alive past it, and
        measurably slowed the allocations of the requests after it."""
        queue, counted, drain, batch, now_ns = self._queue, self._counted, self.drain, self.BATCH, time.time_ns
        append, count_only = queue.append, counted.append

        if not self.access_log_on:
            def record(scope, route: str, status: int, elapsed_ns: int, nbytes: int, rid: bytes) -> None:
                count_only((scope["method"], scope["path"], route, status, (elapsed_ns + 500) // 1000))
                if len(counted) >= batch:
                    drain()
            return record

        count = self.stats is not None

        def record(scope, route: str, status: int, elapsed_ns: int, nbytes: int, rid: bytes) -> None:
            if _direct is None or len(_root.handlers) != 1:  # the logging setup is not Orchard's alone
                if access_log.isEnabledFor(logging.INFO):
                    if queue:
                        drain()  # lines queued earlier go first
                    self._log(scope["method"], scope["path"], scope.get("client"), route, status, elapsed_ns,
                              nbytes, rid)
                if count:
                    count_only((scope["method"], scope["path"], route, status, (elapsed_ns + 500) // 1000))
                    if len(counted) >= batch:
                        drain()
                return
            # durations in whole microseconds, timestamps in whole milliseconds (integer arithmetic here is
            # cheaper than the same conversions as C-level map steps in the drain)
            append((scope["method"], scope["path"], scope.get("client"), route, status, (elapsed_ns + 500) // 1000,
                    nbytes, rid, now_ns() // 1_000_000))
            if len(queue) >= batch:
                drain()
        return record

    @staticmethod
    def _log(method: str, path: str, client, route: str, status: int, elapsed_ns: int, nbytes: int,
             rid: bytes) -> None:
        """One access line through ``logging`` (the setup is not Orchard's alone)."""
        access_log.info("%s %s %d", method, path, status, extra={"request_id": rid.decode(), "fields": {
            "method": method, "path": path, "route": route, "status": status,
            "duration_ms": round(elapsed_ns / 1e6, 3), "bytes": nbytes, "client": client[0] if client else ""}})

    def _entry(self, key: tuple[str, str, str, int]) -> tuple:
        """The entry of (method, path, route, status), kept like the other texts (``_kept``: paths come from
        clients, so at most ``_TEXT_CACHE_MAX`` keys)."""
        method, path, route, status = key
        entry = (_line_text(method, path, route, status), self.stats.entry(method, route) if self.stats else None,
                 status)
        return _kept(self._entries, key, entry)

    def drain(self) -> None:
        """Metrics and access lines of every queued request (any thread)."""
        queue, counted = self._queue, self._counted
        if not queue and not counted:
            return
        with self._lock:
            # pop exactly the items there now (other threads may append meanwhile), in a C loop
            items = list(islice(iter(queue.popleft, None), len(queue)))
            only = list(islice(iter(counted.popleft, None), len(counted)))
            direct = _direct
            if items:
                methods, paths, clients, routes, statuses, uss, sizes, rids, mss = zip(*items, strict=True)
                entries = list(map(self._entries.__getitem__, zip(methods, paths, routes, statuses, strict=True)))
                if self.stats is not None:
                    self._count(entries, uss)
                if direct is None:  # the setup stopped being Orchard's since: through logging, in order
                    for method, path, client, route, status, us, nbytes, rid, _ in items:
                        self._log(method, path, client, route, status, us * 1000, nbytes, rid)
                else:
                    try:
                        data = _lines(mss, entries, uss, sizes, clients, rids)
                    except TypeError:  # an ASGI server that gives the client as a list (unhashable)
                        clients = [c if c is None or type(c) is tuple else tuple(c) for c in clients]
                        data = _lines(mss, entries, uss, sizes, clients, rids)
                    # written now, a batch at a time: small writes stay in the CPU's caches (a 0.5 s backlog
                    # of several MB, joined and written at once, cost more per line in page faults and copies)
                    direct[0].write_line(data)
                    direct[0].flush()
            if only:
                methods, paths, routes, statuses, uss = zip(*only, strict=True)
                keys = zip(methods, paths, routes, statuses, strict=True)
                self._count(list(map(self._entries.__getitem__, keys)), uss)

    @staticmethod
    def _count(entries: list, durations: tuple) -> None:
        """Count requests (``entries[i]`` took ``durations[i]`` us) into their series (under the drain's lock)."""
        first = entries[0]
        if entries.count(first) == len(entries):  # one series (entries equal only if their keys are)
            groups = ((first, durations),)
        else:
            by_entry: dict[int, tuple] = {}
            for entry, us in zip(entries, durations, strict=True):
                group = by_entry.get(id(entry))
                if group is None:
                    group = by_entry[id(entry)] = (entry, [])
                group[1].append(us)
            groups = by_entry.values()
        for (_, series, status), group in groups:
            done, ordered, buckets = 0, sorted(group), series[0]
            for i, bound in enumerate(_BUCKETS_US):  # le: durations <= bound
                upto = bisect_right(ordered, bound, done)
                buckets[i] += upto - done
                done = upto
                if done == len(ordered):
                    break
            buckets[-1] += len(ordered) - done
            series[1] += sum(ordered) / 1e6
            series[2][status] = series[2].get(status, 0) + len(ordered)


def _ignore(scope, route: str, status: int, elapsed_ns: int, nbytes: int, rid: bytes) -> None:
    """``record`` with metrics and the access log both off."""


_BUCKETS_US = tuple(round(b * 1e6) for b in _BUCKETS)  # the histogram's bounds in microseconds


_recorders: weakref.WeakSet[RequestRecorder] = weakref.WeakSet()


def drain_recorders() -> None:
    """Drain every live recorder (the log flusher's tick, shutdown)."""
    for recorder in list(_recorders):
        recorder.drain()


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


def _line_text(method: str, path: str, route: str, status: int) -> bytes:
    """The fixed text of an access line of (method, path, route, status), between its timestamp and its
    duration. A line is ``{"ts":"<ts>`` + this + duration + ``,"bytes":<n>,"client":"`` + client +
    ``","request_id":"`` + request id + ``"}\n``. Every value joined in is JSON-safe: request ids match
    _VALID_ID or are hex, timestamps and numbers are plain, client addresses are JSON-encoded once."""
    m, p, r = (orjson.dumps(v) for v in (method, path, route))
    return (b'","level":"info","logger":"orchard.access","msg":"%s %s %d","method":%s,"path":%s,"route":%s,'
            b'"status":%d,"duration_ms":' % (m[1:-1], p[1:-1], status, m, p, r, status))


_FIRST = itemgetter(0)


def _lines(mss, entries, uss, sizes, clients, rids) -> bytes:
    """The access lines of a batch (columns of its requests), joined from their texts in C loops."""
    return b"".join(chain.from_iterable(zip(
        map(_TIMESTAMP_TEXT.__getitem__, mss), map(_FIRST, entries), map(_DURATION_TEXT.__getitem__, uss),
        map(_SIZE_TEXT.__getitem__, sizes), map(_CLIENT_TEXT.__getitem__, clients), rids, repeat(b'"}\n'),
        strict=False)))
_TEXT_CACHE_MAX = 4096  # texts kept per kind (sizes and clients come from clients: bounded)


class _Texts(dict):
    """A dict that makes a missing value with ``make(key)`` (which may store it): C-speed lookups in ``map``."""

    def __init__(self, make):
        super().__init__()
        self.make = make

    def __missing__(self, key):
        return self.make(key)


def _kept(texts: dict, key, value, bounded: bool = True):
    """Keep ``value`` (a text, or a route's entry) for ``key``; a ``bounded`` kind is emptied first when it
    holds ``_TEXT_CACHE_MAX`` values."""
    if bounded and len(texts) >= _TEXT_CACHE_MAX:
        texts.clear()
    texts[key] = value
    return value


_SECOND: tuple[int, bytes] = (-1, b"")  # the last second formatted and its text (replaced whole: recorders of
# several apps may drain at once in two threads)


def _timestamp_text(ms: int) -> bytes:
    """``{"ts":"<ISO time to the millisecond>`` of ``ms`` milliseconds since the epoch."""
    global _SECOND
    sec, frac = divmod(ms, 1000)
    second = _SECOND
    if second[0] != sec:
        second = _SECOND = (sec, b'{"ts":"' + time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)).encode())
    return _kept(_TIMESTAMP_TEXT, ms, b"%s.%03dZ" % (second[1], frac))


def _duration_text(us: int) -> bytes:
    """``duration_ms`` to the microsecond (``0.031``); kept below 20 ms (at most 20,000 texts, ~1 MB; slower
    requests are rarer and made each time)."""
    text = b"%d.%03d" % divmod(us, 1000)
    return _kept(_DURATION_TEXT, us, text, False) if us < 20_000 else text


def _size_text(nbytes: int) -> bytes:
    """``,"bytes":<n>,"client":"``."""
    return _kept(_SIZE_TEXT, nbytes, b',"bytes":%d,"client":"' % nbytes)


def _client_text(client) -> bytes:
    """The ASGI client (host, port) or None: its host, JSON-encoded, up to the request id."""
    return _kept(_CLIENT_TEXT, client, orjson.dumps(client[0] if client else "")[1:] + b',"request_id":"')


_TIMESTAMP_TEXT = _Texts(_timestamp_text)
_DURATION_TEXT = _Texts(_duration_text)
_SIZE_TEXT = _Texts(_size_text)
_CLIENT_TEXT = _Texts(_client_text)
