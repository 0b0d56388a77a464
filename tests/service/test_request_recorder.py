"""The request recorder (service/request_recorder.py): access lines byte for byte as the standard formatter writes
them, written straight or through ``logging`` as the setup requires, none lost or reordered, and the request
metrics counted from the same queue."""

import logging
import threading
import time

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from service import observability as obs
from service.observability import JsonFormatter
from service.request_recorder import RequestRecorder


@pytest.fixture
def orchard_logging(tmp_path, monkeypatch, request):
    """Orchard's logging setup (its buffered handler the root's only one, access lines allowed to bypass
    ``logging``) writing to tmp_path/access.log; the root logger is restored afterwards. Yields
    (observability module, handler, formatter, log path); ``request.param`` is the flush interval."""
    import os

    path = tmp_path / "access.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    handler = obs.BufferedStreamHandler(fd, interval=request.param)
    fmt = JsonFormatter()
    handler.setFormatter(fmt)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    monkeypatch.setattr(RequestRecorder, "_sink", None)
    monkeypatch.setattr(RequestRecorder, "_direct", None)
    RequestRecorder.use_sink(handler, fmt)
    try:
        yield obs, handler, fmt, path
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        handler.close()
        os.close(fd)


@pytest.mark.parametrize("orchard_logging", [0.001], indirect=True)
def test_direct_access_lines_are_json_in_order_and_none_is_lost(orchard_logging):
    """The access log's fast sink (RequestRecorder -> BufferedStreamHandler.write_line): every line is one
    JSON object with the request's fields, and lines written from several threads while the flusher runs
    are all written, each exactly once."""
    obs, handler, _, path = orchard_logging
    logging.getLogger().handlers[:] = [handler]  # without pytest's own handlers (added for the test's run)
    assert RequestRecorder._direct is not None  # the setup is Orchard's: lines bypass logging
    through_logging = []
    handler.emit = through_logging.append
    recorder = RequestRecorder(None, True)
    scope = {"method": "POST", "path": '/v1/models/m"1/predict', "client": ("10.0.0.7", 1)}

    def work(t):
        for i in range(3000):
            recorder.record(scope, "/v1/models/{model_id}/predict", 200 + t, 1_250_000, i, f"rid-{t}-{i}".encode())

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    recorder.drain()  # what the flusher's tick does (this handler was built without configure_logging)
    handler.flush()
    assert not through_logging  # every line took the direct path
    docs = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert len(docs) == 12000
    assert {d["request_id"] for d in docs} == {f"rid-{t}-{i}" for t in range(4) for i in range(3000)}
    d = docs[0]
    assert d["path"] == '/v1/models/m"1/predict' and d["msg"].startswith('POST /v1/models/m"1/predict 20')
    assert d["logger"] == "orchard.access" and d["level"] == "info" and d["duration_ms"] == 1.25
    assert d["client"] == "10.0.0.7" and d["route"] == "/v1/models/{model_id}/predict"
    assert len(d["ts"]) == 24 and d["ts"].endswith("Z") and d["ts"][19] == "."
    for t in range(4):  # each thread's lines stay in the order it wrote them
        mine = [int(x["request_id"].rsplit("-", 1)[1]) for x in docs if x["request_id"].startswith(f"rid-{t}-")]
        assert mine == sorted(mine)


@pytest.mark.parametrize("orchard_logging", [3600], indirect=True)
def test_access_lines_go_through_logging_once_the_setup_is_not_orchards(orchard_logging):
    """A handler added to the root (a log shipper, pytest's caplog) sees access lines at once; a setup replaced
    wholesale is noticed at the flusher's next tick (refresh_access_sink)."""
    obs, handler, fmt, path = orchard_logging
    seen = []

    class Collect(logging.Handler):
        def emit(self, record):
            seen.append(fmt.format(record))

    root = logging.getLogger()
    root.handlers[:] = [handler]  # without pytest's own handlers (added for the test's run)
    recorder = RequestRecorder(None, True)
    scope = {"method": "GET", "path": "/x", "client": None}
    recorder.record(scope, "/x", 200, 1_000_000, 1, b"direct-1")
    extra = Collect()
    root.addHandler(extra)  # noticed at once
    recorder.record(scope, "/x", 200, 1_000_000, 1, b"both-2")
    root.handlers[:] = [extra]  # replaced: the next tick turns the direct path off
    RequestRecorder.refresh_sink()
    assert RequestRecorder._direct is None
    recorder.record(scope, "/x", 200, 1_000_000, 1, b"logging-3")
    handler.flush()
    direct = [orjson.loads(x)["request_id"] for x in path.read_bytes().splitlines()]
    assert direct == ["direct-1", "both-2"]  # the second through logging into Orchard's handler too
    assert [orjson.loads(x)["request_id"] for x in seen] == ["both-2", "logging-3"]


@pytest.mark.parametrize("orchard_logging", [3600], indirect=True)
def test_lines_queued_before_the_setup_changed_go_through_logging_at_the_drain(orchard_logging):
    """Lines queued while the setup was Orchard's, drained after it stopped being so, go through ``logging``
    (in order, with their own fields) and are still counted."""
    obs, handler, fmt, path = orchard_logging
    seen = []

    class Collect(logging.Handler):
        def emit(self, record):
            seen.append(orjson.loads(fmt.format(record)))

    root = logging.getLogger()
    root.handlers[:] = [handler]  # without pytest's own handlers (added for the test's run)
    metrics = obs.Metrics(lambda: None)
    recorder = RequestRecorder(metrics, True)
    for i, ns in enumerate((1_250_500, 20_000_000)):
        recorder.record({"method": "GET", "path": f"/q/{i}", "client": ("10.0.0.9", 1)}, "/q/{n}", 200, ns, 5,
                        f"q{i}".encode())
    root.handlers[:] = [Collect()]
    RequestRecorder.refresh_sink()  # the flusher's tick: the setup is no longer Orchard's
    recorder.drain()
    handler.flush()
    assert not path.read_bytes()  # nothing went the direct way
    assert [(d["request_id"], d["path"], d["duration_ms"], d["client"]) for d in seen] == [
        ("q0", "/q/0", 1.251, "10.0.0.9"), ("q1", "/q/1", 20.0, "10.0.0.9")]
    assert metrics.stats.series[("GET", "/q/{n}")][2] == {200: 2}


@pytest.mark.parametrize("orchard_logging", [0.05], indirect=True)
def test_queued_access_lines_are_written_by_the_flusher_tick(orchard_logging):
    """A request's line is queued (no formatting on the request path) and the flusher's next tick writes it,
    with no scrape and no further request."""
    obs, handler, _, path = orchard_logging
    logging.getLogger().handlers[:] = [handler]  # without pytest's own handlers (added for the test's run)
    handler.on_tick = obs.tick  # as configure_logging sets it
    recorder = RequestRecorder(None, True)
    recorder.record({"method": "GET", "path": "/health/live", "client": None}, "/health/live", 200, 500_000, 2,
                    b"tick-1")
    assert not path.read_bytes()  # still queued
    deadline = time.monotonic() + 5
    while not path.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)
    d = orjson.loads(path.read_bytes())
    assert d["request_id"] == "tick-1" and d["client"] == "" and d["duration_ms"] == 0.5 and d["bytes"] == 2


@pytest.mark.parametrize("orchard_logging", [3600], indirect=True)
def test_access_lines_joined_from_reused_pieces_carry_each_requests_own_fields(orchard_logging, monkeypatch):
    """Lines are joined from texts made once and reused (per route and status, millisecond, microsecond, size,
    client): every field must still be the request's own, across cache misses, hits, evictions and limits."""
    obs, handler, _, path = orchard_logging
    logging.getLogger().handlers[:] = [handler]  # without pytest's own handlers (added for the test's run)
    monkeypatch.setattr(RequestRecorder, "TEXTS_MAX", 3)  # sizes and clients evicted during the test
    t0 = 1764070000 * 10**9  # ns since the epoch
    stamps = [t0 + us * 1000 for us in (500, 900, 1_200, 1_999_600, 1_999_900, 2_000_100, 300, 86_400_250_000,
                                         86_400_250_000)]
    clock = iter(stamps)
    monkeypatch.setattr(time, "time_ns", lambda: next(clock))
    recorder = RequestRecorder(None, True)  # binds time.time_ns (the fake) for its requests' timestamps
    cases = [  # status, elapsed ns, bytes, client, expected duration_ms
        (200, 1_000, 29, ("127.0.0.1", 1), 0.001),
        (404, 499, 0, ("::1", 2), 0.0),
        (200, 1_250_500, 29, None, 1.251),  # to the microsecond, half up
        (200, 1_250_499, 7, ("127.0.0.1", 3), 1.25),
        (500, 19_999_400, 8, ('a"b', 4), 19.999),  # the last duration text kept
        (200, 20_000_000, 9, ("10.0.0.1", 5), 20.0),  # made each time
        (200, 3_600_000_000_000, 29, ("127.0.0.1", 6), 3_600_000.0),
        (200, 1_000, 29, ("127.0.0.1", 7), 0.001),  # all texts reused
        (201, 1_000, 10, ["10.0.0.2", 9], 0.001),  # a server that gives the client as a list
    ]
    for i, (status, ns, nbytes, client, _) in enumerate(cases):
        recorder.record({"method": "PUT", "path": f"/p/{i % 2}", "client": client}, "/p/{n}", status, ns, nbytes,
                        f"r{i}".encode())
    recorder.drain()
    handler.flush()
    docs = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert len(docs) == len(cases)
    for i, (d, (status, _, nbytes, client, ms), now) in enumerate(zip(docs, cases, stamps, strict=True)):
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now // 10**9)) + f".{now // 10**6 % 1000:03d}Z"
        assert d == {"ts": ts, "level": "info", "logger": "orchard.access", "msg": f"PUT /p/{i % 2} {status}",
                     "method": "PUT", "path": f"/p/{i % 2}", "route": "/p/{n}", "status": status,
                     "duration_ms": ms, "bytes": nbytes, "client": client[0] if client else "", "request_id": f"r{i}"}
        assert list(d) == ["ts", "level", "logger", "msg", "method", "path", "route", "status", "duration_ms",
                           "bytes", "client", "request_id"]
    # the texts that come from clients stay within their bound (emptied when full, never grown past it)
    clock = iter([t0 + k * 1_000_000 for k in range(8)])  # the fake clock read on: a new millisecond each
    for k in range(8):  # new paths, sizes and clients, one request at a time
        recorder.record({"method": "GET", "path": f"/q/{k}", "client": (f"10.1.0.{k}", 1)}, "/q/{n}", 200, 1_000,
                        100 + k, f"s{k}".encode())
        recorder.drain()
        for texts in (recorder._entries, recorder._stamps, recorder._sizes, recorder._clients):
            assert 0 < len(texts) <= 3, texts


def test_metrics_only_recorder_counts_at_scrape_and_writes_no_line(tmp_path, capfd):
    """With the access log off, requests are queued for the metrics alone and counted before each scrape."""
    def not_started():
        raise AttributeError("runtime")  # what app.state raises before the app's start-up

    metrics = obs.Metrics(not_started)
    recorder = RequestRecorder(metrics, False)
    scope = {"method": "POST", "path": "/v1/models/m1/predict", "client": ("10.0.0.7", 1)}
    for status, ns in ((200, 500_000), (200, 3_000_000), (422, 200_000_000)):  # 0.5 ms: on the bucket's bound (le)
        recorder.record(scope, "/v1/models/{model_id}/predict", status, ns, 10, b"rid")
    text = metrics.exposition().decode()
    fams = {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}
    route = (("method", "POST"), ("route", "/v1/models/{model_id}/predict"))
    assert fams[("orchard_http_requests_total", (*route[:1], route[1], ("status", "200")))] == 2
    assert fams[("orchard_http_requests_total", (*route[:1], route[1], ("status", "422")))] == 1
    assert fams[("orchard_http_request_duration_seconds_bucket", (("le", "0.0005"), *route))] == 1
    assert fams[("orchard_http_request_duration_seconds_bucket", (("le", "0.005"), *route))] == 2
    assert fams[("orchard_http_request_duration_seconds_bucket", (("le", "0.25"), *route))] == 3
    assert fams[("orchard_http_request_duration_seconds_sum", route)] == pytest.approx(0.2035)
    for ns in (499_499, 500_500, 10_000_000_000, 40_000_000_000):  # one series (the batch's fast path)
        recorder.record(scope, "/v1/models/{model_id}/predict", 200, ns, 10, b"rid")
    text = metrics.exposition().decode()
    fams = {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}
    assert fams[("orchard_http_requests_total", (*route[:1], route[1], ("status", "200")))] == 6
    assert fams[("orchard_http_request_duration_seconds_bucket", (("le", "0.0005"), *route))] == 2
    assert fams[("orchard_http_request_duration_seconds_bucket", (("le", "0.001"), *route))] == 3
    assert fams[("orchard_http_request_duration_seconds_bucket", (("le", "10.0"), *route))] == 6
    assert fams[("orchard_http_request_duration_seconds_bucket", (("le", "30.0"), *route))] == 6
    assert fams[("orchard_http_request_duration_seconds_bucket", (("le", "+Inf"), *route))] == 7
    assert fams[("orchard_http_request_duration_seconds_sum", route)] == pytest.approx(50.2045)
    assert "orchard.access" not in capfd.readouterr().err


@pytest.mark.parametrize("orchard_logging", [3600], indirect=True)
def test_direct_access_lines_equal_the_standard_formatters_byte_for_byte(orchard_logging, monkeypatch):
    """Each line the recorder joins from its kept texts is exactly what ``JsonFormatter`` writes for the same
    request logged through ``logging`` (a record made here, with the access log's message and fields)."""
    obs, handler, fmt, path = orchard_logging
    logging.getLogger().handlers[:] = [handler]  # without pytest's own handlers (added for the test's run)
    t0 = 1764070000 * 10**9
    ends = [t0 + k * 333_333_337 for k in range(12)]  # request end times, ns since the epoch
    clock = iter(ends)
    monkeypatch.setattr(time, "time_ns", lambda: next(clock))
    recorder = RequestRecorder(obs.Metrics(lambda: None), True)
    cases = [  # method, path, client, route, status, elapsed ns, bytes, request id
        ("POST", "/v1/models/m1/predict", ("127.0.0.1", 5), "/v1/models/{model_id}/predict", 200, 31_400, 29, b"a1"),
        ("GET", "/health/live", None, "/health/live", 200, 499, 15, b"0123456789abcdef0123456789abcdef"),
        ("GET", '/q/"quoted"\\/é', ["::1", 2], "<unmatched>", 404, 1_250_500, 120, b"r.2:x/y+z=w@-"),
        ("DELETE", "/v1/models/m2", ('a"b', 1), "/v1/models/{model_id}", 204, 19_999_499, 0, b"r3"),
        ("PUT", "/p", ("10.0.0.1", 9), "/p", 500, 20_000_000, 7, b"r4"),
        ("POST", "/v2/models/m/infer", ("10.0.0.1", 9), "/v2/models/{model_name}/infer", 413, 3_600_000_000_000,
         95, b"r5"),
        ("POST", "/v1/models/m1/predict", ("127.0.0.1", 5), "/v1/models/{model_id}/predict", 200, 31_400, 29, b"a6"),
    ]
    for method, p, client, route, status, ns, nbytes, rid in cases:
        recorder.record({"method": method, "path": p, "client": client}, route, status, ns, nbytes, rid)
    recorder.drain()
    handler.flush()
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == len(cases)
    access = logging.getLogger("orchard.access")
    for line, (method, p, client, route, status, ns, nbytes, rid), end in zip(lines, cases, ends, strict=False):
        record = access.makeRecord("orchard.access", logging.INFO, "", 0, "%s %s %d", (method, p, status), None,
                                   extra={"request_id": rid.decode(), "fields": {
                                       "method": method, "path": p, "route": route, "status": status,
                                       "duration_ms": (ns + 500) // 1000 / 1000,  # to the microsecond, half up
                                       "bytes": nbytes, "client": client[0] if client else ""}})
        record.created = (end // 10**6 + 0.5) / 1000  # within the millisecond the request ended
        assert line == (fmt.format(record) + "\n").encode(), (line, fmt.format(record))
