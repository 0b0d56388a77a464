import pickle
import time

import joblib
import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from service.storage.artifacts import MAGIC, ArtifactError, ArtifactStore
from tests.service.conftest import assert_problem, iris_csv, train, upload_csv, wait_job


class Exploit:
    """Unpickling this writes a marker file: proof that something was deserialised."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_bundle_signature_round_trip_and_refusals(tmp_path):
    store = ArtifactStore(tmp_path, b"k1")
    store.save_bundle("m1", {"a": [1, 2, 3]})
    assert store.load_bundle("m1") == {"a": [1, 2, 3]}
    blob = store.model_path("m1").read_bytes()
    assert blob.startswith(MAGIC)
    # a different key refuses the same file
    with pytest.raises(ArtifactError, match="signature"):
        ArtifactStore(tmp_path, b"k2").load_bundle("m1")
    # a flipped byte in the payload is refused
    tampered = bytearray(blob)
    tampered[-5] ^= 0xFF
    store.model_path("m1").write_bytes(bytes(tampered))
    with pytest.raises(ArtifactError, match="signature"):
        store.load_bundle("m1")
    # an unsigned joblib file carrying a malicious pickle is refused and never unpickled
    marker = tmp_path / "pwned"
    joblib.dump(Exploit(str(marker)), store.model_path("m2"))
    with pytest.raises(ArtifactError, match="not a signed"):
        store.load_bundle("m2")
    store.model_path("m3").write_bytes(MAGIC + b"\0" * 32 + pickle.dumps(Exploit(str(marker))))
    with pytest.raises(ArtifactError, match="signature"):
        store.load_bundle("m3")
    assert not marker.exists()
    with pytest.raises(ArtifactError, match="missing"):
        store.load_bundle("nope")
    assert not [p for p in (tmp_path / "models").iterdir() if p.name.endswith(".tmp")]


def test_tampered_model_is_refused_over_http(client, settings, tmp_path):
    ds = upload_csv(client, iris_csv()).json()["id"]
    mid, job = train(client, algorithm="logistic_regression", dataset_id=ds, target="species")
    assert job["status"] == "succeeded"
    path = settings.data_dir / "models" / f"{mid}.joblib"
    marker = tmp_path / "pwned"
    path.write_bytes(MAGIC + b"\1" * 32 + pickle.dumps(Exploit(str(marker))))
    client.app.state.runtime.cache.evict(mid)
    r = client.post(f"/v1/models/{mid}/predict", json={"rows": [[5.1, 3.5, 1.4, 0.2]]})
    body = assert_problem(r, 500, "signature")
    assert body["type"].endswith("artifact-integrity")
    assert not marker.exists()


def test_secret_key_generated_once_and_kept(tmp_path):
    s = Settings(data_dir=tmp_path, workers=0)
    k1 = s.resolved_secret()
    assert len(k1) == 64 and (tmp_path / "secret.key").stat().st_mode & 0o077 == 0
    assert Settings(data_dir=tmp_path, workers=0).resolved_secret() == k1


def _long_fit_body(ds):
    # gradient descent with a negligible penalty keeps moving until cancelled (one progress step per iteration)
    return {"algorithm": "logistic_regression", "dataset_id": ds, "target": "species",
            "params": {"solver": "gd", "max_iter": 1_000_000, "tol": 1e-300, "C": 1e10}}


def _cancel_running(client, ds):
    r = client.post("/v1/train", json=_long_fit_body(ds))
    job_id, mid = r.json()["job"]["id"], r.json()["model_id"]
    deadline = time.monotonic() + 30
    while client.get(f"/v1/jobs/{job_id}").json()["status"] != "running":
        assert time.monotonic() < deadline, "job never started"
        time.sleep(0.02)
    time.sleep(0.5)
    assert client.get(f"/v1/jobs/{job_id}").json()["progress"] >= 0.0
    t0 = time.monotonic()
    c = client.post(f"/v1/jobs/{job_id}/cancel")
    assert c.status_code == 202
    job = wait_job(client, job_id, timeout=10)
    elapsed = time.monotonic() - t0
    assert job["status"] == "cancelled", job
    model = client.get(f"/v1/models/{mid}").json()
    assert model["status"] == "failed" and "cancelled" in model["metrics"]["error"]
    assert_problem(client.post(f"/v1/models/{mid}/predict", json={"rows": [[1, 1, 1, 1]]}), 409)
    assert_problem(client.post(f"/v1/jobs/{job_id}/cancel"), 409)
    return elapsed


def test_cancel_running_fit_thread_mode(client):
    ds = upload_csv(client, iris_csv()).json()["id"]
    assert _cancel_running(client, ds) < 5


@pytest.mark.slow
def test_process_pool_runs_and_cancels(tmp_path):
    settings = Settings(data_dir=tmp_path / "d", workers=1, secret_key="s", job_poll_interval=0.05)
    with TestClient(create_app(settings)) as client:
        ds = upload_csv(client, iris_csv()).json()["id"]
        mid, job = train(client, algorithm="logistic_regression", dataset_id=ds, target="species")
        assert job["status"] == "succeeded", job
        assert job["started_at"] is not None
        assert _cancel_running(client, ds) < 5
        # the pool survives and runs the next job
        mid2, job2 = train(client, algorithm="kmeans", params={"n_clusters": 3}, dataset_id=ds,
                           features=["petal_length"])
        assert job2["status"] == "succeeded"
