"""The HTTP protocol ``orchard serve`` gives uvicorn: its httptools protocol plus header and body read timeouts.

uvicorn bounds only the idle time between requests (keep-alive); a client that sends its headers or its body
slowly (slowloris) would hold a connection forever. Each connection here has one deadline timer:

Requests uvicorn cannot parse get a problem+json 400 with a request id (uvicorn's own is plain text).

* headers: armed when the connection opens and after each answer, cancelled when a request's headers are
  complete; when it fires the connection is closed (with a 408 if part of a request had arrived).
* body: armed when the headers are complete, cancelled when the body is; the client has
  ``body_timeout`` seconds plus one second per ``BODY_MIN_RATE`` bytes received (large uploads on a slow link
  keep going, a trickle does not: Apache's mod_reqtimeout rule). Time the server itself holds the body back
  (reading paused because the app has not consumed it, or ``Expect: 100-continue`` not yet answered) does not
  count. When it fires: a 408 problem+json with the request id, and the connection closed.

A large body is read from the socket in steps of ``LARGE_BODY_RECV`` bytes instead of asyncio's 256 KiB once
``LARGE_BODY_AFTER`` bytes of it have come: a quarter of the event loop's steps per megabyte of upload; small
requests keep the default (no large buffer per read).

See docs/decisions/slow-clients-and-limits.md.
"""

from __future__ import annotations

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .observability import new_request_id, valid_request_id

BODY_MIN_RATE = 256 * 1024  # bytes per second of grace once the body timeout has passed
LARGE_BODY_AFTER = 1 << 20  # body bytes after which the socket is read in larger steps
LARGE_BODY_RECV = 1 << 20  # bytes per socket read then (asyncio's default: 256 KiB)


def _raw_problem(status: int, title: str, detail: str, rid: bytes) -> bytes:
    """A whole problem+json answer that closes the connection, written by the protocol itself."""
    body = orjson.dumps({"type": "about:blank", "title": title, "status": status, "detail": detail})
    return (b"HTTP/1.1 %d %s\r\ncontent-type: application/problem+json\r\nconnection: close\r\n"
            b"x-request-id: %s\r\ncontent-length: %d\r\n\r\n%s" % (status, title.encode(), rid, len(body), body))


def _timeout_response(detail: str, rid: bytes) -> bytes:
    return _raw_problem(408, "Request Timeout", detail, rid)


class TimedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with header and body read deadlines (class attributes, see ``timed_protocol``)."""

    header_timeout: float = 10.0
    body_timeout: float = 60.0

    # One timer per connection, moved lazily: arming a phase only records its due time and handler, and the timer,
    # when it fires before that time, is set again for it. A request then costs no timer of its own (scheduling
    # and cancelling two asyncio timers per request cost as much as a fifth of a single-row predict).
    _deadline = None  # the connection's TimerHandle, or None
    _due = None  # when the phase being timed runs out (loop time), or None when no phase is timed
    _on_due = None  # its handler

    # -- the timer ---------------------------------------------------------------------------------
    def _arm(self, delay: float, handler) -> None:
        due = self.loop.time() + delay
        self._due, self._on_due = due, handler
        timer = self._deadline
        if timer is not None and timer.when() > due:  # set for later than this phase allows
            timer.cancel()
            timer = None
        if timer is None:
            self._deadline = self.loop.call_at(due, self._timer_fired)

    def _disarm(self) -> None:
        self._due = None  # the timer, if set, fires later and finds nothing to do

    def _timer_fired(self) -> None:
        self._deadline = None
        due = self._due
        if due is None:
            return
        if self.loop.time() >= due:
            self._due = None
            self._on_due()
        else:
            self._deadline = self.loop.call_at(due, self._timer_fired)

    def _await_headers(self) -> None:
        self._received_at_arm = self._received
        self._arm(self.header_timeout, self._headers_timed_out)

    # -- uvicorn's protocol hooks ----------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._received = 0
        self._large_reads = False
        self._await_headers()

    def connection_lost(self, exc) -> None:
        self._due = None
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._received += len(data)
        super().data_received(data)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._body_started = self.loop.time()
        self._body_bytes = 0
        self._arm(self.body_timeout, self._body_timed_out)

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        if self._body_bytes > LARGE_BODY_AFTER and not self._large_reads:
            self._large_reads = True
            try:
                self.transport.max_size = LARGE_BODY_RECV  # asyncio's selector transport reads this many per step
            except AttributeError:  # another event loop's transport: its own read size
                pass
        super().on_body(body)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()
        self._default_reads()

    def _default_reads(self) -> None:
        if self._large_reads:
            self._large_reads = False
            getattr(self.transport, "__dict__", {}).pop("max_size", None)  # back to the class's default

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._await_headers()  # the next request's headers (uvicorn's keep-alive limits the idle time)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request it cannot parse, as problem+json with a request id like every other."""
        self._disarm()
        self.transport.write(_raw_problem(400, "Bad Request", msg, new_request_id().encode()))
        self.transport.close()

    # -- deadlines ---------------------------------------------------------------------------------
    def _headers_timed_out(self) -> None:
        if self.transport.is_closing():
            return
        if self._received > self._received_at_arm:  # part of a request came: say why it is dropped
            self.transport.write(_timeout_response(
                f"the request's headers did not arrive within {self.header_timeout:g} s "
                "(ORCHARD_HEADER_TIMEOUT_S)", new_request_id().encode()))
        self.transport.close()

    def _body_timed_out(self) -> None:
        cycle = self.cycle
        if self.transport.is_closing() or cycle is None or not cycle.more_body or cycle.response_started:
            return
        now = self.loop.time()
        if self.flow.read_paused or cycle.waiting_for_100_continue:  # the server holds the body back
            self._body_started = now - (self._body_bytes / BODY_MIN_RATE)
            self._arm(self.body_timeout, self._body_timed_out)
            return
        deadline = self._body_started + self.body_timeout + self._body_bytes / BODY_MIN_RATE
        if now < deadline:
            self._arm(deadline - now, self._body_timed_out)
            return
        rid = next((v for k, v in cycle.scope["headers"] if k == b"x-request-id"), None)
        if rid is None or not valid_request_id(rid):
            rid = new_request_id().encode()
        self.transport.write(_timeout_response(
            f"the request's body did not arrive within {self.body_timeout:g} s (ORCHARD_BODY_TIMEOUT_S; received "
            f"{self._body_bytes} bytes)", rid))
        cycle.response_started = cycle.response_complete = True  # the app's own answer, if any, is dropped
        cycle.disconnected = True
        cycle.message_event.set()  # the app waiting for the body sees the client gone
        self.transport.close()


def timed_protocol(header_timeout: float, body_timeout: float) -> type[TimedHttpToolsProtocol]:
    """The protocol class for ``uvicorn.run(..., http=...)`` with these timeouts."""
    return type("OrchardHttpProtocol", (TimedHttpToolsProtocol,),
                {"header_timeout": header_timeout, "body_timeout": body_timeout})
