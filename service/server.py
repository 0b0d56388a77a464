"""The HTTP protocol ``orchard serve`` gives uvicorn: its httptools protocol plus header and body read timeouts.

uvicorn bounds only the idle time between requests (keep-alive); a client that sends its headers or its body
slowly (slowloris) would hold a connection forever. The limits:

* headers: ``header_timeout`` seconds from the connection or the previous answer until a request's headers are
  complete; then the connection is closed (with a 408 if part of a request had arrived).
* body: ``body_timeout`` seconds plus one second per ``BODY_MIN_RATE`` bytes received (large uploads on a slow
  link keep going, a trickle does not: Apache's mod_reqtimeout rule) from the end of the headers. Time the server
  itself holds the body back (reading paused because the app has not consumed it, ``Expect: 100-continue``
  not yet answered, or the request queued behind a pipelined one still being answered) does not count. Then a
  408 problem+json with the request id, and the connection closed.
* sending: ``send_timeout`` seconds in which a client takes none of the answer bytes waiting for it (the
  transport's buffer full, or a closed connection's last bytes unsent); then the connection is aborted, so a
  client that stops reading holds neither the app's task nor the buffered answer (nginx's ``send_timeout``).

They are enforced by one sweep per server (``_Sweep``), not by timers per request: every eighth of the shortest
limit (between 0.05 s and 1 s) it reads each connection's phase from uvicorn's own state (its request/response
cycle and flow control) and closes those that stayed in the same phase of the same request past its limit. The
sweep also closes a connection left idle after an answer for uvicorn's keep-alive timeout (``timeout_keep_alive``,
5 s), which uvicorn itself enforces with a timer armed after every answer and cancelled by the next request. A
request then costs the protocol one added call (``data_received`` counts bytes) and no timer: per-request timers
cost as much as a fifth of a single-row predict. A limit is enforced up to two ticks late (a phase is first
seen at a tick).

Requests uvicorn cannot parse get a problem+json 400 with a request id (uvicorn's own is plain text).

On asyncio's own event loop (uvloop, the default, has its own read size), a read that fills the transport's
256 KiB buffer switches the connection to reads of ``LARGE_BODY_RECV`` bytes, and a shorter read switches it
back: a quarter of the event loop's steps per megabyte of upload, no large buffer per read for small requests.

See docs/decisions/slow-clients-and-limits.md.
"""

from __future__ import annotations

import logging
import weakref

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .observability import new_request_id, valid_request_id

log = logging.getLogger("orchard.server")

BODY_MIN_RATE = 256 * 1024  # bytes per second of grace once the body timeout has passed
FULL_READ = 256 * 1024  # asyncio's default bytes per socket read: a read this long means more is waiting
LARGE_BODY_RECV = 1 << 20  # bytes per socket read while a large body streams in

# a connection's phase, as the sweep sees it
HEADERS = "headers"  # waiting for a request's headers (none yet, or the previous answer is complete)
BODY = "body"  # the headers are complete, the body is arriving
HELD = "held"  # the body is arriving but the server holds it back: the body's clock starts again


def _raw_problem(status: int, title: str, detail: str, rid: bytes) -> bytes:
    """A whole problem+json answer that closes the connection, written by the protocol itself."""
    body = orjson.dumps({"type": "about:blank", "title": title, "status": status, "detail": detail})
    return (b"HTTP/1.1 %d %s\r\ncontent-type: application/problem+json\r\nconnection: close\r\n"
            b"x-request-id: %s\r\ncontent-length: %d\r\n\r\n%s" % (status, title.encode(), rid, len(body), body))


def _timeout_response(detail: str, rid: bytes) -> bytes:
    return _raw_problem(408, "Request Timeout", detail, rid)


class _Sweep:
    """Checks every connection of one uvicorn server against its phase's limit, every ``interval`` seconds while
    the server has connections."""

    def __init__(self, loop, connections: set, interval: float):
        self.loop, self.connections, self.interval = loop, connections, interval
        self._handle = None

    def start(self) -> None:
        if self._handle is None:
            self._handle = self.loop.call_later(self.interval, self.tick)

    def tick(self) -> None:
        self._handle = None
        now = self.loop.time()
        try:
            for conn in list(self.connections):
                check = getattr(conn, "check_deadline", None)
                if check is not None:
                    try:
                        check(now)
                    except Exception:  # noqa: BLE001 - one connection's fault must not stop the others' limits
                        log.exception("read-limit check of a connection failed")
        finally:
            if self.connections:
                self.start()


_sweeps: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # uvicorn's ServerState -> its _Sweep


class TimedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with header and body read deadlines (class attributes, see ``timed_protocol``)."""

    header_timeout: float = 10.0
    body_timeout: float = 60.0
    send_timeout: float = 60.0

    _received = 0  # bytes received on the connection
    _large_reads = False
    _send_since = None  # the loop's time the answer bytes waiting to be sent last went down (None: none waiting)
    _send_left = 0  # how many were waiting then

    # -- uvicorn's protocol hooks ----------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        # the first phase is timed from now, not from the sweep's first look
        self._phase, self._phase_cycle, self._since, self._received_since = HEADERS, None, self.loop.time(), 0
        sweep = _sweeps.get(self.server_state)
        if sweep is None or sweep.loop is not self.loop:
            shortest = min(self.header_timeout, self.body_timeout, self.send_timeout, self.timeout_keep_alive)
            sweep = _sweeps[self.server_state] = _Sweep(self.loop, self.connections, min(1.0, max(0.05, shortest / 8)))
        sweep.start()

    def data_received(self, data: bytes) -> None:
        n = len(data)
        self._received += n
        if n >= FULL_READ or self._large_reads:
            self._read_size(n)
        super().data_received(data)

    def _read_size(self, n: int) -> None:
        """Large reads while reads fill the default buffer, the default again after a shorter one."""
        large = n >= FULL_READ
        if large == self._large_reads:
            return
        try:
            if large:
                self.transport.max_size = LARGE_BODY_RECV  # asyncio's selector transport reads this many per step
            else:
                self.transport.__dict__.pop("max_size", None)  # back to the class's default
        except AttributeError:  # another event loop's transport (uvloop): its own read size
            return
        self._large_reads = large

    def on_response_complete(self) -> None:
        """uvicorn's, without its keep-alive timer: the sweep closes idle connections (``check_deadline``)."""
        if self.pipeline or self.transport.is_closing():
            super().on_response_complete()  # starts the next pipelined request (uvicorn arms no timer then)
            return
        self.server_state.total_requests += 1
        self.flow.resume_reading()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request it cannot parse, as problem+json with a request id like every other."""
        self.transport.write(_raw_problem(400, "Bad Request", msg, new_request_id().encode()))
        self.transport.close()

    # -- deadlines ---------------------------------------------------------------------------------
    def check_deadline(self, now: float) -> None:
        """The sweep's look at this connection (``now``: the loop's time): note a new phase, or end one that has
        lasted past its limit."""
        transport = self.transport
        if transport is None:
            return
        closing = transport.is_closing()
        if closing or self.flow.write_paused:  # answer bytes wait for the client: is it taking them?
            self._check_sending(transport, now)
            if closing:
                return
        elif self._send_since is not None:
            self._send_since = None
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            phase = HEADERS
        elif cycle.more_body and not cycle.response_started:
            # held back: reading paused, 100-continue not yet sent, or a pipelined request queued behind one the
            # app still answers (a 408 now would land inside that answer; its clock starts when it starts)
            held = self.flow.read_paused or cycle.waiting_for_100_continue or (
                self.pipeline and any(queued is cycle for queued, _ in self.pipeline))
            phase = HELD if held else BODY
        else:
            phase = None  # the app has the request: no limit of the protocol's
        if phase is not self._phase or cycle is not self._phase_cycle or phase is HELD:
            self._phase, self._phase_cycle, self._since, self._received_since = phase, cycle, now, self._received
        elif phase is HEADERS:
            waited = now - self._since
            # part of a request came: since the phase was first seen, or before that, after the answer (uvicorn
            # gives each request a new scope as its first byte is parsed): say why it is dropped
            if self._received > self._received_since or (cycle is not None and self.scope is not cycle.scope):
                if waited >= self.header_timeout:
                    self._headers_timed_out(True)
            elif waited >= (self.header_timeout if cycle is None else  # idle: before any request, or after one
                            min(self.header_timeout, self.timeout_keep_alive)):
                self._headers_timed_out(False)
        elif phase is BODY:
            if now - self._since >= self.body_timeout + (self._received - self._received_since) / BODY_MIN_RATE:
                self._body_timed_out(cycle)

    def _check_sending(self, transport, now: float) -> None:
        """Abort the connection when the client has taken none of the bytes waiting for it for ``send_timeout``
        (a graceful close would wait for them forever)."""
        left = transport.get_write_buffer_size()
        if self._send_since is None or left < self._send_left:  # first look, or the client took some
            self._send_since, self._send_left = now, left
        elif now - self._send_since >= self.send_timeout:
            transport.abort()  # uvicorn's connection_lost then tells the app waiting to send that the client is gone

    def _headers_timed_out(self, partial: bool) -> None:
        if partial:
            self.transport.write(_timeout_response(
                f"the request's headers did not arrive within {self.header_timeout:g} s "
                "(ORCHARD_HEADER_TIMEOUT_S)", new_request_id().encode()))
        self.transport.close()

    def _body_timed_out(self, cycle) -> None:
        rid = next((v for k, v in cycle.scope["headers"] if k == b"x-request-id"), None)
        if rid is None or not valid_request_id(rid):
            rid = new_request_id().encode()
        self.transport.write(_timeout_response(
            f"the request's body did not arrive within {self.body_timeout:g} s (ORCHARD_BODY_TIMEOUT_S, plus one "
            f"second per {BODY_MIN_RATE // 1024} KiB received)", rid))
        cycle.response_started = cycle.response_complete = True  # the app's own answer, if any, is dropped
        cycle.disconnected = True
        cycle.message_event.set()  # the app waiting for the body sees the client gone
        self.transport.close()


def timed_protocol(header_timeout: float, body_timeout: float,
                   send_timeout: float = TimedHttpToolsProtocol.send_timeout) -> type[TimedHttpToolsProtocol]:
    """The protocol class for ``uvicorn.run(..., http=...)`` with these timeouts."""
    return type("OrchardHttpProtocol", (TimedHttpToolsProtocol,),
                {"header_timeout": header_timeout, "body_timeout": body_timeout, "send_timeout": send_timeout})
