"""Inputs that used to end in a 500 answer a 4xx naming the field, and every answer, a 500 included (routed or
from the predict front door, v1 or v2), carries X-Request-ID."""

import logging

import pytest

from tests.service.conftest import assert_problem, iris_csv, train, upload_csv


@pytest.fixture
def model(client):
    ds = upload_csv(client, iris_csv(), name="iris").json()["id"]
    mid, job = train(client, algorithm="logistic_regression", dataset_id=ds, target="species")
    assert job["status"] == "succeeded"
    return mid


def test_offsets_and_limits_are_bounded(client):
    for path in ("/v1/models", "/v1/datasets", "/v1/jobs"):
        r = client.get(path, params={"offset": 9223372036854775808})
        assert_problem(r, 422, "offset")
        assert_problem(client.get(path, params={"limit": 10**6}), 422, "limit")
        assert client.get(path, params={"offset": 2**31 - 1}).status_code == 200
    spec = client.get("/openapi.json").json()
    offsets = [p["schema"] for op in spec["paths"].values() for o in op.values() for p in o.get("parameters", ())
               if p["name"] == "offset"]
    assert offsets and all(s.get("maximum") == 2**31 - 1 for s in offsets), offsets


def test_v2_parameters_that_are_not_objects_are_400(client, model):
    tensor = {"name": "x", "shape": [1, 4], "datatype": "FP64", "data": [5.1, 3.5, 1.4, 0.2]}
    for body in ({"inputs": [{**tensor, "parameters": [1]}]},
                 {"inputs": [tensor], "outputs": [{"name": "predict", "parameters": [1]}]},
                 {"inputs": [tensor], "parameters": [1]}):
        r = client.post(f"/v2/models/{model}/infer", json=body)
        assert r.status_code == 400 and "'parameters' must be an object" in r.json()["error"], r.text


def test_json_bodies_that_are_not_utf8_and_csv_headers_that_are_not_utf8_are_422(client):
    r = client.post("/v1/train", content=b"\xff\xfe{", headers={"content-type": "application/json"})
    assert_problem(r, 422, "not valid JSON")
    r = client.post("/v1/datasets", files={"file": ("x.csv", b"\x89PNG,b\n1,2\n", "text/csv")})
    assert_problem(r, 422, "not valid UTF-8")


def test_a_500_carries_the_request_id_routed_and_at_the_front_door(client, model, caplog):
    def boom(*a, **k):
        raise RuntimeError("forced")

    runtime = client.app.state.runtime
    runtime.meta.list_models = boom  # a routed v1 operation
    runtime.meta.get_model = boom  # the v2 model metadata behind /v2/models/{name}
    runtime.cache.peek = boom  # the front door (v1 predict and v2 infer)
    with caplog.at_level(logging.ERROR, logger="orchard"):
        routed = client.get("/v1/models", headers={"X-Request-ID": "rid-500"})
        v2 = client.get(f"/v2/models/{model}")
        front = client.post(f"/v1/models/{model}/predict", json={"rows": [[5.1, 3.5, 1.4, 0.2]]})
        front_v2 = client.post(f"/v2/models/{model}/infer", json={"inputs": []})
    assert_problem(routed, 500, "unexpected error")
    assert routed.headers["x-request-id"] == "rid-500"
    assert_problem(front, 500, "unexpected error")
    for r in (v2, front_v2):
        assert r.status_code == 500 and set(r.json()) == {"error"}, r.text
    for r in (v2, front, front_v2):
        assert len(r.headers["x-request-id"]) == 32
    logged = [rec for rec in caplog.records if rec.exc_info and "forced" in str(rec.exc_info[1])]
    assert len(logged) == 4  # each one logged with its traceback
