"""Bad input of every kind: a 4xx problem naming the field, and nothing stored."""

import pytest

from tests.service.conftest import assert_problem, iris_csv, train, upload_csv


@pytest.fixture
def iris(client):
    return upload_csv(client, iris_csv(), name="iris").json()["id"]


def _counts(client):
    return (client.get("/v1/jobs").json()["count"], client.get("/v1/models").json()["count"],
            client.get("/v1/datasets").json()["count"])


@pytest.mark.parametrize("body,status,fragment", [
    ({"algorithm": "nope", "target": "species"}, 422, "unknown algorithm 'nope'"),
    ({"algorithm": "logistic_regression", "target": "species", "params": {"bogus": 1}}, 422, "params.bogus"),
    ({"algorithm": "logistic_regression", "target": "species", "params": {"C": -1}}, 422, "params.C"),
    ({"algorithm": "logistic_regression", "target": "species", "params": {"max_iter": "many"}}, 422, "max_iter"),
    ({"algorithm": "logistic_regression", "target": "colour"}, 422, "target column 'colour'"),
    ({"algorithm": "logistic_regression"}, 422, "needs a target"),
    ({"algorithm": "kmeans", "target": "species"}, 422, "takes no target"),
    ({"algorithm": "logistic_regression", "target": "species", "features": ["nope"]}, 422, "'nope'"),
    ({"algorithm": "logistic_regression", "target": "species", "features": ["species"]}, 422, "cannot also be"),
    ({"algorithm": "logistic_regression", "target": "species", "validation": {"holdout": 1.5}}, 422, "holdout"),
    ({"algorithm": "logistic_regression", "target": "species", "surprise": 1}, 422, "surprise"),
    ({"algorithm": "linear_regression", "target": "species"}, 422, "categorical"),
])
def test_train_rejects(client, iris, body, status, fragment):
    before = _counts(client)
    r = client.post("/v1/train", json={"dataset_id": iris, **body})
    assert_problem(r, status, fragment)
    assert _counts(client) == before


def test_train_unknown_dataset_and_single_class(client):
    assert_problem(client.post("/v1/train", json={"algorithm": "kmeans", "dataset_id": "ds_nope"}), 404, "ds_nope")
    one = upload_csv(client, "x,y\n1,a\n2,a\n3,a\n").json()["id"]
    before = _counts(client)
    r = client.post("/v1/train", json={"algorithm": "logistic_regression", "dataset_id": one, "target": "y"})
    assert_problem(r, 422, "single class")
    assert _counts(client) == before
    r = client.post("/v1/train", json={"algorithm": "kmeans", "dataset_id": one, "data": {"columns": ["a"],
                                                                                         "rows": [[1]]}})
    assert_problem(r, 422, "exactly one")
    assert_problem(client.post("/v1/train", content=b"{not json", headers={"content-type": "application/json"}),
                   422)


def test_predict_rejects(client, iris):
    mid, _ = train(client, algorithm="logistic_regression", dataset_id=iris, target="species")
    url = f"/v1/models/{mid}/predict"
    good = {"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4, "petal_width": 0.2}
    assert_problem(client.post(url, json={"instances": [{**good, "petal_colour": 1}]}), 422, "petal_colour")
    assert_problem(client.post(url, json={"instances": [{**good, "sepal_length": "long"}]}), 422, "sepal_length")
    assert_problem(client.post(url, json={"rows": [[1.0, 2.0]]}), 422, "4 features")
    assert_problem(client.post(url, content=b'{"rows": [[NaN, 1, 1, 1]]}',
                               headers={"content-type": "application/json"}), 422)
    assert_problem(client.post(url, json={"rows": [["nan?", 1, 1, 1]]}), 422, "sepal_length")
    assert_problem(client.post(url, content=b'{"rows": [[1e999, 1, 1, 1]]}',
                               headers={"content-type": "application/json"}), 422, "infinity")
    assert_problem(client.post(url, json={}), 422, "instances")
    assert_problem(client.post(url, json={"rows": []}), 422, "non-empty")
    assert_problem(client.post(url, json={"rows": [[1, 1, 1, 1]], "return_proba": "yes"}), 422, "return_proba")
    assert_problem(client.post(url, json={"rows": [[1, 1, 1, 1]], "extra": 1}), 422, "extra")
    assert_problem(client.post(url, content=b"a,b", headers={"content-type": "text/csv"}), 415)
    assert_problem(client.post(url, content=b"[1,", headers={"content-type": "application/json"}), 422, "JSON")
    # missing values in predict input are imputed, not rejected
    ok = client.post(url, json={"instances": [{"petal_length": 1.4}]})
    assert ok.status_code == 200 and len(ok.json()["predictions"]) == 1
    ev = client.post(f"/v1/models/{mid}/evaluate", json={"data": {"columns": ["sepal_length"], "rows": [[1.0]]}})
    assert_problem(ev, 422, "target")


def test_predict_while_training_is_409(client, iris, settings):
    # a job that stays queued: the app's queue is replaced by one that never runs anything
    app = client.app
    app.state.runtime.queue.enqueue = lambda job_id: None
    r = client.post("/v1/train", json={"algorithm": "logistic_regression", "dataset_id": iris, "target": "species"})
    mid, job_id = r.json()["model_id"], r.json()["job"]["id"]
    assert_problem(client.post(f"/v1/models/{mid}/predict", json={"rows": [[1, 1, 1, 1]]}), 409, "still training")
    assert_problem(client.delete(f"/v1/models/{mid}"), 409, "still training")
    c = client.post(f"/v1/jobs/{job_id}/cancel")
    assert c.status_code == 202 and c.json()["status"] == "cancelled"
    assert_problem(client.post(f"/v1/jobs/{job_id}/cancel"), 409, "already finished")
    assert_problem(client.post("/v1/jobs/job_nope/cancel"), 404)


def test_unknown_route_and_method(client):
    assert_problem(client.get("/v1/nothing"), 404)
    assert_problem(client.put("/v1/datasets"), 405)


def test_unknown_ids_and_bad_filters(client):
    assert_problem(client.get("/v1/jobs/job_nope"), 404, "job_nope")
    assert_problem(client.get("/v1/models/mdl_nope"), 404, "mdl_nope")
    assert_problem(client.delete("/v1/models/mdl_nope"), 404)
    assert_problem(client.get("/v1/datasets/ds_nope/rows"), 404, "ds_nope")
    assert_problem(client.post("/v1/models/mdl_nope/evaluate", json={"dataset_id": "x"}), 404)
    assert_problem(client.get("/v1/jobs", params={"status": "sleeping"}), 422, "status")
    assert_problem(client.get("/v1/models", params={"status": "odd"}), 422, "status")
    assert client.get("/v1/jobs", params={"status": "queued"}).json() == {"data": [], "count": 0}
