"""Scaled-out mode: API on PostgreSQL metadata + RQ queue on Redis, jobs run by `orchard worker` processes."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.service.conftest import iris_csv, upload_csv

ROOT = Path(__file__).resolve().parents[2]
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
REDIS = "redis://127.0.0.1:6379/0"
pytestmark = [pytest.mark.services, pytest.mark.slow]


def _require(what: str, exc: Exception):
    if os.environ.get("ORCHARD_REQUIRE_SERVICES"):
        raise AssertionError(f"{what} is required (ORCHARD_REQUIRE_SERVICES is set) but unreachable: {exc}")
    pytest.skip(f"{what} unreachable and ORCHARD_REQUIRE_SERVICES unset: {exc}")


@pytest.fixture
def pg_url():
    try:
        import psycopg

        admin = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
    except Exception as exc:  # noqa: BLE001
        _require("PostgreSQL on 127.0.0.1:5432", exc)
    name = f"orchard_{uuid.uuid4().hex[:12]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture
def redis_url():
    try:
        import redis

        redis.Redis.from_url(REDIS, socket_connect_timeout=3).ping()
    except Exception as exc:  # noqa: BLE001
        _require("Redis on 127.0.0.1:6379", exc)
    return REDIS


def _run_worker(settings: Settings) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
    env.update({"PYTHONPATH": str(ROOT), "ORCHARD_DATABASE_URL": settings.database_url,
                "ORCHARD_QUEUE_URL": settings.queue_url, "ORCHARD_QUEUE_NAME": settings.queue_name,
                "ORCHARD_SECRET_KEY": settings.secret_key, "ORCHARD_DATA_DIR": str(settings.data_dir)})
    return subprocess.run([sys.executable, "-m", "service.cli", "worker", "--burst"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_two_replicas_and_a_worker(tmp_path, pg_url, redis_url):
    settings = Settings(data_dir=tmp_path / "shared", database_url=pg_url, queue_url=redis_url,
                        queue_name=f"orchard-test-{uuid.uuid4().hex[:8]}", secret_key="shared-secret")
    with TestClient(create_app(settings)) as api1, TestClient(create_app(settings)) as api2:
        ready = api1.get("/health/ready").json()
        assert ready["checks"] == {"metadata": "ok", "artifacts": "ok", "queue": "ok"}
        ds = upload_csv(api1, iris_csv()).json()["id"]
        r = api2.post("/v1/train", json={"algorithm": "logistic_regression", "dataset_id": ds, "target": "species"})
        assert r.status_code == 202, r.text
        job_id, mid = r.json()["job"]["id"], r.json()["model_id"]
        assert api1.get(f"/v1/jobs/{job_id}").json()["status"] == "queued"
        # a failing job too: its dataset disappears before a worker picks it up
        ds2 = upload_csv(api1, iris_csv()).json()["id"]
        r2 = api1.post("/v1/train", json={"algorithm": "kmeans", "dataset_id": ds2})
        api1.delete(f"/v1/datasets/{ds2}")
        done = _run_worker(settings)
        assert done.returncode == 0, done.stderr[-2000:]
        job = api1.get(f"/v1/jobs/{job_id}").json()
        assert job["status"] == "succeeded", job
        assert job["started_at"] and job["finished_at"]
        p = api2.post(f"/v1/models/{mid}/predict", json={"rows": [[5.1, 3.5, 1.4, 0.2]]}).json()
        assert p["predictions"] == ["setosa"]
        failed = api2.get(f"/v1/jobs/{r2.json()['job']['id']}").json()
        assert failed["status"] == "failed" and ds2 in failed["error"]["message"]
        assert api1.get(f"/v1/models/{r2.json()['model_id']}").json()["status"] == "failed"


def test_a_job_whose_worker_dies_is_failed_by_the_sweep(tmp_path, pg_url, redis_url):
    """A worker killed mid-job (SIGKILL to it and its work-horse: its machine died) leaves the record
    `running`; once RQ's heartbeat expiry declares the job abandoned, the API's sweep fails it and its
    model, with a message. A sweep while the worker is alive leaves the job alone."""
    import signal
    import time

    settings = Settings(data_dir=tmp_path / "shared", database_url=pg_url, queue_url=redis_url,
                        queue_name=f"orchard-test-{uuid.uuid4().hex[:8]}", secret_key="shared-secret",
                        job_sweep_interval=3600)  # the test drives the sweep itself
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
    env.update({"PYTHONPATH": str(ROOT), "ORCHARD_DATABASE_URL": settings.database_url,
                "ORCHARD_QUEUE_URL": settings.queue_url, "ORCHARD_QUEUE_NAME": settings.queue_name,
                "ORCHARD_SECRET_KEY": settings.secret_key, "ORCHARD_DATA_DIR": str(settings.data_dir)})
    with TestClient(create_app(settings)) as api:
        ds = upload_csv(api, iris_csv()).json()["id"]
        r = api.post("/v1/train", json={"algorithm": "random_forest_classifier", "dataset_id": ds,
                                        "target": "species", "params": {"n_estimators": 10_000}})
        assert r.status_code == 202, r.text
        job_id, mid = r.json()["job"]["id"], r.json()["model_id"]
        worker = subprocess.Popen([sys.executable, "-m", "service.cli", "worker"], cwd=ROOT, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while api.get(f"/v1/jobs/{job_id}").json()["status"] != "running":
                assert time.monotonic() < deadline, "the worker never started the job"
                time.sleep(0.1)
            queue = api.app.state.runtime.queue
            assert queue.sweep() == []  # alive and heart-beating: left alone
            assert api.get(f"/v1/jobs/{job_id}").json()["status"] == "running"
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(timeout=30)
            assert queue.sweep() == []  # RQ cannot tell yet: the heartbeat has not expired
            assert queue.sweep(now=time.time() + 3600) == [job_id]  # an hour later, it has
        finally:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(timeout=30)
        job = api.get(f"/v1/jobs/{job_id}").json()
        assert job["status"] == "failed" and "worker running this job was lost" in job["error"]["message"], job
        assert api.get(f"/v1/models/{mid}").json()["status"] == "failed"
        assert queue.sweep(now=time.time() + 3600) == []  # already failed: nothing more to do
