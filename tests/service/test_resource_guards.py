"""Resource guards: absurd training requests are a 422 before anything is queued (schema maxima, the fit memory
estimate against ORCHARD_MAX_TRAIN_BYTES), and a fit that still grows past the worker's memory cap fails its
job with a clear message while the server and the worker stay healthy."""

import time

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.services.janitor import collect
from service.settings import Settings
from tests.service.conftest import assert_problem, iris_csv, train, upload_csv, wait_job

LIMIT = 100 * 1024 * 1024


@pytest.fixture
def guarded(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", workers=0, secret_key="s", max_train_bytes=LIMIT)
    with TestClient(create_app(settings)) as c:
        yield c


def _iris(client):
    return upload_csv(client, iris_csv()).json()["id"]


def test_schema_maxima_reject_absurd_parameters(client):
    ds = _iris(client)
    for algorithm, params, field in [
        ("random_forest_classifier", {"n_estimators": 1_000_000_000}, "n_estimators"),
        ("mlp_classifier", {"hidden_layer_sizes": [100_000, 100_000]}, "hidden_layer_sizes"),
        ("mlp_classifier", {"hidden_layer_sizes": [10] * 101}, "hidden_layer_sizes"),
        ("logistic_regression", {"max_iter": 10**9}, "max_iter"),
    ]:
        r = client.post("/v1/train", json={"algorithm": algorithm, "dataset_id": ds, "target": "species",
                                           "params": params})
        body = assert_problem(r, 422, f"params.{field}")
        assert body["errors"][0]["loc"] == ["body", "params", field]
    schema = client.get("/v1/algorithms/random_forest_classifier").json()["params_schema"]["properties"]
    assert schema["n_estimators"]["maximum"] == 10_000


def test_many_deep_trees_are_refused_by_the_memory_estimate(guarded):
    ds = _iris(guarded)
    r = guarded.post("/v1/train", json={"algorithm": "random_forest_classifier", "dataset_id": ds,
                                        "target": "species", "params": {"n_estimators": 10_000}})
    body = assert_problem(r, 422, "params.n_estimators", "10000 trees", "ORCHARD_MAX_TRAIN_BYTES", "100.0 MiB")
    assert body["errors"][0]["loc"] == ["body", "params", "n_estimators"]
    assert guarded.get("/v1/jobs").json()["count"] == 0 and guarded.get("/v1/models").json()["count"] == 0
    # the same forest with shallow trees fits the budget
    mid, job = train(guarded, algorithm="random_forest_classifier", dataset_id=ds, target="species",
                     params={"n_estimators": 20, "max_depth": 3})
    assert job["status"] == "succeeded", job


def test_a_kernel_method_on_many_rows_is_refused(guarded):
    csv = "x,y\n" + "".join(f"{i % 97},{(i * 7) % 13}\n" for i in range(5_000))
    ds = upload_csv(guarded, csv).json()["id"]
    r = guarded.post("/v1/train", json={"algorithm": "kernel_ridge_regression", "dataset_id": ds, "target": "y"})
    body = assert_problem(r, 422, "5000 x 5000 kernel", "ORCHARD_MAX_TRAIN_BYTES")
    assert body["errors"][0]["loc"] == ["body", "dataset_id"]
    # inline data is checked too (the field is then `data`)
    r = guarded.post("/v1/train", json={"algorithm": "spectral_clustering", "data": {
        "columns": ["x"], "rows": [[i] for i in range(4_000)]}})
    assert_problem(r, 422, "4000 x 4000 affinity")
    assert guarded.get("/v1/datasets").json()["count"] == 1  # the inline data was not stored either


def test_the_default_limit_refuses_a_network_of_ten_billion_weights(client):
    ds = _iris(client)
    r = client.post("/v1/train", json={"algorithm": "mlp_classifier", "dataset_id": ds, "target": "species",
                                       "params": {"hidden_layer_sizes": [10_000] * 100}})
    assert_problem(r, 422, "params.hidden_layer_sizes", "ORCHARD_MAX_TRAIN_BYTES")


CAP = 1536 * 1024 * 1024


@pytest.mark.slow
def test_a_fit_past_the_worker_memory_cap_fails_its_job_and_the_next_job_succeeds(tmp_path):
    """An embedded pool worker under a 1.5 GiB address-space cap gets an MLP whose weights alone need ~3 GB
    (within the memory estimate's limit, so it is queued): the job fails with the cap in its message, the
    server answers, and the same worker runs the next job."""
    settings = Settings(data_dir=tmp_path / "d", workers=1, secret_key="s", worker_memory_bytes=CAP)
    with TestClient(create_app(settings)) as client:
        ds = _iris(client)
        r = client.post("/v1/train", json={"algorithm": "mlp_classifier", "dataset_id": ds, "target": "species",
                                           "params": {"hidden_layer_sizes": [10_000, 10_000], "max_iter": 1}})
        assert r.status_code == 202, r.text
        job = wait_job(client, r.json()["job"]["id"], timeout=180)
        assert job["status"] == "failed", job
        assert job["error"]["message"].startswith(f"training exceeded the worker memory limit of {CAP} bytes")
        assert job["error"]["type"] == "MemoryLimitExceeded"
        model = client.get(f"/v1/models/{r.json()['model_id']}").json()
        assert model["status"] == "failed"
        assert client.get("/health/ready").status_code == 200
        mid, nxt = train(client, algorithm="logistic_regression", dataset_id=ds, target="species")
        assert nxt["status"] == "succeeded", nxt
        runtime = client.app.state.runtime
        workers = {runtime.meta.get_job(j)["worker"] for j in (job["id"], nxt["id"])}
        assert len(workers) == 1  # the same worker process ran both: it survived
        report = collect(runtime.meta, runtime.art, grace_s=0)
        assert report["models"] == [] and report["datasets"] == []
        assert sorted(p.name for p in (settings.data_dir / "models").iterdir()) == [f"{mid}.joblib"]


@pytest.mark.slow
def test_cancel_stops_a_large_fit_in_a_capped_worker(tmp_path):
    """Under the worker memory cap, a fit with large weights that stays within it runs until a cancel, which
    stops it at its next epoch: the job is cancelled, its model failed, and the same worker runs the next job."""
    settings = Settings(data_dir=tmp_path / "d", workers=1, secret_key="s", worker_memory_bytes=CAP,
                        job_poll_interval=0.05)
    with TestClient(create_app(settings)) as client:
        ds = _iris(client)
        r = client.post("/v1/train", json={"algorithm": "mlp_classifier", "dataset_id": ds, "target": "species",
                                           "params": {"hidden_layer_sizes": [2_000, 2_000], "max_iter": 1_000_000,
                                                      "tol": 0.0, "n_iter_no_change": 100_000}})
        assert r.status_code == 202, r.text
        job_id = r.json()["job"]["id"]
        deadline = time.monotonic() + 120
        while client.get(f"/v1/jobs/{job_id}").json()["status"] != "running":
            assert time.monotonic() < deadline, "the fit never started"
            time.sleep(0.05)
        time.sleep(1.0)  # well into its epochs
        assert client.post(f"/v1/jobs/{job_id}/cancel").status_code == 202
        job = wait_job(client, job_id, timeout=60)
        assert job["status"] == "cancelled", job
        assert client.get(f"/v1/models/{r.json()['model_id']}").json()["status"] == "failed"
        _, nxt = train(client, algorithm="logistic_regression", dataset_id=ds, target="species")
        assert nxt["status"] == "succeeded", nxt
        runtime = client.app.state.runtime
        assert runtime.meta.get_job(job_id)["worker"] == runtime.meta.get_job(nxt["id"])["worker"]
