"""Metrics, request ids and JSON logs."""

import logging

import orjson
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from service.app import create_app
from service.observability import JsonFormatter, request_id_var
from service.settings import Settings
from service.storage.metadata import MetadataStore, utcnow
from tests.service.conftest import iris_csv, train, upload_csv


def scrape(client) -> dict:
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    out = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
def trained(client):
    ds = upload_csv(client, iris_csv(), name="iris").json()["id"]
    mid, job = train(client, algorithm="logistic_regression", dataset_id=ds, target="species", name="iris-lr")
    assert job["status"] == "succeeded"
    return mid


def test_request_id_is_echoed_or_generated(client):
    r = client.get("/health/live", headers={"X-Request-ID": "client-id-42"})
    assert r.headers["x-request-id"] == "client-id-42"
    a, b = client.get("/health/live").headers["x-request-id"], client.get("/health/live").headers["x-request-id"]
    assert a != b and len(a) == 32
    bad = client.get("/health/live", headers={"X-Request-ID": "bad id with spaces\t"}).headers["x-request-id"]
    assert bad != "bad id with spaces\t" and len(bad) == 32
    r = client.get("/v1/models/nope")  # errors carry it too
    assert r.status_code == 404 and len(r.headers["x-request-id"]) == 32


def test_metrics_count_routes_predict_fast_path_rows_jobs_and_cache(client, trained):
    mid = trained
    rows = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]
    for _ in range(3):
        assert client.post(f"/v1/models/{mid}/predict", json={"rows": rows}).status_code == 200
    assert client.post(f"/v1/models/{mid}/predict", json={"rows": [[1.0]]}).status_code == 422
    assert client.post("/v1/models/mdl_nope/predict", json={"rows": rows}).status_code == 404
    r = client.post("/v2/models/iris-lr/infer",
                    json={"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP64", "data": sum(rows, [])}]})
    assert r.status_code == 200
    client.get("/no/such/route")
    m = scrape(client)
    route = "/v1/models/{model_id}/predict"
    assert m[("orchard_http_requests_total", (("method", "POST"), ("route", route), ("status", "200")))] == 3
    assert m[("orchard_http_requests_total", (("method", "POST"), ("route", route), ("status", "422")))] == 1
    assert m[("orchard_http_requests_total", (("method", "POST"), ("route", route), ("status", "404")))] == 1
    assert m[("orchard_http_requests_total", (("method", "POST"), ("route", "/v2/models/{model_name}/infer"),
                                              ("status", "200")))] == 1
    assert m[("orchard_http_requests_total", (("method", "GET"), ("route", "<unmatched>"), ("status", "404")))] == 1
    assert m[("orchard_http_request_duration_seconds_count", (("method", "POST"), ("route", route)))] == 5
    assert m[("orchard_predicted_rows_total", (("protocol", "v1"),))] == 6
    assert m[("orchard_predicted_rows_total", (("protocol", "v2"),))] == 2
    assert m[("orchard_jobs", (("kind", "train"), ("status", "succeeded")))] == 1
    assert m[("orchard_queue_depth", ())] == 0
    assert m[("orchard_model_cache_misses_total", ())] >= 1 and m[("orchard_model_cache_hits_total", ())] >= 3
    assert m[("orchard_model_cache_models", ())] == 1 and m[("orchard_model_cache_size_bytes", ())] > 0


def test_job_metrics_come_from_the_store_so_other_processes_count(client, settings):
    """Jobs recorded by another process (another store connection) appear at the next scrape."""
    other = MetadataStore(settings.resolved_database_url())
    for i, status in enumerate(["queued", "queued", "running"]):
        other.insert_job({"id": f"job_other{i}", "kind": "tune", "status": status, "progress": 0.0, "message": "",
                          "created_at": utcnow(), "payload": {}})
    other.dispose()
    m = scrape(client)
    assert m[("orchard_jobs", (("kind", "tune"), ("status", "queued")))] == 2
    assert m[("orchard_jobs", (("kind", "tune"), ("status", "running")))] == 1
    assert m[("orchard_queue_depth", ())] == 2


def test_metrics_and_access_log_can_be_switched_off(tmp_path, caplog):
    s = Settings(data_dir=tmp_path / "d", workers=0, secret_key="k", metrics=False, access_log=False)
    with TestClient(create_app(s)) as c, caplog.at_level(logging.INFO, logger="orchard.access"):
        r = c.get("/metrics")
        assert r.status_code == 404 and "ORCHARD_METRICS=false" in r.json()["detail"]
        assert r.headers["x-request-id"]  # request ids are not part of the switch
    assert not [rec for rec in caplog.records if rec.name == "orchard.access"]


def test_access_log_lines_are_json_with_the_request_id(client, caplog):
    with caplog.at_level(logging.INFO, logger="orchard.access"):
        client.get("/v1/algorithms/logistic_regression", headers={"X-Request-ID": "rid-7"})
    recs = [r for r in caplog.records if r.name == "orchard.access"]
    assert recs
    line = JsonFormatter().format(recs[-1])
    assert "\n" not in line
    doc = orjson.loads(line)
    assert doc["request_id"] == "rid-7" and doc["status"] == 200 and doc["method"] == "GET"
    assert doc["route"] == "/v1/algorithms/{name}" and doc["duration_ms"] >= 0 and doc["level"] == "info"


def test_json_formatter_takes_the_request_id_from_context_and_formats_exceptions():
    token = request_id_var.set("ctx-1")
    try:
        try:
            raise ValueError("boom")
        except ValueError:
            rec = logging.getLogger("orchard").makeRecord("orchard", logging.ERROR, __file__, 1, "failed %s", ("x",),
                                                          __import__("sys").exc_info())
        doc = orjson.loads(JsonFormatter().format(rec))
    finally:
        request_id_var.reset(token)
    assert doc["msg"] == "failed x" and doc["request_id"] == "ctx-1" and "ValueError: boom" in doc["exc"]


@pytest.fixture
def orchard_logging(tmp_path, monkeypatch, request):
    """Orchard's logging setup (its buffered handler the root's only one, access lines allowed to bypass
    ``logging``) writing to tmp_path/access.log; the root logger is restored afterwards. Yields
    (observability module, handler, formatter, log path); ``request.param`` is the flush interval."""
    import os

    from service import observability as obs

    path = tmp_path / "access.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    handler = obs.BufferedStreamHandler(fd, interval=request.param)
    fmt = JsonFormatter()
    handler.setFormatter(fmt)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    monkeypatch.setattr(obs, "_access_sink", (handler, fmt, [handler]))
    monkeypatch.setattr(obs, "_direct", None)
    obs.refresh_access_sink()
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
    import threading

    obs, handler, _, path = orchard_logging
    logging.getLogger().handlers[:] = [handler]  # without pytest's own handlers (added for the test's run)
    assert obs._direct is not None  # the setup is Orchard's: lines bypass logging
    through_logging = []
    handler.emit = through_logging.append
    recorder = obs.RequestRecorder(None, True)
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
    recorder = obs.RequestRecorder(None, True)
    scope = {"method": "GET", "path": "/x", "client": None}
    recorder.record(scope, "/x", 200, 1_000_000, 1, b"direct-1")
    extra = Collect()
    root.addHandler(extra)  # noticed at once
    recorder.record(scope, "/x", 200, 1_000_000, 1, b"both-2")
    root.handlers[:] = [extra]  # replaced: the next tick turns the direct path off
    obs.refresh_access_sink()
    assert obs._direct is None
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
    recorder = obs.RequestRecorder(metrics, True)
    for i, ns in enumerate((1_250_500, 20_000_000)):
        recorder.record({"method": "GET", "path": f"/q/{i}", "client": ("10.0.0.9", 1)}, "/q/{n}", 200, ns, 5,
                        f"q{i}".encode())
    root.handlers[:] = [Collect()]
    obs.refresh_access_sink()  # the flusher's tick: the setup is no longer Orchard's
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
    import time

    obs, handler, _, path = orchard_logging
    logging.getLogger().handlers[:] = [handler]  # without pytest's own handlers (added for the test's run)
    handler.on_tick = obs._tick  # as configure_logging sets it
    recorder = obs.RequestRecorder(None, True)
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
    import time

    obs, handler, _, path = orchard_logging
    logging.getLogger().handlers[:] = [handler]  # without pytest's own handlers (added for the test's run)
    monkeypatch.setattr(obs, "_TEXT_CACHE_MAX", 3)  # sizes and clients evicted during the test
    for texts in (obs._SIZE_TEXT, obs._CLIENT_TEXT, obs._DURATION_TEXT):
        texts.clear()
    t0 = 1764070000 * 10**9  # ns since the epoch
    stamps = [t0 + us * 1000 for us in (500, 900, 1_200, 1_999_600, 1_999_900, 2_000_100, 300, 86_400_250_000,
                                         86_400_250_000)]
    clock = iter(stamps)
    monkeypatch.setattr(time, "time_ns", lambda: next(clock))
    recorder = obs.RequestRecorder(None, True)  # binds time.time_ns (the fake) for its requests' timestamps
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


def test_metrics_only_recorder_counts_at_scrape_and_writes_no_line(tmp_path, capfd):
    """With the access log off, requests are queued for the metrics alone and counted before each scrape."""
    from service import observability as obs

    def not_started():
        raise AttributeError("runtime")  # what app.state raises before the app's start-up

    metrics = obs.Metrics(not_started)
    recorder = obs.RequestRecorder(metrics, False)
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
