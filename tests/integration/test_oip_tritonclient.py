"""Open Inference Protocol (V2) against a real `orchard serve`, driven by tritonclient (a third-party V2 client).

Checks server/model readiness, metadata, and that inference (JSON and binary tensor data, matrix and
per-feature inputs) gives the same numbers as POST /v1/models/{id}/predict.
"""

import httpx
import numpy as np
import pytest

from tests.integration._server import ServerProcess, free_port
from tests.integration.test_serve_subprocess import _wait
from tests.service.conftest import iris_csv

tritonclient_http = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402

pytestmark = pytest.mark.slow
ROWS = [[5.1, 3.5, 1.4, 0.2], [6.0, 2.7, 5.1, 1.6], [6.7, 3.0, 5.2, 2.3], [5.9, 3.0, 4.2, 1.5]]
FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    data = tmp_path_factory.mktemp("oip") / "data"
    data.mkdir()
    server = ServerProcess(data, free_port()).start()
    c = httpx.Client(base_url=server.url, timeout=30)
    try:
        ds = c.post("/v1/datasets?name=iris", content=iris_csv(), headers={"content-type": "text/csv"}).json()["id"]
        models = {}
        for key, body in {
            "clf": {"algorithm": "logistic_regression", "target": "species", "name": "iris-lr"},
            "reg": {"algorithm": "ridge_regression", "target": "petal_width", "name": "iris-ridge",
                    "features": ["sepal_length", "sepal_width", "petal_length"]},
            "dup1": {"algorithm": "gaussian_nb", "target": "species", "name": "twin"},
            "dup2": {"algorithm": "gaussian_nb", "target": "species", "name": "twin"},
        }.items():
            r = c.post("/v1/train", json={"dataset_id": ds, **body})
            assert r.status_code == 202, r.text
            assert _wait(c, r.json()["job"]["id"])["status"] == "succeeded"
            models[key] = r.json()["model_id"]
        # a model with a categorical feature, trained on inline data
        rows = [["red", 1.0, "a"], ["blue", 2.0, "b"], ["red", 1.5, "a"], ["green", 3.0, "b"],
                ["blue", 2.5, "b"], ["red", 0.5, "a"], ["green", 2.8, "b"], ["red", 1.2, "a"]]
        r = c.post("/v1/train", json={"algorithm": "decision_tree_classifier", "name": "colours",
                                      "data": {"columns": ["colour", "size", "label"], "rows": rows},
                                      "target": "label"})
        assert r.status_code == 202, r.text
        assert _wait(c, r.json()["job"]["id"])["status"] == "succeeded"
        models["cat"] = r.json()["model_id"]
        yield server, c, models
    finally:
        c.close()
        server.stop()


def _client(server):
    return tritonclient_http.InferenceServerClient(url=server.url.removeprefix("http://"))


def test_server_and_model_readiness_and_metadata(served):
    server, c, models = served
    tc = _client(server)
    assert tc.is_server_live() and tc.is_server_ready()
    meta = tc.get_server_metadata()
    assert meta["name"] == "orchard" and "binary_tensor_data" in meta["extensions"]
    assert tc.is_model_ready("iris-lr") and tc.is_model_ready(models["clf"])
    assert tc.is_model_ready("iris-lr", model_version="1")
    assert not tc.is_model_ready("no-such-model")
    m = tc.get_model_metadata("iris-lr")
    assert [i["name"] for i in m["inputs"]] == FEATURES
    assert {o["name"]: o for o in m["outputs"]} == {
        "predict": {"name": "predict", "datatype": "BYTES", "shape": [-1]},
        "predict_proba": {"name": "predict_proba", "datatype": "FP64", "shape": [-1, 3]}}
    assert m["parameters"]["id"] == models["clf"]
    reg = tc.get_model_metadata(models["reg"])
    assert [o["name"] for o in reg["outputs"]] == ["predict"] and len(reg["inputs"]) == 3
    cat = tc.get_model_metadata("colours")
    assert {i["name"]: i["datatype"] for i in cat["inputs"]} == {"colour": "BYTES", "size": "FP64"}
    with pytest.raises(InferenceServerException, match="ambiguous"):
        tc.get_model_metadata("twin")


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("dtype", ["FP64", "FP32"])
def test_matrix_input_matches_v1_predict(served, binary, dtype):
    server, c, models = served
    v1 = c.post(f"/v1/models/{models['clf']}/predict", json={"rows": ROWS, "return_proba": True}).json()
    tc = _client(server)
    arr = np.asarray(ROWS, dtype=np.float64 if dtype == "FP64" else np.float32)
    inp = tritonclient_http.InferInput("input", list(arr.shape), dtype)
    inp.set_data_from_numpy(arr, binary_data=binary)
    outs = [tritonclient_http.InferRequestedOutput(n, binary_data=binary) for n in ("predict", "predict_proba")]
    res = tc.infer("iris-lr", [inp], outputs=outs)
    labels = [v.decode() if isinstance(v, bytes) else v for v in res.as_numpy("predict").tolist()]
    assert labels == v1["predictions"]
    proba = res.as_numpy("predict_proba")
    assert proba.shape == (4, 3)
    tol = 0 if dtype == "FP64" else 1e-5
    np.testing.assert_allclose(proba, np.asarray(v1["probabilities"]), rtol=0, atol=tol)
    assert res.get_output("predict_proba")["parameters"]["classes"] == '["setosa","versicolor","virginica"]'


def test_default_outputs_are_binary_and_complete(served):
    """With no `outputs`, tritonclient asks for every output in binary form."""
    server, c, models = served
    tc = _client(server)
    arr = np.asarray(ROWS, dtype=np.float64)
    inp = tritonclient_http.InferInput("input", list(arr.shape), "FP64")
    inp.set_data_from_numpy(arr)
    res = tc.infer(models["clf"], [inp], request_id="req-1")
    assert res.get_response()["id"] == "req-1"
    assert {o["name"] for o in res.get_response()["outputs"]} == {"predict", "predict_proba"}
    v1 = c.post(f"/v1/models/{models['clf']}/predict", json={"rows": ROWS, "return_proba": True}).json()
    assert [v.decode() for v in res.as_numpy("predict")] == v1["predictions"]
    np.testing.assert_array_equal(res.as_numpy("predict_proba"), np.asarray(v1["probabilities"]))


def test_per_feature_inputs_and_regression(served):
    server, c, models = served
    tc = _client(server)
    X = np.asarray(ROWS)[:, :3]
    v1 = c.post(f"/v1/models/{models['reg']}/predict", json={"rows": X.tolist()}).json()
    inputs = []
    for j, name in enumerate(["sepal_length", "sepal_width", "petal_length"]):
        col = X[:, j:j + 1] if j == 1 else X[:, j]  # [n, 1] and [n] both accepted
        t = tritonclient_http.InferInput(name, list(col.shape), "FP64")
        t.set_data_from_numpy(np.ascontiguousarray(col), binary_data=j != 0)
        inputs.append(t)
    res = tc.infer("iris-ridge", inputs, outputs=[tritonclient_http.InferRequestedOutput("predict",
                                                                                         binary_data=False)])
    np.testing.assert_array_equal(res.as_numpy("predict"), np.asarray(v1["predictions"]))


@pytest.mark.parametrize("binary", [False, True])
def test_bytes_inputs_for_categorical_features(served, binary):
    server, c, models = served
    tc = _client(server)
    colour = np.array([b"red", b"green", b"blue"], dtype=object)
    size = np.array([1.1, 2.9, 2.2], dtype=np.float32)
    v1 = c.post(f"/v1/models/{models['cat']}/predict",
                json={"instances": [{"colour": "red", "size": 1.1}, {"colour": "green", "size": float(size[1])},
                                    {"colour": "blue", "size": float(size[2])}]}).json()
    a = tritonclient_http.InferInput("colour", [3], "BYTES")
    a.set_data_from_numpy(colour, binary_data=binary)
    b = tritonclient_http.InferInput("size", [3], "FP32")
    b.set_data_from_numpy(size, binary_data=binary)
    res = tc.infer("colours", [a, b])
    assert [v.decode() for v in res.as_numpy("predict")] == v1["predictions"]


def test_protocol_errors(served):
    server, c, models = served
    tc = _client(server)
    bad = tritonclient_http.InferInput("input", [2, 3], "FP64")
    bad.set_data_from_numpy(np.zeros((2, 3)))
    with pytest.raises(InferenceServerException, match=r"shape \[n, 4\]"):
        tc.infer("iris-lr", [bad])
    ok = tritonclient_http.InferInput("input", [1, 4], "FP64")
    ok.set_data_from_numpy(np.zeros((1, 4)))
    with pytest.raises(InferenceServerException, match="unknown output 'transform'"):
        tc.infer("iris-lr", [ok], outputs=[tritonclient_http.InferRequestedOutput("transform")])
    with pytest.raises(InferenceServerException, match="no model"):
        tc.infer("no-such-model", [ok])
    with pytest.raises(InferenceServerException, match="ambiguous"):
        tc.infer("twin", [ok])
    # the raw protocol shape and status codes
    r = c.post("/v2/models/no-such-model/infer", json={"inputs": []})
    assert r.status_code == 404 and set(r.json()) == {"error"}
    r = c.post("/v2/models/twin/infer", json={"inputs": []})
    assert r.status_code == 400 and models["dup1"] in r.json()["error"]
    r = c.post("/v2/models/iris-lr/infer", json={"inputs": [{"name": "sepal_length", "shape": [1],
                                                             "datatype": "FP64", "data": ["x"]}]})
    assert r.status_code == 400 and "FP64 data must be numbers" in r.json()["error"]
    r = c.post("/v2/models/iris-lr/infer", json={"inputs": [{"name": "nope", "shape": [1], "datatype": "FP64",
                                                             "data": [1.0]},
                                                            {"name": "sepal_length", "shape": [1],
                                                             "datatype": "FP64", "data": [1.0]}]})
    assert r.status_code == 400 and "unknown input 'nope'" in r.json()["error"]


def test_server_log_is_json_lines_with_request_ids(served):
    server, c, models = served
    r = c.get(f"/v2/models/{models['clf']}/ready", headers={"X-Request-ID": "oip-log-check"})
    assert r.status_code == 200 and r.headers["x-request-id"] == "oip-log-check"
    import time

    import orjson

    deadline = time.monotonic() + 10  # info lines are flushed every 0.5 s
    while True:
        lines = [ln for ln in (server.data_dir.parent / f"server-{server.port}.log").read_bytes().splitlines() if ln]
        if b"oip-log-check" in b"".join(lines) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    docs = [orjson.loads(ln) for ln in lines]  # every line is one JSON object
    assert all({"ts", "level", "logger", "msg"} <= set(d) for d in docs)
    hits = [d for d in docs if d.get("request_id") == "oip-log-check"]
    assert hits and hits[0]["logger"] == "orchard.access" and hits[0]["route"] == "/v2/models/{model_name}/ready"
