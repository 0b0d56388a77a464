"""Open Inference Protocol (V2) details in-process: outputs per task, binary tensors, readiness and errors.

tests/integration/test_oip_tritonclient.py drives the same endpoints with a third-party client."""

import struct

import numpy as np
import orjson
import pytest

from service.storage.metadata import utcnow
from tests.service.conftest import iris_csv, train, upload_csv

ROWS = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]


@pytest.fixture
def iris(client):
    return upload_csv(client, iris_csv(), name="iris").json()["id"]


def infer(client, name, body, **kw):
    return client.post(f"/v2/models/{name}/infer", json=body, **kw)


def matrix(rows=ROWS, dtype="FP64"):
    return {"name": "input", "shape": [len(rows), len(rows[0])], "datatype": dtype, "data": sum(rows, [])}


def error(r, status, *fragments):
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}, body
    for f in fragments:
        assert f in body["error"], (f, body["error"])


def test_outputs_per_task_match_v1(client, iris):
    reg, _ = train(client, algorithm="gaussian_process_regressor", dataset_id=iris, target="petal_width",
                   features=["sepal_length", "sepal_width", "petal_length"], name="gp")
    X = [r[:3] for r in ROWS]
    out = infer(client, "gp", {"inputs": [matrix(X)]}).json()["outputs"]
    v1 = client.post(f"/v1/models/{reg}/predict", json={"rows": X, "return_std": True}).json()
    got = {o["name"]: o for o in out}
    assert set(got) == {"predict", "predict_std"}
    np.testing.assert_allclose(got["predict"]["data"], v1["predictions"], rtol=1e-12)
    np.testing.assert_allclose(got["predict_std"]["data"], v1["std"], rtol=1e-12)

    pca, _ = train(client, algorithm="pca", dataset_id=iris, features=["sepal_length", "sepal_width",
                                                                         "petal_length", "petal_width"],
                   params={"n_components": 2}, name="pca")
    meta = client.get("/v2/models/pca").json()
    assert meta["outputs"] == [{"name": "transform", "datatype": "FP64", "shape": [-1, 2]}]
    out = infer(client, pca, {"inputs": [matrix()]}).json()["outputs"][0]
    v1 = client.post(f"/v1/models/{pca}/predict", json={"rows": ROWS}).json()
    assert out["shape"] == [2, 2] and np.allclose(np.reshape(out["data"], (2, 2)), v1["components"])

    km, _ = train(client, algorithm="kmeans", dataset_id=iris, params={"n_clusters": 3, "random_state": 0},
                  features=["sepal_length", "sepal_width", "petal_length", "petal_width"], name="km")
    out = infer(client, "km", {"inputs": [matrix()], "outputs": [{"name": "predict"}]}).json()["outputs"]
    assert out[0]["datatype"] == "INT64"
    assert out[0]["data"] == client.post(f"/v1/models/{km}/predict", json={"rows": ROWS}).json()["predictions"]


def test_binary_inputs_and_outputs(client, iris):
    mid, _ = train(client, algorithm="logistic_regression", dataset_id=iris, target="species", name="lr")
    X = np.asarray(ROWS, dtype=np.float32)
    head = orjson.dumps({"inputs": [{"name": "input", "shape": [2, 4], "datatype": "FP32",
                                     "parameters": {"binary_data_size": X.nbytes}}],
                         "outputs": [{"name": "predict", "parameters": {"binary_data": True}},
                                     {"name": "predict_proba"}]})
    r = client.post(f"/v2/models/{mid}/infer", content=head + X.tobytes(),
                    headers={"Inference-Header-Content-Length": str(len(head)),
                             "content-type": "application/octet-stream"})
    assert r.status_code == 200, r.text
    hlen = int(r.headers["inference-header-content-length"])
    resp = orjson.loads(r.content[:hlen])
    pred, proba = resp["outputs"]
    assert "data" not in pred and proba["shape"] == [2, 3] and len(proba["data"]) == 6
    raw = r.content[hlen:]
    assert len(raw) == pred["parameters"]["binary_data_size"]
    labels, pos = [], 0
    while pos < len(raw):
        (n,) = struct.unpack_from("<I", raw, pos)
        labels.append(raw[pos + 4:pos + 4 + n].decode())
        pos += 4 + n
    assert labels == ["setosa", "virginica"]
    # binary data that its header does not account for
    r = client.post(f"/v2/models/{mid}/infer", content=head + X.tobytes() + b"xx",
                    headers={"Inference-Header-Content-Length": str(len(head))})
    error(r, 400, "2 bytes of binary data are not claimed")
    r = client.post(f"/v2/models/{mid}/infer", content=head + X.tobytes()[:-4],
                    headers={"Inference-Header-Content-Length": str(len(head))})
    error(r, 400, "binary_data_size")


def test_readiness_and_metadata_of_a_model_that_is_not_ready(client, iris):
    meta = client.app.state.runtime.meta
    meta.insert_model({"id": "mdl_training1", "name": "busy", "algorithm": "logistic_regression",
                       "task": "classification", "params": {}, "status": "training", "job_id": "job_x",
                       "features": [{"name": "a", "type": "numeric"}, {"name": "b", "type": "categorical"}],
                       "target": "y", "classes": None, "metrics": {}, "size_bytes": 0, "created_at": utcnow()})
    error(client.get("/v2/models/busy/ready"), 409, "not ready", "training")
    error(infer(client, "busy", {"inputs": [matrix()]}), 409, "still training")
    m = client.get("/v2/models/busy").json()
    assert m["inputs"] == [{"name": "a", "datatype": "FP64", "shape": [-1]},
                           {"name": "b", "datatype": "BYTES", "shape": [-1]}]
    assert m["parameters"]["status"] == "training" and m["outputs"][0]["name"] == "predict"


def test_protocol_errors(client, iris):
    train(client, algorithm="gaussian_nb", dataset_id=iris, target="species", name="nb")
    train(client, algorithm="gaussian_nb", dataset_id=iris, target="species", name="dup")
    train(client, algorithm="gaussian_nb", dataset_id=iris, target="species", name="dup")
    error(client.get("/v2/models/dup"), 400, "ambiguous", "use the model id")
    error(client.get("/v2/models/none"), 404, "no model has the id or name 'none'")
    error(client.get("/v2/models/nb/versions/2"), 404, "single version '1'")
    assert client.get("/v2/models/nb/versions/1/ready").status_code == 200
    error(client.get("/v2/nowhere"), 404)
    error(client.delete("/v2/models/nb"), 405)
    error(infer(client, "nb", {"inputs": [matrix(dtype="INT3")]}), 400, "datatype 'INT3' is not supported")
    error(infer(client, "nb", {"inputs": [{**matrix(), "shape": [2, 3]}]}), 400, "needs 6 elements but data has 8")
    error(infer(client, "nb", {"inputs": [matrix(dtype="INT32")]}), 400, "INT32 data must be integers")
    error(infer(client, "nb", {"inputs": [matrix()], "extra": 1}), 400, "unknown field 'extra'")
    error(infer(client, "nb", {"inputs": [matrix()], "outputs": [{"name": "score_samples"}]}), 400,
          "unknown output 'score_samples'", "predict, predict_proba")
    error(infer(client, "nb", {"inputs": [{"name": "sepal_length", "shape": [2], "datatype": "FP64",
                                           "data": [1.0, 2.0]},
                                          {"name": "sepal_width", "shape": [3], "datatype": "FP64",
                                           "data": [1.0, 2.0, 3.0]}]}), 400, "has 3 rows but other inputs have 2")
    error(client.post("/v2/models/nb/infer", content=b'{"inputs": [{"name": "x", "shape": [1, 4], "datatype": '
                      b'"FP64", "data": [1e400, 1, 1, 1]}]}'), 400)
    error(client.post("/v2/models/nb/infer", content=b"{not json"), 400, "not valid JSON")
    error(client.post("/v2/models/nb/infer", content=b"a,b", headers={"content-type": "text/csv"}), 415)
    # per-feature inputs with missing features are missing values, like v1 instances
    r = infer(client, "nb", {"inputs": [{"name": "petal_length", "shape": [1, 1], "datatype": "FP32", "data": [[1.4]]},
                                        {"name": "petal_width", "shape": [1], "datatype": "INT64", "data": [0]}]})
    assert r.status_code == 200 and r.json()["outputs"][0]["data"] == ["setosa"]
