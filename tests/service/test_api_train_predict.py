import numpy as np
import pytest

from tests.service.conftest import assert_problem, iris_csv, train, upload_csv, wait_job


@pytest.fixture
def iris(client):
    return upload_csv(client, iris_csv(), name="iris").json()["id"]


def test_classification_walkthrough(client, iris):
    r = client.post("/v1/train", json={"algorithm": "logistic_regression", "params": {"C": 10.0},
                                       "dataset_id": iris, "target": "species", "name": "iris-lr",
                                       "validation": {"holdout": 0.3, "random_state": 1}})
    assert r.status_code == 202, r.text
    assert r.headers["location"] == f"/v1/jobs/{r.json()['job']['id']}"
    job = wait_job(client, r.json()["job"]["id"])
    assert job["status"] == "succeeded", job
    mid = r.json()["model_id"]
    assert job["result"]["model_id"] == mid and job["progress"] == 1.0
    model = client.get(f"/v1/models/{mid}").json()
    assert model["status"] == "ready" and model["name"] == "iris-lr"
    assert model["classes"] == ["setosa", "versicolor", "virginica"]
    assert model["params"]["C"] == 10.0 and "max_iter" in model["params"]  # defaults filled
    assert [f["name"] for f in model["features"]] == ["sepal_length", "sepal_width", "petal_length", "petal_width"]
    val = model["metrics"]["validation"]
    assert val["accuracy"] > 0.9 and val["n_samples"] == 45
    inst = {"petal_width": 0.2, "petal_length": 1.4, "sepal_width": 3.5, "sepal_length": 5.1}
    p = client.post(f"/v1/models/{mid}/predict", json={"instances": [inst], "return_proba": True}).json()
    assert p["predictions"] == ["setosa"]
    assert p["classes"] == ["setosa", "versicolor", "virginica"]
    assert abs(sum(p["probabilities"][0]) - 1) < 1e-9 and p["probabilities"][0][0] > 0.9
    rows = client.post(f"/v1/models/{mid}/predict", json={"rows": [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]})
    assert rows.json()["predictions"] == ["setosa", "virginica"]
    ev = client.post(f"/v1/models/{mid}/evaluate", json={"dataset_id": iris}).json()
    assert ev["task"] == "classification" and ev["n_samples"] == 150
    m = ev["metrics"]
    for key in ("accuracy", "balanced_accuracy", "precision_macro", "recall_weighted", "f1_micro", "log_loss",
                "roc_auc"):
        assert key in m, key
    assert ev["confusion_matrix"]["labels"] == ["setosa", "versicolor", "virginica"]
    assert np.sum(ev["confusion_matrix"]["matrix"]) == 150
    assert np.trace(ev["confusion_matrix"]["matrix"]) / 150 == pytest.approx(m["accuracy"])


def test_numeric_labels_stay_numbers_and_inline_data(client):
    rows = [[float(i % 10), float((i * 7) % 10), int(i % 10 > 4)] for i in range(60)]
    mid, job = train(client, algorithm="logistic_regression", data={"columns": ["a", "b", "y"], "rows": rows},
                     target="y")
    assert job["status"] == "succeeded", job
    assert client.get(f"/v1/models/{mid}").json()["classes"] == [0, 1]
    p = client.post(f"/v1/models/{mid}/predict", json={"rows": [[9.0, 1.0], [0.0, 1.0]]}).json()
    assert p["predictions"] == [1, 0]


def test_regression_cv_and_missing_values(client):
    from sklearn.datasets import load_diabetes

    d = load_diabetes()
    X = d.data.copy()
    X[::7, 2] = np.nan  # missing values are imputed by the model's preprocessing
    cols = [f"f{j}" for j in range(X.shape[1])] + ["target"]
    rows = [[None if np.isnan(v) else float(v) for v in x] + [float(t)] for x, t in zip(X, d.target, strict=True)]
    ds = client.post("/v1/datasets", json={"columns": cols, "rows": rows}).json()["id"]
    mid, job = train(client, algorithm="linear_regression", dataset_id=ds, target="target", validation={"cv": 5})
    assert job["status"] == "succeeded", job
    val = job["result"]["metrics"]["validation"]
    assert val["folds"] == 5 and 0.3 < val["r2"] < 0.6 and "r2_std" in val
    p = client.post(f"/v1/models/{mid}/predict", json={"instances": [{"f0": 0.01}]}).json()
    assert len(p["predictions"]) == 1 and np.isfinite(p["predictions"][0])


def test_clustering_model(client, iris):
    mid, job = train(client, algorithm="kmeans", params={"n_clusters": 3, "random_state": 0}, dataset_id=iris,
                     features=["petal_length", "petal_width"])
    assert job["status"] == "succeeded", job
    p = client.post(f"/v1/models/{mid}/predict", json={"rows": [[1.4, 0.2], [5.5, 2.0]]}).json()
    assert len(set(p["predictions"])) == 2
    ev = client.post(f"/v1/models/{mid}/evaluate", json={"dataset_id": iris, "target": "species"}).json()
    m = ev["metrics"]
    assert m["ari"] > 0.8 and m["nmi"] > 0.7 and m["silhouette"] > 0.5 and m["inertia"] > 0
    assert m["calinski_harabasz"] > 0


def test_models_list_filter_delete(client, iris):
    a, _ = train(client, algorithm="kmeans", params={"n_clusters": 2}, dataset_id=iris, features=["petal_length"])
    b, _ = train(client, algorithm="logistic_regression", dataset_id=iris, target="species")
    assert client.get("/v1/models").json()["count"] == 2
    only = client.get("/v1/models", params={"algorithm": "kmeans"}).json()
    assert [m["id"] for m in only["data"]] == [a]
    assert client.get("/v1/models", params={"status": "ready"}).json()["count"] == 2
    assert client.delete(f"/v1/models/{a}").status_code == 204
    assert_problem(client.get(f"/v1/models/{a}"), 404)
    assert_problem(client.post(f"/v1/models/{a}/predict", json={"rows": [[1.0]]}), 404)
    jobs = client.get("/v1/jobs", params={"kind": "train", "status": "succeeded"}).json()
    assert jobs["count"] == 2


def test_job_events_stream(client, iris):
    r = client.post("/v1/train", json={"algorithm": "logistic_regression", "dataset_id": iris, "target": "species"})
    job_id = r.json()["job"]["id"]
    with client.stream("GET", f"/v1/jobs/{job_id}/events") as s:
        assert s.headers["content-type"].startswith("text/event-stream")
        text = "".join(s.iter_text())
    assert "event: end" in text and '"succeeded"' in text
    assert_problem(client.get("/v1/jobs/job_nope/events"), 404)
