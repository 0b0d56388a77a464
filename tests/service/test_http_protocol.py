"""The read deadlines of `orchard serve`'s HTTP protocol (service/server.py), driven step by step: a real event
loop runs the ASGI app, a stand-in transport records what the protocol writes, and the sweep's look at a
connection (``check_deadline``) is called at chosen loop times. tests/integration/test_slow_clients.py runs the
same limits against a real server and 100 slow connections."""

import asyncio

import pytest
from uvicorn.config import Config
from uvicorn.lifespan.off import LifespanOff
from uvicorn.server import ServerState

from service.server import BODY_MIN_RATE, FULL_READ, LARGE_BODY_RECV, timed_protocol

HEADER_TIMEOUT, BODY_TIMEOUT, SEND_TIMEOUT = 10.0, 60.0, 30.0


class Transport:
    """Enough of an asyncio transport for uvicorn's protocol: what is written, closing, pausing."""

    def __init__(self):
        self.written = b""
        self.closed = False
        self.paused = False
        self.aborted = False
        self.buffered = 0  # answer bytes the client has not taken yet

    def get_write_buffer_size(self):
        return self.buffered

    def abort(self):
        self.aborted = self.closed = True

    def get_extra_info(self, name, default=None):
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def write(self, data):
        self.written += data

    def close(self):
        self.closed = True

    def is_closing(self):
        return self.closed

    def pause_reading(self):
        self.paused = True

    def resume_reading(self):
        self.paused = False

    def set_write_buffer_limits(self, *args, **kwargs):
        pass


class App:
    """Answers ``ok`` after reading the whole body; ``read_body=False``: answers without reading it (the body
    stays held back), ``hold``: waits for this event before answering."""

    def __init__(self, read_body=True, hold=None, holds=None):
        self.read_body, self.hold, self.holds = read_body, hold, holds or {}
        self.disconnects = 0  # http.disconnect messages the app received

    async def __call__(self, scope, receive, send):
        if self.read_body:
            more = True
            while more:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    self.disconnects += 1
                    return
                more = msg.get("more_body", False)
        hold = self.holds.get(scope["path"], self.hold)  # ``holds``: an event per path
        if hold is not None:
            await hold.wait()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})


class EchoPath(App):
    """Answers with the request's path (its bytes), after reading the body."""

    async def __call__(self, scope, receive, send):
        while (await receive()).get("more_body", False):
            pass
        path = scope["path"].encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(path))]})
        await send({"type": "http.response.body", "body": path})


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def connect(loop, app):
    config = Config(app=app, lifespan="off", log_level="warning")
    config.load()
    cls = timed_protocol(HEADER_TIMEOUT, BODY_TIMEOUT, SEND_TIMEOUT)
    protocol = cls(config=config, server_state=ServerState(), app_state=LifespanOff(config).state, _loop=loop)
    transport = Transport()
    protocol.connection_made(transport)
    return protocol, transport


def settle(loop):
    """Run the app's pending steps."""
    for _ in range(20):
        loop.run_until_complete(asyncio.sleep(0))


def request(path=b"/", body=b"", headers=b"", length=None):
    n = len(body) if length is None else length
    return (b"POST " + path + b" HTTP/1.1\r\nhost: localhost\r\ncontent-length: %d\r\n" % n + headers + b"\r\n"
            + body)


def test_an_idle_connection_is_closed_at_the_header_timeout_without_an_answer(loop):
    protocol, transport = connect(loop, App())
    t0 = protocol._since
    protocol.check_deadline(t0 + HEADER_TIMEOUT - 0.1)
    assert not transport.closed
    protocol.check_deadline(t0 + HEADER_TIMEOUT)
    assert transport.closed and transport.written == b""


def test_partial_headers_get_a_408_naming_the_limit(loop):
    protocol, transport = connect(loop, App())
    t0 = protocol._since
    protocol.data_received(b"GET / HTTP/1.1\r\nhost: loc")
    protocol.check_deadline(t0 + 1)
    assert not transport.closed
    protocol.check_deadline(t0 + HEADER_TIMEOUT)
    assert transport.closed and transport.written.startswith(b"HTTP/1.1 408 ")
    assert b"ORCHARD_HEADER_TIMEOUT_S" in transport.written and b"application/problem+json" in transport.written


def test_the_header_limit_starts_again_after_each_answer(loop):
    protocol, transport = connect(loop, App())
    t0 = protocol._since
    for i in range(3):  # each request well within the limit, the connection older than it
        protocol.check_deadline(t0 + 4 * i)
        protocol.data_received(request(body=b"x"))
        settle(loop)
        assert transport.written.endswith(b"ok") and not transport.closed
        transport.written = b""
    t1 = t0 + 12
    protocol.check_deadline(t1)  # the sweep sees the connection waiting after the third answer
    protocol.data_received(b"POST / HTTP/1.1\r\nhos")  # a fourth request that never ends its headers
    protocol.check_deadline(t1 + HEADER_TIMEOUT - 0.1)
    assert not transport.closed
    protocol.check_deadline(t1 + HEADER_TIMEOUT)
    assert transport.closed and transport.written.startswith(b"HTTP/1.1 408 ")


def test_an_idle_connection_after_an_answer_is_closed_at_the_keep_alive_timeout_with_no_timer_per_answer(loop):
    protocol, transport = connect(loop, App())
    assert protocol.timeout_keep_alive == 5
    protocol.data_received(request(body=b"x"))
    settle(loop)
    assert transport.written.endswith(b"ok")
    assert protocol.timeout_keep_alive_task is None  # uvicorn's own timer is not armed after the answer
    t = protocol.loop.time()
    protocol.check_deadline(t)
    protocol.check_deadline(t + 4.9)
    assert not transport.closed
    written = transport.written
    protocol.check_deadline(t + 5)
    assert transport.closed and transport.written == written  # closed silently


def test_pipelined_requests_are_answered_in_order(loop):
    protocol, transport = connect(loop, EchoPath())
    protocol.data_received(request(path=b"/a", body=b"1") + request(path=b"/b", body=b"2") + request(body=b"3"))
    settle(loop)
    assert transport.written.count(b"HTTP/1.1 200 OK") == 3 and not transport.closed
    answers = [part.rsplit(b"\r\n\r\n", 1)[-1] for part in transport.written.split(b"HTTP/1.1 ")[1:]]
    assert answers == [b"/a", b"/b", b"/"]
    assert protocol.server_state.total_requests == 3


def test_part_of_a_request_sent_right_after_an_answer_gets_the_header_limit_and_a_408(loop):
    """The next request's first bytes arrive before the sweep's first look after the answer: the connection is
    not idle (no silent close at the keep-alive timeout), its headers get the header limit."""
    protocol, transport = connect(loop, App())
    protocol.data_received(request(body=b"x"))
    settle(loop)
    assert transport.written.endswith(b"ok")
    protocol.data_received(b"POST / HTTP/1.1\r\nhos")  # before any look by the sweep
    t = protocol.loop.time()
    protocol.check_deadline(t)
    protocol.check_deadline(t + protocol.timeout_keep_alive + 0.5)
    assert not transport.closed
    protocol.check_deadline(t + HEADER_TIMEOUT)
    assert transport.closed and transport.written.count(b"HTTP/1.1 408 ") == 1


def test_a_pipelined_request_queued_behind_a_long_answer_is_not_timed_until_it_starts(loop):
    """A slow body queued behind a request the app still answers gets no 408 written into that answer; its body
    clock starts when it becomes the current request."""
    first, second = asyncio.Event(), asyncio.Event()
    app = App(holds={"/x": first, "/y": second})
    protocol, transport = connect(loop, app)
    protocol.data_received(request(path=b"/x", body=b"1") + request(path=b"/y", body=b"2")
                           + request(path=b"/z", body=b"ab", length=1000))
    settle(loop)
    first.set()  # /x answered: /y starts (and holds), /z waits in the queue with most of its body missing
    settle(loop)
    assert transport.written.count(b"HTTP/1.1 200 OK") == 1
    t = protocol.loop.time()
    for s in range(0, 600, 1):
        protocol.check_deadline(t + s)
    assert not transport.closed and transport.written.count(b"HTTP/1.1") == 1
    second.set()  # /y answered: /z is the app's now, its body clock starts at the next look
    settle(loop)
    assert transport.written.count(b"HTTP/1.1 200 OK") == 2
    protocol.check_deadline(t + 600)
    protocol.check_deadline(t + 600 + BODY_TIMEOUT - 1)
    assert not transport.closed
    protocol.check_deadline(t + 600 + BODY_TIMEOUT)
    assert transport.closed and transport.written.count(b"HTTP/1.1 408 ") == 1


def test_reading_resumes_after_an_answer_given_before_the_body_was_read(loop):
    """An answer sent without reading a large body (e.g. a 401 or 413): the rest is read and dropped, and the
    connection's next request is answered."""
    protocol, transport = connect(loop, App(read_body=False))
    protocol.data_received(request(body=b"x" * 100_000, length=200_000))  # over uvicorn's 64 KiB: reading paused
    assert transport.paused or protocol.cycle.response_complete
    settle(loop)
    assert transport.written.endswith(b"ok") and not transport.paused
    protocol.data_received(b"x" * 100_000 + request(body=b"y"))
    settle(loop)
    assert transport.written.count(b"HTTP/1.1 200 OK") == 2 and not transport.closed


def test_a_trickled_body_gets_a_408_with_its_request_id_and_the_app_sees_a_disconnect(loop):
    app = App()
    protocol, transport = connect(loop, app)
    protocol.data_received(request(body=b"abc", length=100_000, headers=b"x-request-id: trickle-1\r\n"))
    settle(loop)
    cycle = protocol.cycle
    t = protocol.loop.time()
    protocol.check_deadline(t)  # the body phase is seen
    for s in range(1, 60):  # a byte a second: no real grace
        protocol.data_received(b"x")
        settle(loop)  # the app has read it and waits for more
        protocol.check_deadline(t + s)
    assert not transport.closed
    protocol.check_deadline(t + BODY_TIMEOUT + 1)
    assert transport.closed and transport.written.startswith(b"HTTP/1.1 408 ")
    assert b"x-request-id: trickle-1" in transport.written and b"ORCHARD_BODY_TIMEOUT_S" in transport.written
    assert cycle.disconnected and cycle.response_complete
    settle(loop)
    assert app.disconnects == 1  # the app waiting for the body was told the client is gone
    assert transport.written.count(b"HTTP/1.1") == 1


def test_a_large_body_on_a_slow_steady_link_gets_a_second_per_256_kib(loop):
    protocol, transport = connect(loop, App())
    protocol.data_received(request(length=20 * BODY_MIN_RATE + 10))
    settle(loop)
    t = protocol.loop.time()
    protocol.check_deadline(t)
    chunk = b"x" * (BODY_MIN_RATE // 4)
    for _ in range(4 * 20):  # 20 x 256 KiB: 20 s of grace on top of the limit
        protocol.data_received(chunk)
        settle(loop)
    protocol.check_deadline(t + BODY_TIMEOUT + 19)
    assert not transport.closed
    protocol.check_deadline(t + BODY_TIMEOUT + 20.5)
    assert transport.closed and transport.written.startswith(b"HTTP/1.1 408 ")


@pytest.mark.parametrize("held", ["expect-100-continue", "paused-reading"])
def test_time_the_server_holds_the_body_back_does_not_count(loop, held):
    hold = asyncio.Event()
    protocol, transport = connect(loop, App(read_body=False, hold=hold))
    extra = b"expect: 100-continue\r\n" if held == "expect-100-continue" else b""
    protocol.data_received(request(body=b"ab", length=1000, headers=extra))
    settle(loop)
    if held == "paused-reading":
        protocol.flow.pause_reading()
    t = protocol.loop.time()
    for s in range(0, 600, 1):  # ten minutes of checks while the server holds the body back
        protocol.check_deadline(t + s)
    assert not transport.closed
    if held == "paused-reading":
        protocol.flow.resume_reading()
    else:  # what uvicorn does when the app first asks for the body: 100 Continue is sent
        protocol.cycle.waiting_for_100_continue = False
    protocol.check_deadline(t + 600)  # the body's clock starts now
    protocol.check_deadline(t + 600 + BODY_TIMEOUT - 1)
    assert not transport.closed
    protocol.check_deadline(t + 600 + BODY_TIMEOUT)
    assert transport.closed and transport.written.startswith(b"HTTP/1.1 408 ")


def test_no_limit_while_the_app_has_the_request(loop):
    hold = asyncio.Event()
    protocol, transport = connect(loop, App(hold=hold))
    protocol.data_received(request(body=b"abc"))
    settle(loop)
    t = protocol.loop.time()
    for s in (0, 100, 10_000):
        protocol.check_deadline(t + s)
    assert not transport.closed
    hold.set()
    settle(loop)
    assert transport.written.endswith(b"ok") and not transport.closed


def test_one_sweep_per_server_checks_every_connection_and_stops_with_the_last(loop):
    first, t1 = connect(loop, App())
    config = first.config
    second = type(first)(config=config, server_state=first.server_state, app_state={}, _loop=loop)
    t2 = Transport()
    second.connection_made(t2)
    from service.server import _sweeps

    sweep = _sweeps[first.server_state]
    assert sweep.connections is first.connections and len(sweep.connections) == 2
    assert sweep.interval == 5 / 8  # an eighth of the shortest limit (uvicorn's keep-alive timeout, 5 s)
    looked = []
    for p in (first, second):
        p.check_deadline = looked.append
    sweep.tick()
    assert len(looked) == 2 and sweep._handle is not None  # looked at both, and set again
    first.connection_lost(None)
    second.connection_lost(None)
    sweep._handle.cancel()
    sweep._handle = None
    sweep.tick()
    assert sweep._handle is None  # no connection left: the sweep stops (the next connection starts it)


def test_a_malformed_request_gets_a_problem_with_a_request_id(loop):
    protocol, transport = connect(loop, App())
    protocol.data_received(b"NOT HTTP AT ALL\r\n\r\n")
    assert transport.closed and transport.written.startswith(b"HTTP/1.1 400 ")
    assert b"application/problem+json" in transport.written and b"x-request-id: " in transport.written


def test_reads_grow_while_a_large_body_streams_and_shrink_after(loop):
    class SelectorTransport(Transport):
        max_size = 256 * 1024  # asyncio's selector transport reads this many bytes per step

    protocol, _ = connect(loop, App())
    transport = SelectorTransport()
    protocol.connection_made(transport)
    protocol.data_received(request(length=3 * FULL_READ + 10))
    assert transport.max_size == 256 * 1024
    protocol.data_received(b"x" * FULL_READ)  # a read that filled the buffer: more is waiting
    assert transport.max_size == LARGE_BODY_RECV
    protocol.data_received(b"x" * FULL_READ)
    assert transport.max_size == LARGE_BODY_RECV
    protocol.data_received(b"x" * 1000)  # a shorter read: back to the default
    assert "max_size" not in transport.__dict__ and transport.max_size == 256 * 1024


def test_a_failing_check_of_one_connection_leaves_the_others_checked_and_the_sweep_running(loop, caplog):
    first, _ = connect(loop, App())
    second = type(first)(config=first.config, server_state=first.server_state, app_state={}, _loop=loop)
    second.connection_made(Transport())
    from service.server import _sweeps

    sweep = _sweeps[first.server_state]
    looked = []

    def broken(now):
        raise RuntimeError("boom")

    first.check_deadline, second.check_deadline = broken, looked.append
    if sweep._handle is not None:
        sweep._handle.cancel()
        sweep._handle = None
    sweep.tick()
    assert len(looked) == 1 and sweep._handle is not None
    assert "read-limit check of a connection failed" in caplog.text
    sweep._handle.cancel()


def test_a_client_that_takes_none_of_its_answer_is_aborted_at_the_send_timeout(loop):
    protocol, transport = connect(loop, App(hold=asyncio.Event()))
    protocol.data_received(request(body=b"x"))
    settle(loop)  # the app has the request and is answering
    transport.buffered = 1_000_000
    protocol.flow.pause_writing()  # the transport's buffer is full: the app's next send waits
    t = protocol.loop.time()
    protocol.check_deadline(t)
    transport.buffered = 900_000  # the client took some: the clock starts again
    protocol.check_deadline(t + SEND_TIMEOUT - 1)
    protocol.check_deadline(t + 2 * SEND_TIMEOUT - 1.1)
    assert not transport.closed
    protocol.check_deadline(t + 2 * SEND_TIMEOUT - 1)
    assert transport.aborted


def test_a_closed_connection_whose_last_bytes_are_never_taken_is_aborted(loop):
    protocol, transport = connect(loop, App())
    protocol.data_received(request(body=b"x"))
    settle(loop)
    transport.buffered, transport.closed = 5000, True  # closed gracefully: waits for its bytes to be taken
    t = protocol.loop.time()
    protocol.check_deadline(t)
    protocol.check_deadline(t + SEND_TIMEOUT - 0.1)
    assert not transport.aborted
    protocol.check_deadline(t + SEND_TIMEOUT)
    assert transport.aborted


def test_a_slow_but_steady_reader_is_not_cut_off(loop):
    protocol, transport = connect(loop, App(hold=asyncio.Event()))
    protocol.data_received(request(body=b"x"))
    settle(loop)
    transport.buffered = 10_000_000
    protocol.flow.pause_writing()
    t = protocol.loop.time()
    for s in range(0, 600, 5):  # ten minutes taking a few bytes every 5 s
        transport.buffered -= 100
        protocol.check_deadline(t + s)
    protocol.flow.resume_writing()  # below the low-water mark: not waiting on the client any more
    protocol.check_deadline(t + 600)
    transport.buffered = 10_000_000
    protocol.flow.pause_writing()  # full again later: timed from its first look, not from the previous wait
    protocol.check_deadline(t + 700)
    protocol.check_deadline(t + 700 + SEND_TIMEOUT - 1)
    assert not transport.closed
