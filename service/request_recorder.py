"""What every HTTP request leaves behind: its metrics and its JSON access-log line (``RequestRecorder``).

``record`` runs once per request, from the ``Observability`` middleware or from the predict front door
(api/fastpath.py), on the request's hot path, so it only queues the request's fields (one deque append).
``drain`` turns the queue into metrics and access lines in a batch: when ``BATCH`` requests are queued, at every
tick of the log flusher (0.5 s), before each /metrics scrape and at shutdown. It works on columns
(``zip(*items)``) with C-level loops: each line is joined from texts made once and kept by the recorder (per
(method, path, route, status) the text from ``level`` to ``duration_ms``, per millisecond the timestamp, per
microsecond the duration, per size and per client the rest but the request id), and the latency histogram is
counted by bisecting the batch's sorted durations once per bucket bound. The lines are byte for byte what
``JsonFormatter`` writes for the same request logged through ``logging`` (tested), and the batch goes to
Orchard's buffered handler in one write.

That shortcut is taken only while the logging setup is Orchard's own (``configure_logging``: its handler the
root's only one, ``orchard.access`` propagating to it at info level); otherwise each access line goes through
``logging`` as any record does, in order. ``RequestRecorder.use_sink`` and ``refresh_sink`` decide which.
docs/decisions/observability.md has the figures against the standard library's ``QueueHandler`` and
``prometheus_client``'s own counters.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from bisect import bisect_right
from collections import deque
from itertools import chain, islice, repeat
from operator import itemgetter

import orjson

access_log = logging.getLogger("orchard.access")
_root = logging.getLogger()
_FIRST = itemgetter(0)
# the latency histogram's bounds (seconds; Prometheus' le) and the same in whole microseconds
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_BUCKETS_US = tuple(round(b * 1e6) for b in BUCKETS)
_MILLIS = tuple(b".%03dZ" % i for i in range(1000))  # a timestamp's milliseconds and its end


class _Texts(dict):
    """A dict that makes a missing value with ``make(key)`` (which may store it): C-speed lookups in ``map``."""

    def __init__(self, make):
        super().__init__()
        self.make = make

    def __missing__(self, key):
        return self.make(key)


class RequestRecorder:
    """Queue each request's fields; count them into ``RequestStats`` and write their access lines in batches."""

    # requests per drain: a drain blocks the event loop ~1 us per request (docs/decisions/observability.md)
    BATCH = 256
    TEXTS_MAX = 4096  # texts kept per kind (paths, sizes and clients come from clients: bounded)

    # the logging setup, shared by every recorder of the process
    _sink: tuple | None = None  # (handler, formatter, [handler]) while configure_logging's setup may be bypassed
    _direct = None  # the handler to write access lines into while the setup is still Orchard's, else None
    _live: weakref.WeakSet = weakref.WeakSet()

    def __init__(self, metrics, access_log_on: bool):
        """``metrics``: the app's ``Metrics`` (requests are counted into its ``stats``, drained before each
        scrape), or None with metrics off; ``access_log_on``: write access lines."""
        self.stats = metrics.stats if metrics is not None else None
        if metrics is not None:
            metrics.drains.append(self.drain)
        self.access_log_on = access_log_on
        self._queue: deque[tuple] = deque()  # requests with an access line to write (and to count)
        self._counted: deque[tuple] = deque()  # requests only to count (no line, or the line went through logging)
        self._lock = threading.Lock()  # one drain at a time: lines stay in order, stats have one writer
        # (method, path, route, status) -> (the line's text from level to duration_ms, stats series, status)
        self._entries = _Texts(self._entry)
        self._second: tuple[int, bytes] = (-1, b"")  # the last second formatted and its text
        self._stamps = _Texts(self._timestamp_text)
        self._durations = _Texts(self._duration_text)
        self._sizes = _Texts(self._size_text)
        self._clients = _Texts(self._client_text)
        RequestRecorder._live.add(self)
        self.record = self._recorder() if access_log_on or metrics is not None else _ignore

    # -- the logging setup -------------------------------------------------------------------------
    @classmethod
    def use_sink(cls, handler, formatter) -> None:
        """Access lines may go straight into ``handler`` (formatted as ``formatter`` would) while it stays the
        root logger's only handler; None: always through ``logging``."""
        cls._sink = (handler, formatter, [handler]) if handler is not None else None
        cls.refresh_sink()

    @classmethod
    def refresh_sink(cls) -> None:
        """Decide again whether the setup is still Orchard's (``configure_logging`` and every flusher tick: a
        later change is honoured within that interval; a handler added to the root is noticed at once, as
        ``record`` also checks their number)."""
        sink = cls._sink
        ok = (sink is not None and _root.handlers == sink[2] and not access_log.handlers and access_log.propagate
              and not access_log.disabled and access_log.isEnabledFor(logging.INFO))
        cls._direct = sink[0] if ok else None

    @classmethod
    def drain_all(cls) -> None:
        """Drain every live recorder (the log flusher's tick, shutdown)."""
        for recorder in list(cls._live):
            recorder.drain()

    # -- one request -------------------------------------------------------------------------------
    def _recorder(self):
        """``record(scope, route, status, elapsed_ns, nbytes, rid)`` for this configuration: queue one finished
        request (``elapsed_ns``: its duration in integer nanoseconds, from ``perf_counter_ns``; ``rid``: its
        request id, ASCII bytes as in the X-Request-ID header). The queued tuple holds the scope's fields, not
        the scope: holding whole scopes until the drain kept each request's objects alive past it, and
        measurably slowed the allocations of the requests after it."""
        queue, counted, drain, batch, now_ns = self._queue, self._counted, self.drain, self.BATCH, time.time_ns
        append, count_only = queue.append, counted.append
        cls = RequestRecorder

        if not self.access_log_on:
            def record(scope, route: str, status: int, elapsed_ns: int, nbytes: int, rid: bytes) -> None:
                count_only((scope["method"], scope["path"], route, status, (elapsed_ns + 500) // 1000))
                if len(counted) >= batch:
                    drain()
            return record

        count = self.stats is not None

        def record(scope, route: str, status: int, elapsed_ns: int, nbytes: int, rid: bytes) -> None:
            # durations in whole microseconds, timestamps in whole milliseconds
            us = (elapsed_ns + 500) // 1000
            if cls._direct is None or len(_root.handlers) != 1:  # the logging setup is not Orchard's alone
                if access_log.isEnabledFor(logging.INFO):
                    if queue:
                        drain()  # lines queued earlier go first
                    self.log(scope["method"], scope["path"], scope.get("client"), route, status, us, nbytes, rid)
                if count:
                    count_only((scope["method"], scope["path"], route, status, us))
                    if len(counted) >= batch:
                        drain()
                return
            append((scope["method"], scope["path"], scope.get("client"), route, status, us, nbytes, rid,
                    now_ns() // 1_000_000))
            if len(queue) >= batch:
                drain()
        return record

    @staticmethod
    def log(method: str, path: str, client, route: str, status: int, us: int, nbytes: int, rid: bytes,
            created: float | None = None) -> None:
        """One access line through ``logging`` (``created``: the record's time, default now)."""
        extra = {"request_id": rid.decode(), "fields": {
            "method": method, "path": path, "route": route, "status": status, "duration_ms": us / 1000,
            "bytes": nbytes, "client": client[0] if client else ""}}
        if created is None:
            access_log.info("%s %s %d", method, path, status, extra=extra)
            return
        record = access_log.makeRecord(access_log.name, logging.INFO, "", 0, "%s %s %d", (method, path, status),
                                       None, extra=extra)
        record.created = created
        access_log.handle(record)

    # -- batches -------------------------------------------------------------------------------------
    def drain(self) -> None:
        """Metrics and access lines of every queued request (any thread)."""
        queue, counted = self._queue, self._counted
        if not queue and not counted:
            return
        with self._lock:
            # pop exactly the items there now (other threads may append meanwhile), in a C loop
            items = list(islice(iter(queue.popleft, None), len(queue)))
            only = list(islice(iter(counted.popleft, None), len(counted)))
            direct = RequestRecorder._direct
            if items:
                methods, paths, clients, routes, statuses, uss, sizes, rids, mss = zip(*items, strict=True)
                entries = list(map(self._entries.__getitem__, zip(methods, paths, routes, statuses, strict=True)))
                if self.stats is not None:
                    self._count(entries, uss)
                if direct is None:  # the setup stopped being Orchard's since: through logging, in order
                    for method, path, client, route, status, us, nbytes, rid, ms in items:
                        self.log(method, path, client, route, status, us, nbytes, rid, (ms + 0.5) / 1000)
                else:
                    try:
                        data = self._lines(mss, entries, uss, sizes, clients, rids)
                    except TypeError:  # an ASGI server that gives the client as a list (unhashable)
                        clients = [c if c is None or type(c) is tuple else tuple(c) for c in clients]
                        data = self._lines(mss, entries, uss, sizes, clients, rids)
                    # written now, a batch at a time: small writes stay in the CPU's caches (a 0.5 s backlog
                    # of several MB, joined and written at once, cost more per line in page faults and copies)
                    direct.write_line(data)
                    direct.flush()
            if only:
                methods, paths, routes, statuses, uss = zip(*only, strict=True)
                keys = zip(methods, paths, routes, statuses, strict=True)
                self._count(list(map(self._entries.__getitem__, keys)), uss)

    def _lines(self, mss, entries, uss, sizes, clients, rids) -> bytes:
        """The access lines of a batch (columns of its requests), joined from their texts in C loops."""
        return b"".join(chain.from_iterable(zip(
            map(self._stamps.__getitem__, mss), map(_FIRST, entries), map(self._durations.__getitem__, uss),
            map(self._sizes.__getitem__, sizes), map(self._clients.__getitem__, clients), rids, repeat(b'"}\n'),
            strict=False)))

    def _count(self, entries: list, durations: tuple) -> None:
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

    # -- the texts lines are joined from -------------------------------------------------------------
    def _kept(self, texts: dict, key, value, bounded: bool = True):
        """Keep ``value`` for ``key``; a ``bounded`` kind is emptied first when it holds ``TEXTS_MAX`` values."""
        if bounded and len(texts) >= self.TEXTS_MAX:
            texts.clear()
        texts[key] = value
        return value

    def _entry(self, key: tuple[str, str, str, int]) -> tuple:
        """The fixed text of the lines of (method, path, route, status), between the timestamp and the duration,
        with the stats series they count into. Every value joined in is JSON-safe: request ids match
        ``valid_request_id`` or are hex, timestamps and numbers are plain, the rest is JSON-encoded once."""
        method, path, route, status = key
        m, p, r = (orjson.dumps(v) for v in (method, path, route))
        text = (b'","level":"info","logger":"orchard.access","msg":"%s %s %d","method":%s,"path":%s,"route":%s,'
                b'"status":%d,"duration_ms":' % (m[1:-1], p[1:-1], status, m, p, r, status))
        return self._kept(self._entries, key, (text, self.stats.entry(method, route) if self.stats else None,
                                               status))

    def _timestamp_text(self, ms: int) -> bytes:
        """``{"ts":"<ISO time to the millisecond>`` of ``ms`` milliseconds since the epoch."""
        sec, frac = divmod(ms, 1000)
        second = self._second
        if second[0] != sec:
            second = self._second = (sec, b'{"ts":"' + time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)).encode())
        stamps = self._stamps  # made once per millisecond: _kept inline, the fraction's text made once
        if len(stamps) >= self.TEXTS_MAX:
            stamps.clear()
        text = stamps[ms] = second[1] + _MILLIS[frac]
        return text

    def _duration_text(self, us: int) -> bytes:
        """``duration_ms`` as JSON writes ``us / 1000``; kept below 20 ms (at most 20,000 texts, ~1 MB; slower
        requests are rarer and made each time)."""
        text = orjson.dumps(us / 1000)
        if us < 20_000:
            self._durations[us] = text  # _kept, unbounded, inline
        return text

    def _size_text(self, nbytes: int) -> bytes:
        """``,"bytes":<n>,"client":"``."""
        return self._kept(self._sizes, nbytes, b',"bytes":%d,"client":"' % nbytes)

    def _client_text(self, client) -> bytes:
        """The ASGI client (host, port) or None: its host, JSON-encoded, up to the request id."""
        return self._kept(self._clients, client, orjson.dumps(client[0] if client else "")[1:] + b',"request_id":"')


def _ignore(scope, route: str, status: int, elapsed_ns: int, nbytes: int, rid: bytes) -> None:
    """``record`` with metrics and the access log both off."""
