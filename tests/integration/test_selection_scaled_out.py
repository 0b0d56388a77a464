"""Scaled-out model selection: a tune's trials are RQ jobs of their own, run by two `orchard worker` processes;
cancelling the tune stops the trials running on both."""

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.integration.test_scaled_out import ROOT, pg_url, redis_url  # noqa: F401 - fixtures
from tests.service.conftest import iris_csv, upload_csv, wait_job
from tests.service.test_selection import SLOW, _children

pytestmark = [pytest.mark.services, pytest.mark.slow]


@pytest.fixture
def scaled_out(tmp_path, pg_url, redis_url):  # noqa: F811
    """An API on PostgreSQL + Redis and two `orchard worker` processes sharing its data directory."""
    settings = Settings(data_dir=tmp_path / "shared", database_url=pg_url, queue_url=redis_url,
                        queue_name=f"orchard-test-{uuid.uuid4().hex[:8]}", secret_key="shared-secret")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
    env.update({"PYTHONPATH": str(ROOT), "ORCHARD_DATABASE_URL": settings.database_url,
                "ORCHARD_QUEUE_URL": settings.queue_url, "ORCHARD_QUEUE_NAME": settings.queue_name,
                "ORCHARD_SECRET_KEY": settings.secret_key, "ORCHARD_DATA_DIR": str(settings.data_dir),
                "ORCHARD_JOB_POLL_INTERVAL": "0.2"})
    workers = [subprocess.Popen([sys.executable, "-m", "service.cli", "worker"], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
               for _ in range(2)]
    try:
        _wait_for_workers(settings, 2, workers)
        with TestClient(create_app(settings)) as api:
            yield api
    finally:
        for w in workers:
            try:
                os.killpg(w.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for w in workers:
            try:
                w.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(w.pid, signal.SIGKILL)
                w.wait()


def _wait_for_workers(settings, n, procs, timeout=90.0):
    """Both workers listening on the queue before a test submits work: on a loaded machine a worker still
    importing would leave the other to run every trial alone (what the overlap test asserts against)."""
    from redis import Redis
    from rq import Queue, Worker

    conn = Redis.from_url(settings.queue_url)
    queue = Queue(settings.queue_name, connection=conn)
    deadline = time.monotonic() + timeout
    while Worker.count(queue=queue) < n:
        dead = [p.returncode for p in procs if p.poll() is not None]
        assert not dead, f"a worker exited with {dead}"
        assert time.monotonic() < deadline, f"{Worker.count(queue=queue)} of {n} workers registered"
        time.sleep(0.1)


def test_tune_trials_run_on_two_rq_workers_at_once(scaled_out):
    api = scaled_out
    ds = upload_csv(api, iris_csv()).json()["id"]
    r = api.post("/v1/tune", json={"algorithm": "random_forest_classifier",
                                   "params": {"n_estimators": 60, "random_state": 0},
                                   "space": {"max_depth": [2, 3, 4, 5, 6, 8]}, "dataset_id": ds,
                                   "target": "species", "folds": 3, "random_state": 0})
    assert r.status_code == 202, r.text
    job = wait_job(api, r.json()["job"]["id"], timeout=240)
    assert job["status"] == "succeeded", job
    runs = sorted((r for t in job["result"]["trials"] for r in t["runs"]), key=lambda r: r["started"])
    assert len(runs) == 6 * 3  # one RQ job per (candidate, fold)
    # two trials ran at the same time (in different processes): the parent did not loop alone
    overlapping = [(a, b) for i, a in enumerate(runs) for b in runs[i + 1:]
                   if b["started"] < a["finished"] and a["worker"] != b["worker"]]
    assert overlapping, runs
    model = api.get(f"/v1/models/{job['result']['model_id']}").json()
    assert model["status"] == "ready" and model["job_id"] == job["id"]


def test_cancelling_a_tune_stops_the_trials_running_on_every_worker(scaled_out):
    api = scaled_out
    meta = api.app.state.runtime.meta
    ds = upload_csv(api, iris_csv()).json()["id"]
    # fits that never converge: only cancellation ends them
    r = api.post("/v1/tune", json={"algorithm": "logistic_regression", "params": SLOW,
                                   "space": {"penalty": ["l2", "none"], "fit_intercept": [True, False]},
                                   "dataset_id": ds, "target": "species", "folds": 3})
    assert r.status_code == 202, r.text
    job_id = r.json()["job"]["id"]
    deadline = time.monotonic() + 120
    while sum(c.status == "running" for c in _children(meta, job_id)) < 2:  # both workers (or parent) busy
        assert time.monotonic() < deadline, _children(meta, job_id)
        time.sleep(0.05)
    running = {c.worker for c in _children(meta, job_id) if c.status == "running"}
    assert api.post(f"/v1/jobs/{job_id}/cancel").status_code == 202
    assert wait_job(api, job_id, timeout=60)["status"] == "cancelled"
    deadline = time.monotonic() + 60
    while any(c.status != "cancelled" for c in _children(meta, job_id)):
        assert time.monotonic() < deadline, _children(meta, job_id)
        time.sleep(0.1)
    assert meta.get_model(r.json()["job"]["model_id"]) is None  # no refit, no model
    # the workers are free again: an ordinary training job runs to the end
    t = api.post("/v1/train", json={"algorithm": "logistic_regression", "dataset_id": ds, "target": "species"})
    assert t.status_code == 202, t.text
    assert wait_job(api, t.json()["job"]["id"], timeout=60)["status"] == "succeeded", running
