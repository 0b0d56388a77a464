"""The worker memory cap on RQ: an `orchard worker` work-horse under ORCHARD_WORKER_MEMORY_BYTES fails a fit that
grows past it with a clear message, and the same worker goes on to run the next job."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.services.janitor import collect
from service.settings import Settings
from tests.service.conftest import iris_csv, upload_csv

ROOT = Path(__file__).resolve().parents[2]
REDIS = "redis://127.0.0.1:6379/0"
CAP = 1536 * 1024 * 1024
pytestmark = [pytest.mark.services, pytest.mark.slow]


@pytest.fixture
def redis_url():
    try:
        import redis

        redis.Redis.from_url(REDIS, socket_connect_timeout=3).ping()
    except Exception as exc:  # noqa: BLE001
        if os.environ.get("ORCHARD_REQUIRE_SERVICES"):
            raise AssertionError(f"Redis is required (ORCHARD_REQUIRE_SERVICES is set) but unreachable: {exc}") from exc
        pytest.skip(f"Redis on 127.0.0.1:6379 unreachable and ORCHARD_REQUIRE_SERVICES unset: {exc}")
    return REDIS


def test_a_work_horse_past_the_memory_cap_fails_its_job_and_the_worker_goes_on(tmp_path, redis_url):
    settings = Settings(data_dir=tmp_path / "shared", queue_url=redis_url, secret_key="shared",
                        queue_name=f"orchard-test-{uuid.uuid4().hex[:8]}", job_sweep_interval=3600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
    env.update({"PYTHONPATH": str(ROOT), "ORCHARD_QUEUE_URL": redis_url, "ORCHARD_QUEUE_NAME": settings.queue_name,
                "ORCHARD_SECRET_KEY": "shared", "ORCHARD_DATA_DIR": str(settings.data_dir),
                "ORCHARD_WORKER_MEMORY_BYTES": str(CAP)})
    with TestClient(create_app(settings)) as api:
        ds = upload_csv(api, iris_csv()).json()["id"]
        big = api.post("/v1/train", json={"algorithm": "mlp_classifier", "dataset_id": ds, "target": "species",
                                          "params": {"hidden_layer_sizes": [10_000, 10_000], "max_iter": 1}})
        small = api.post("/v1/train", json={"algorithm": "logistic_regression", "dataset_id": ds,
                                            "target": "species"})
        assert big.status_code == small.status_code == 202, (big.text, small.text)
        done = subprocess.run([sys.executable, "-m", "service.cli", "worker", "--burst"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        failed = api.get(f"/v1/jobs/{big.json()['job']['id']}").json()
        assert failed["status"] == "failed", failed
        assert failed["error"]["message"].startswith(f"training exceeded the worker memory limit of {CAP} bytes")
        ok = api.get(f"/v1/jobs/{small.json()['job']['id']}").json()
        assert ok["status"] == "succeeded", ok
        assert api.get("/health/ready").status_code == 200
        runtime = api.app.state.runtime
        report = collect(runtime.meta, runtime.art, grace_s=0)  # nothing orphaned once the grace has passed
        assert report["models"] == [] and report["datasets"] == [] and report["missing_models"] == []
        assert sorted(p.name for p in (settings.data_dir / "models").iterdir()) == [
            f"{small.json()['model_id']}.joblib"]
