"""The predict front door (service/api/fastpath.py): same answers and errors as the routed API, its own
request id, body limit, metrics and access log, and the numeric fast path agreeing with the per-feature path."""

import asyncio
import logging
import warnings

import numpy as np
import orjson
import pytest

from service.api.fastpath import predict_model_id
from tests.service.conftest import assert_problem, iris_csv, train, upload_csv
from tests.service.test_observability import scrape

ROUTE = "/v1/models/{model_id}/predict"


@pytest.fixture
def model(client):
    ds = upload_csv(client, iris_csv(), name="iris").json()["id"]
    mid, job = train(client, algorithm="logistic_regression", dataset_id=ds, target="species")
    assert job["status"] == "succeeded"
    return mid


def test_predict_paths_are_recognised_exactly():
    assert predict_model_id("/v1/models/mdl_1/predict") == "mdl_1"
    for path in ("/v1/models//predict", "/v1/models/a/b/predict", "/v1/models/mdl_1/predict/",
                 "/v1/models/mdl_1/evaluate", "/v2/models/mdl_1/predict"):
        assert predict_model_id(path) is None, path


def test_front_door_answers_with_request_id_metrics_and_access_log(client, model, caplog):
    url = f"/v1/models/{model}/predict"
    with caplog.at_level(logging.INFO, logger="orchard.access"):
        r = client.post(url, json={"rows": [[5.1, 3.5, 1.4, 0.2]]}, headers={"X-Request-ID": "rid-front-1"})
        bad = client.post(url, json={"rows": [[1.0]]}, headers={"X-Request-ID": "not valid\t"})
    assert r.status_code == 200 and r.json() == {"predictions": ["setosa"]}
    assert r.headers["x-request-id"] == "rid-front-1" and r.headers["content-type"] == "application/json"
    assert_problem(bad, 422, "4 features")
    assert len(bad.headers["x-request-id"]) == 32 and bad.headers["x-request-id"] != "not valid\t"
    lines = [orjson.loads(rec.getMessage() and JsonFormatterLine(rec)) for rec in caplog.records
             if rec.name == "orchard.access"]
    assert [(d["request_id"], d["route"], d["status"]) for d in lines] == [
        ("rid-front-1", ROUTE, 200), (bad.headers["x-request-id"], ROUTE, 422)]
    assert lines[0]["bytes"] == len(r.content) and lines[0]["path"] == url
    m = scrape(client)
    assert m[("orchard_http_requests_total", (("method", "POST"), ("route", ROUTE), ("status", "200")))] == 1
    assert m[("orchard_http_requests_total", (("method", "POST"), ("route", ROUTE), ("status", "422")))] == 1
    assert m[("orchard_predicted_rows_total", (("protocol", "v1"),))] == 1


def JsonFormatterLine(record) -> bytes:  # noqa: N802 - the line Orchard's formatter writes for a record
    from service.observability import JsonFormatter

    return JsonFormatter().format(record).encode()


def test_a_path_that_is_not_a_predict_path_takes_the_routed_api(client, model):
    r = client.post(f"/v1/models/{model}/x/predict", json={"rows": [[1, 2, 3, 4]]})
    assert_problem(r, 404)
    assert len(r.headers["x-request-id"]) == 32  # the Observability middleware's id


def _asgi(app, path, chunks, headers, disconnect=False):
    """Drive the app directly: ``chunks`` are the body's pieces (streamed, no content-length unless given)."""
    sent, queue = [], [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
                       for i, c in enumerate(chunks)]
    if disconnect:
        queue = [{"type": "http.disconnect"}]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}

    async def receive():
        return queue.pop(0)

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent


def test_body_limit_declared_and_streamed_and_client_disconnect(client, model, settings):
    url = f"/v1/models/{model}/predict"
    big = settings.max_body_bytes + 1
    r = client.post(url, content=b" " * big, headers={"content-type": "application/json"})
    assert_problem(r, 413, "ORCHARD_MAX_BODY_BYTES")
    # streamed without a content-length: the limit applies to what arrives
    piece = b" " * (settings.max_body_bytes // 2 + 1)
    sent = _asgi(client.app, url, [b'{"rows": [[1, 2, 3, 4]]}', piece, piece], [(b"content-type", b"application/json")])
    assert sent[0]["status"] == 413 and b"ORCHARD_MAX_BODY_BYTES" in sent[1]["body"]
    assert dict(sent[0]["headers"])[b"content-type"] == b"application/problem+json"
    # a streamed body within the limit is assembled
    sent = _asgi(client.app, url, [b'{"rows": [[5.1, 3.5', b', 1.4, 0.2]]}'], [])
    assert sent[0]["status"] == 200 and orjson.loads(sent[1]["body"]) == {"predictions": ["setosa"]}
    # the client goes away: nothing is sent, the request is counted as 499
    assert _asgi(client.app, url, [], [], disconnect=True) == []
    m = scrape(client)
    assert m[("orchard_http_requests_total", (("method", "POST"), ("route", ROUTE), ("status", "413")))] == 2
    assert m[("orchard_http_requests_total", (("method", "POST"), ("route", ROUTE), ("status", "499")))] == 1


def test_body_limit_at_its_edges_on_both_protocols(client, model, settings):
    """A declared length of the limit's digit count but over it is refused before the body is read (the
    receive queue is empty: reading it would fail); one message over the limit without a declared length is
    refused too; one byte under the limit is not refused for its size."""
    limit, json_ct = settings.max_body_bytes, (b"content-type", b"application/json")
    assert len(str(limit + 1)) == len(str(limit))  # the boundary the digit-count shortcut must include
    for url in (f"/v1/models/{model}/predict", f"/v2/models/{model}/infer"):
        sent = _asgi(client.app, url, [], [json_ct, (b"content-length", str(limit + 1).encode())])
        assert sent[0]["status"] == 413 and b"ORCHARD_MAX_BODY_BYTES" in sent[1]["body"], url
        sent = _asgi(client.app, url, [b" " * (limit + 1)], [json_ct])  # one message, no content-length
        assert sent[0]["status"] == 413 and b"ORCHARD_MAX_BODY_BYTES" in sent[1]["body"], url
        for size in (limit - 1, limit):  # blank JSON up to the limit itself: refused, but not for its size
            for headers in ([json_ct], [json_ct, (b"content-length", str(size).encode())]):
                sent = _asgi(client.app, url, [b" " * size], headers)
                assert sent[0]["status"] in (400, 422), (url, size, headers)
                assert b"ORCHARD_MAX_BODY_BYTES" not in sent[1]["body"], url


def test_unexpected_errors_are_500_problems_and_logged(client, model, monkeypatch, caplog):
    from service.services import bundle as bundle_mod

    def boom(*a, **k):
        raise RuntimeError("estimator exploded")

    monkeypatch.setattr(bundle_mod.ModelBundle, "predict_matrix", boom)
    with caplog.at_level(logging.ERROR, logger="orchard"):
        r = client.post(f"/v1/models/{model}/predict", json={"rows": [[1, 2, 3, 4]]})
    body = assert_problem(r, 500, "unexpected")
    assert "estimator exploded" not in body["detail"]
    assert any("estimator exploded" in (rec.exc_text or str(rec.exc_info)) for rec in caplog.records)


@pytest.mark.parametrize("rows", [
    [[5, 3, 1, 0]],                      # JSON integers
    [[5.1, 3.5, 1.4, 0.2], [6, 2.2, 5, 1.5]],
    [[None, 3.5, None, 0.2]],            # missing -> imputed
    [[True, 3.5, 1.4, False]],           # booleans -> 1/0
    [["5.1", 3.5, 1.4, 0.2]],            # numeric text
    [[1e300, -1e300, 0.0, 1.0]],         # finite extremes
])
def test_numeric_fast_path_agrees_with_the_per_feature_path(client, model, rows):
    bundle = client.app.state.runtime.cache.get(model)
    fast = bundle.matrix_from_payload(rows, "rows", json_numbers=True)
    slow = bundle.preprocessor.transform(bundle.columns_from_rows(rows))
    np.testing.assert_array_equal(fast, slow)
    via_http = client.post(f"/v1/models/{model}/predict", json={"rows": rows, "return_proba": True}).json()
    expected = bundle.predict_matrix(slow, return_proba=True)
    assert via_http["predictions"] == expected["predictions"]
    np.testing.assert_allclose(via_http["probabilities"], expected["probabilities"], rtol=0, atol=0)
    named = [dict(zip(bundle.feature_names, r, strict=True)) for r in rows]
    fast_named = bundle.matrix_from_payload(named, "instances", json_numbers=True)
    np.testing.assert_array_equal(fast_named, slow)


def test_non_finite_values_never_reach_the_estimator(client, model):
    bundle = client.app.state.runtime.cache.get(model)
    # not decoded by orjson (json_numbers=False): NaN is a missing value, infinity a named error
    assert np.isfinite(bundle.matrix_from_payload([[float("nan"), 3.5, 1.4, 0.2]], "rows")).all()
    with pytest.raises(Exception, match="sepal_length"):
        bundle.matrix_from_payload([[float("inf"), 3.5, 1.4, 0.2]], "rows")
    with pytest.raises(Exception, match="sepal_length"):
        bundle.matrix_from_payload([["inf", 3.5, 1.4, 0.2]], "rows", json_numbers=True)
    # a finite value that overflows when standardised is refused by the estimator's own check, not predicted
    # (NumPy's overflow RuntimeWarning is an error under this suite's settings; a server only logs it)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r = client.post(f"/v1/models/{model}/predict", json={"rows": [[1e308, -1e308, 0.0, 1.0]]})
    assert_problem(r, 422, "infinity")


def test_an_estimator_refusing_its_input_is_a_client_error_on_every_route(client, model):
    """A DataError from the estimator (here: a finite value that overflows when standardised) is the
    client's data, never a 500: 422 problem+json on /v1 predict and evaluate, 400 {"error"} on /v2."""
    row = [1e308, -1e308, 0.0, 1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ev = client.post(f"/v1/models/{model}/evaluate", json={"data": {
            "columns": ["sepal_length", "sepal_width", "petal_length", "petal_width", "species"],
            "rows": [row + ["setosa"]]}})
        v2 = client.post(f"/v2/models/{model}/infer",
                         json={"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP64", "data": row}]})
    assert_problem(ev, 422, "infinity")
    assert v2.status_code == 400 and "infinity" in v2.json()["error"], v2.text
    # answered once by the front door's one error path: one request in the metrics, not two
    m = scrape(client)
    v2_counts = {k[1][2][1]: v for k, v in m.items() if k[0] == "orchard_http_requests_total"
                 and ("route", "/v2/models/{model_name}/infer") in k[1]}
    assert v2_counts == {"400": 1}, v2_counts


def test_labels_are_json_ready_python_values():
    """Predicted labels leave as plain Python values: NumPy scalars inside object arrays are unwrapped, and
    the one-tolist() shortcut is only taken for models whose classes_ hold none."""
    from service.services.bundle import ModelBundle, _labels

    mixed = np.array([np.int64(3), "a", np.float64(0.5), True], dtype=object)
    out = _labels(mixed)
    assert out == [3, "a", 0.5, True] and [type(v) for v in out] == [int, str, float, bool]
    assert _labels(np.array([1, 0])) == [1, 0] and type(_labels(np.array([1]))[0]) is int

    class Est:
        def __init__(self, classes):
            self.classes_ = classes

        def predict(self, X):
            return self.classes_[np.zeros(len(X), dtype=np.intp)]

    def bundle(classes):
        return ModelBundle(model_id="m", algorithm="x", task="classification", params={}, features=[],
                           target="y", classes=None, preprocessor=None, estimator=Est(classes))

    plain = bundle(np.array(["yes", "no"], dtype=object))
    assert plain._plain_labels and plain.predict_matrix(np.zeros((2, 1)))["predictions"] == ["yes", "yes"]
    scalars = bundle(np.array([np.int64(7), "no"], dtype=object))
    assert not scalars._plain_labels
    got = scalars.predict_matrix(np.zeros((1, 1)))["predictions"]
    assert got == [7] and type(got[0]) is int


V2_ROUTE = "/v2/models/{model_name}/infer"


def test_v2_infer_paths_are_recognised_exactly():
    from service.api.fastpath import infer_model_name

    assert infer_model_name("/v2/models/mdl_1/infer") == "mdl_1"
    for path in ("/v2/models//infer", "/v2/models/mdl_1/versions/1/infer", "/v2/models/mdl_1/infer/",
                 "/v1/models/mdl_1/infer", "/v2/models/mdl_1/ready"):
        assert infer_model_name(path) is None, path


def test_v2_infer_through_the_front_door_matches_v1_with_its_own_errors_and_metrics(client, model, caplog):
    rows = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]
    v1 = client.post(f"/v1/models/{model}/predict", json={"rows": rows, "return_proba": True}).json()
    tensor = {"name": "input-0", "shape": [2, 4], "datatype": "FP64", "data": [v for r in rows for v in r]}
    with caplog.at_level(logging.INFO, logger="orchard.access"):
        ok = client.post(f"/v2/models/{model}/infer", json={"inputs": [tensor]}, headers={"X-Request-ID": "rid-v2"})
        bad = client.post(f"/v2/models/{model}/infer", content=b"{not json")
        gone = client.post("/v2/models/mdl_missing/infer", json={"inputs": [tensor]})
        media = client.post(f"/v2/models/{model}/infer", content=b"x", headers={"content-type": "text/plain"})
    assert ok.status_code == 200 and ok.headers["x-request-id"] == "rid-v2"
    outs = {o["name"]: o for o in ok.json()["outputs"]}
    assert outs["predict"]["data"] == v1["predictions"]
    assert np.array(outs["predict_proba"]["data"]).reshape(2, 3).tolist() == v1["probabilities"]  # identical
    assert (bad.status_code, gone.status_code, media.status_code) == (400, 404, 415)
    for r in (bad, gone, media):
        assert set(r.json()) == {"error"} and r.headers["content-type"] == "application/json"
        assert len(r.headers["x-request-id"]) == 32
    routes = [orjson.loads(JsonFormatterLine(rec))["route"] for rec in caplog.records if rec.name == "orchard.access"]
    assert routes == [V2_ROUTE] * 4
    m = scrape(client)
    assert m[("orchard_http_requests_total", (("method", "POST"), ("route", V2_ROUTE), ("status", "200")))] == 1
    assert m[("orchard_predicted_rows_total", (("protocol", "v2"),))] == 2
    # binary outputs through the front door: the header length and the raw buffers
    b = client.post(f"/v2/models/{model}/infer", json={"inputs": [tensor], "parameters": {"binary_data_output": True}})
    assert b.status_code == 200 and b.headers["content-type"] == "application/octet-stream"
    head_len = int(b.headers["inference-header-content-length"])
    head = orjson.loads(b.content[:head_len])
    proba = next(o for o in head["outputs"] if o["name"] == "predict_proba")
    assert proba["parameters"]["binary_data_size"] == 2 * 3 * 8


def test_front_door_guards_refuse_before_the_body_in_each_protocols_shape(client, model):
    """Guards given to the front door run in order before the body is read; a ProblemError is answered as
    problem+json on /v1 and {"error"} on /v2, a Response as it is, each with the request id, and recorded."""
    from starlette.responses import PlainTextResponse

    from service.errors import ProblemError

    seen = []

    def count(scope):
        seen.append(scope["path"])

    def refuse(scope):
        if dict(scope["headers"]).get(b"x-key") != b"ok":
            return ProblemError("a key is needed", status=401, title="Unauthorized")
        return None

    def teapot(scope):
        return PlainTextResponse("no", status_code=418) if b"teapot" in scope["path"].encode() else None

    front = client.app.predict_front_door
    front.guards = (count, refuse, teapot)
    row = {"rows": [[5.1, 3.5, 1.4, 0.2]]}
    tensor = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP64", "data": row["rows"][0]}]}
    v1 = client.post(f"/v1/models/{model}/predict", content=b"{not even json", headers={"X-Request-ID": "g1"})
    v2 = client.post(f"/v2/models/{model}/infer", content=b"{not even json", headers={"X-Request-ID": "g2"})
    assert_problem(v1, 401, "a key is needed") and v1.headers["x-request-id"] == "g1"  # before the body's errors
    assert v2.status_code == 401 and v2.json() == {"error": "a key is needed"} and v2.headers["x-request-id"] == "g2"
    ok = client.post(f"/v1/models/{model}/predict", json=row, headers={"x-key": "ok"})
    ok2 = client.post(f"/v2/models/{model}/infer", json=tensor, headers={"x-key": "ok"})
    tea = client.post("/v1/models/teapot/predict", json=row, headers={"x-key": "ok"})
    assert ok.status_code == 200 and ok2.status_code == 200
    assert tea.status_code == 418 and tea.text == "no" and len(tea.headers["x-request-id"]) == 32
    assert len(seen) == 5  # every guard ran for every request until one refused
    m = scrape(client)
    assert m[("orchard_http_requests_total", (("method", "POST"), ("route", ROUTE), ("status", "401")))] == 1
    assert m[("orchard_http_requests_total", (("method", "POST"), ("route", V2_ROUTE), ("status", "401")))] == 1
    assert m[("orchard_http_requests_total", (("method", "POST"), ("route", ROUTE), ("status", "418")))] == 1


def test_v2_common_requests_answer_as_the_general_path_byte_for_byte(client, model, monkeypatch):
    """The shortcut for one FP64 [n, k] tensor (JSON or binary) gives the general path's bytes, and requests it
    does not take (missing values, infinities, other shapes, parameters) still get the general path's answer."""
    import struct

    from service.services import oip

    plane = client.app.state.runtime.plane
    bundle = plane.model(model)
    rows = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3], [1e300, -3.0, 0.0, 7.5]]
    flat = [v for r in rows for v in r]

    def binary(values, outputs=None, shape=(3, 4)):
        head = {"inputs": [{"name": "m", "shape": list(shape), "datatype": "FP64",
                            "parameters": {"binary_data_size": 8 * len(values)}}]}
        if outputs is not None:
            head["outputs"] = outputs
        h = orjson.dumps(head)
        return h + struct.pack(f"<{len(values)}d", *values), str(len(h))

    cases = [(orjson.dumps({"inputs": [{"name": "m", "shape": [3, 4], "datatype": "FP64", "data": flat}]}), None),
             (orjson.dumps({"id": "r1", "inputs": [{"name": "m", "shape": [3, 4], "datatype": "FP64", "data": rows}],
                            "outputs": [{"name": "predict_proba"}, {"name": "predict"}]}), None),
             (orjson.dumps({"inputs": [{"name": "m", "shape": [3, 4], "datatype": "FP64", "data": [1, 2, 3, 4] * 3}]}),
              None),  # integers: the general path
             (orjson.dumps({"inputs": [{"name": "m", "shape": [2, 4], "datatype": "FP64", "data": flat}]}), None),
             (orjson.dumps({"inputs": [{"name": "m", "shape": [3, 4], "datatype": "FP64", "data": flat}],
                            "parameters": {"binary_data_output": True}}), None),
             binary(flat), binary(flat, [{"name": "predict"}]), binary([float("nan")] + flat[1:]),
             binary([float("inf")] + flat[1:]), binary(flat, shape=(4, 3))]
    shortcut = oip._infer_plain

    def answer(body, hlen, plain):
        monkeypatch.setattr(oip, "_infer_plain", plain)
        try:
            return plane.infer(bundle, "m", body, hlen)
        except oip.V2Error as exc:
            return exc.detail

    taken = 0
    for body, hlen in cases:
        taken += shortcut(bundle, "m", body, hlen, 10**6) is not None
        fast, slow = answer(body, hlen, shortcut), answer(body, hlen, lambda *a: None)
        assert fast == slow, (body[:120], fast, slow)
    assert taken == 5  # the first two, and the first three binary ones (NaN: a missing value, both ways)


def test_large_v1_bodies_in_pieces_answer_as_when_decoded_whole(client, model):
    """A body over the inline size is decoded in pieces (chunked_rows): the same answer, byte for byte, as the
    whole-body decoding, and the same errors."""
    from service.services.dataplane import predict_payload

    plane = client.app.state.runtime.plane
    bundle = plane.model(model)
    rng = np.random.default_rng(3)
    X = rng.normal(loc=4, scale=2, size=(3000, 4))
    for body in ({"rows": X.tolist(), "return_proba": True},
                 {"instances": [dict(zip(bundle.feature_names, r, strict=True)) for r in X.tolist()]},
                 {"rows": rng.integers(-5, 15, size=(9000, 4)).tolist()}):
        raw = orjson.dumps(body)
        assert len(raw) > 64 * 1024
        data, n = plane.predict(bundle, raw)
        assert n == len(body.get("rows") or body.get("instances"))
        assert data == orjson.dumps(predict_payload(bundle, orjson.loads(raw), 10**6))
    too_many = client.app.state.runtime.plane
    too_many.max_rows, saved = 100, too_many.max_rows
    try:
        r = client.post(f"/v1/models/{model}/predict", content=orjson.dumps({"rows": X.tolist()}))
    finally:
        too_many.max_rows = saved
    assert_problem(r, 422, "at most 100 rows")


def test_a_single_row_predict_makes_no_thread_hop_and_a_large_body_does(client, model, monkeypatch):
    """A body up to INLINE_BODY_BYTES is decoded and predicted on the event loop (a thread hop would double a
    single row's cost); a larger one on a worker thread. Counted at the front door's run_in_threadpool and at
    anyio's to_thread.run_sync, under every thread hop Starlette makes."""
    import anyio.to_thread

    from service.api import fastpath
    from service.services.inference import INLINE_BODY_BYTES

    v1, v2 = f"/v1/models/{model}/predict", f"/v2/models/{model}/infer"
    one_v1 = {"rows": [[5.1, 3.5, 1.4, 0.2]]}
    one_v2 = {"inputs": [{"name": "input-0", "shape": [1, 4], "datatype": "FP64", "data": [5.1, 3.5, 1.4, 0.2]}]}
    assert client.post(v1, json=one_v1).status_code == 200  # the model loaded (a cold load hops, by design)
    front, hops = [], []
    real_front, real_hop = fastpath.run_in_threadpool, anyio.to_thread.run_sync

    async def counted_front(func, *args, **kw):
        front.append(func.__name__)
        return await real_front(func, *args, **kw)

    async def counted_hop(func, *args, **kw):
        hops.append(func)
        return await real_hop(func, *args, **kw)

    monkeypatch.setattr(fastpath, "run_in_threadpool", counted_front)
    monkeypatch.setattr(anyio.to_thread, "run_sync", counted_hop)
    for url, body in ((v1, one_v1), (v2, one_v2)):
        r = client.post(url, json=body)
        assert r.status_code == 200, r.text
        assert front == [] and hops == [], (url, front, hops)
    X = np.random.default_rng(0).normal(4, 2, size=(3000, 4))
    big_v1 = orjson.dumps({"rows": X.tolist()})
    big_v2 = orjson.dumps({"inputs": [{"name": "input-0", "shape": [3000, 4], "datatype": "FP64",
                                       "data": X.ravel().tolist()}]})
    for url, body, fn in ((v1, big_v1, "_predict_joined"), (v2, big_v2, "_infer_joined")):
        assert len(body) > INLINE_BODY_BYTES
        front.clear(), hops.clear()
        r = client.post(url, content=body, headers={"content-type": "application/json"})
        assert r.status_code == 200, r.text
        assert front == [fn] and len(hops) == 1, (url, front, hops)
