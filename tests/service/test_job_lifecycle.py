"""The job lifecycle (services/jobs.py): attempt tokens, leases, the reconciler, cancel of a queued job, and the
embedded pool surviving SIGKILL of an idle or a busy worker."""

import datetime as dt
import os
import signal
import time

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.services import jobs as lifecycle
from service.services.jobs import Outcome
from service.settings import Settings
from service.storage.metadata import utcnow
from tests.service.conftest import assert_consistent, assert_problem, iris_csv, train, upload_csv, wait_job

LONG_FIT = {"solver": "gd", "max_iter": 1_000_000, "tol": 1e-300, "C": 1e10}  # runs until cancelled


def _submit(client, ds, params=None):
    r = client.post("/v1/train", json={"algorithm": "logistic_regression", "dataset_id": ds, "target": "species",
                                       "params": params or {}})
    assert r.status_code == 202, r.text
    return r.json()["job"]["id"], r.json()["model_id"]


def _wait(pred, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _running_pid(client, job_id, not_pid=None):
    def started():
        j = client.app.state.runtime.meta.get_job(job_id)
        return j["status"] == "running" and j["worker"] and int(j["worker"].rsplit(":", 1)[1]) != not_pid
    _wait(started, f"job {job_id} never (re)started")
    return int(client.app.state.runtime.meta.get_job(job_id)["worker"].rsplit(":", 1)[1])


def _freeze_outside_a_write(db, pid: int, tries: int = 50) -> None:
    """SIGSTOP ``pid`` at a moment it holds no SQLite write lock. A process frozen inside a write transaction
    (its lease renewal) blocks every writer of the file until it runs again: a limit of SQLite that
    docs/deployment.md states (PostgreSQL holds the row, not the database). That is not the fault under test."""
    import sqlite3

    for _ in range(tries):
        os.kill(pid, signal.SIGSTOP)
        conn = sqlite3.connect(db, timeout=0.2)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.rollback()
            return
        except sqlite3.OperationalError:  # caught mid-write: let it finish and try again
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.05)
        finally:
            conn.close()
    raise AssertionError("the worker was inside a write transaction every time it was stopped")


def _ready(client):
    _wait(lambda: client.get("/health/ready").status_code == 200, "the pool never became ready")


# -- the lifecycle itself, on the metadata store ---------------------------------------------------------
def _queued_job(client, ds):
    """A stored queued job that no queue holds (the queue's enqueue is bypassed)."""
    from service.services.training import submit_train

    r = client.app.state.runtime
    job, mid = submit_train(r.meta, r.art, {"algorithm": "kmeans", "dataset_id": ds, "params": {"n_clusters": 2}},
                            lambda job_id: None)
    return r.meta.get_job(job["id"]), mid


def test_a_stale_attempt_changes_nothing(tmp_path, caplog):
    settings = Settings(data_dir=tmp_path / "d", workers=0, secret_key="s", job_max_attempts=2,
                        job_sweep_interval=3600)
    with TestClient(create_app(settings)) as client:
        meta, art = client.app.state.runtime.meta, client.app.state.runtime.art
        ds = upload_csv(client, iris_csv()).json()["id"]
        job, mid = _queued_job(client, ds)
        a1 = lifecycle.claim(meta, job["id"], "host:1", lease=30)
        assert a1 == 1 and lifecycle.claim(meta, job["id"], "host:2", lease=30) is None
        # attempt 1 is lost (its lease expired): re-queued, attempt 2 claims
        assert lifecycle.lose(meta, meta.get_job(job["id"]), "gone", 2) == "requeued"
        assert lifecycle.lose(meta, meta.get_job(job["id"]), "gone", 2) is None  # not running: nothing to lose
        a2 = lifecycle.claim(meta, job["id"], "host:3", lease=30)
        assert a2 == 2
        # the late finisher of attempt 1: no effect, its staged artifact discarded, a log line says why
        staged, _ = art.stage_bundle(mid, {"stale": True})
        assert lifecycle.succeed(meta, art, job, a1, Outcome({"x": 1}, {"metrics": {}}, staged)) == "stale"
        assert not staged.exists() and not art.model_path(mid).exists()
        assert "attempt 1 finished but the job is running at attempt 2" in caplog.text
        assert lifecycle.renew(meta, job["id"], a1, 30) == "stale"
        assert not lifecycle.fail(meta, job, a1, "X", "late failure")
        assert meta.get_job(job["id"])["status"] == "running" and meta.get_model(mid)["status"] == "training"
        # the current attempt succeeds: model ready in the same transaction, bundle published
        staged, size = art.stage_bundle(mid, {"ok": True})
        out = Outcome({"x": 2}, {"metrics": {"m": 1}, "size_bytes": size}, staged)
        assert lifecycle.succeed(meta, art, job, a2, out) == "succeeded"
        assert meta.get_model(mid)["status"] == "ready" and art.load_bundle(mid) == {"ok": True}
        assert_consistent(meta)


def test_reconciler_requeues_then_fails_expired_leases_and_enqueues_what_the_queue_lost(tmp_path):
    settings = Settings(data_dir=tmp_path / "d", workers=0, secret_key="s", job_max_attempts=2,
                        job_lease_timeout=5, job_sweep_interval=3600)
    with TestClient(create_app(settings)) as client:
        meta = client.app.state.runtime.meta
        ds = upload_csv(client, iris_csv()).json()["id"]
        job, mid = _queued_job(client, ds)
        enqueued = []
        later = utcnow() + dt.timedelta(hours=1)
        # queued, not held by the queue, older than a sweep interval: enqueued again
        out = lifecycle.reconcile(meta, settings, enqueued.append, held=lambda _: False, now=later)
        assert out["enqueued"] == [job["id"]] and enqueued == [job["id"]]
        assert lifecycle.reconcile(meta, settings, enqueued.append, held=lambda _: True, now=later)["enqueued"] == []
        lifecycle.claim(meta, job["id"], "host:1", lease=5)
        assert lifecycle.reconcile(meta, settings, enqueued.append, held=lambda _: True)["requeued"] == []  # alive
        out = lifecycle.reconcile(meta, settings, enqueued.append, held=lambda _: True,
                                  now=utcnow() + dt.timedelta(seconds=6))
        assert out["requeued"] == [job["id"]] and enqueued[-1] == job["id"]
        assert meta.get_job(job["id"])["status"] == "queued"
        lifecycle.claim(meta, job["id"], "host:2", lease=5)
        out = lifecycle.reconcile(meta, settings, enqueued.append, held=lambda _: True,
                                  now=utcnow() + dt.timedelta(seconds=6))
        assert out["failed"] == [job["id"]]
        failed = meta.get_job(job["id"])
        assert failed["error"]["type"] == "WorkerLost" and "attempt 2 of 2" in failed["error"]["message"]
        assert meta.get_model(mid)["status"] == "failed"
        assert_consistent(meta)


def test_cancel_of_a_queued_job_fails_its_model_and_it_can_be_deleted(tmp_path):
    settings = Settings(data_dir=tmp_path / "d", workers=0, secret_key="s", job_sweep_interval=3600)
    with TestClient(create_app(settings)) as client:
        ds = upload_csv(client, iris_csv()).json()["id"]
        job, mid = _queued_job(client, ds)
        r = client.post(f"/v1/jobs/{job['id']}/cancel")
        assert r.status_code == 202 and r.json()["status"] == "cancelled", r.text
        model = client.get(f"/v1/models/{mid}").json()
        assert model["status"] == "failed" and "cancelled before it started" in model["metrics"]["error"]
        assert_problem(client.post(f"/v1/jobs/{job['id']}/cancel"), 409, "already finished")
        assert client.delete(f"/v1/models/{mid}").status_code == 204
        assert_consistent(client.app.state.runtime.meta)


# -- the embedded pool under SIGKILL --------------------------------------------------------------------
@pytest.mark.slow
def test_sigkill_of_an_idle_worker_never_blocks_the_queue(tmp_path):
    settings = Settings(data_dir=tmp_path / "d", workers=1, secret_key="s", job_poll_interval=0.05)
    with TestClient(create_app(settings)) as client:
        ds = upload_csv(client, iris_csv()).json()["id"]
        queue = client.app.state.runtime.queue
        for _ in range(2):  # twice: the replacement worker is killed idle as well
            _ready(client)
            pid = queue._slots[0].pid
            os.kill(pid, signal.SIGKILL)
            _wait(lambda pid=pid: queue._slots[0].pid != pid, "the dead worker was not replaced")
        _ready(client)
        _, job = train(client, algorithm="logistic_regression", dataset_id=ds, target="species")
        assert job["status"] == "succeeded", job
        # a pool that cannot take work (its worker died and no new one can be started) is reported not ready
        from service.queue import embedded

        def cannot_start(self):
            raise OSError("no more processes")

        original = embedded._Slot.start
        embedded._Slot.start = cannot_start
        try:
            os.kill(queue._slots[0].pid, signal.SIGKILL)
            _wait(lambda: client.get("/health/ready").status_code == 503, "readiness still ok without a worker")
            body = client.get("/health/ready").json()
            assert "no worker process is ready" in body["checks"]["queue"], body
        finally:
            embedded._Slot.start = original
        _ready(client)  # the dispatcher keeps trying: back once a worker can be started
        _, job = train(client, algorithm="logistic_regression", dataset_id=ds, target="species")
        assert job["status"] == "succeeded", job
        assert_consistent(client.app.state.runtime.meta)


@pytest.mark.slow
def test_sigkill_of_a_busy_worker_retries_then_fails_and_queued_jobs_run(tmp_path):
    settings = Settings(data_dir=tmp_path / "d", workers=1, secret_key="s", job_poll_interval=0.05,
                        job_max_attempts=2)
    with TestClient(create_app(settings)) as client:
        ds = upload_csv(client, iris_csv()).json()["id"]
        job_id, mid = _submit(client, ds, LONG_FIT)
        pid1 = _running_pid(client, job_id)
        queued_id, queued_mid = _submit(client, ds)  # waits behind the long fit
        # cancel of a queued job in the pool: at once, model failed and deletable
        assert client.post(f"/v1/jobs/{queued_id}/cancel").json()["status"] == "cancelled"
        assert client.get(f"/v1/models/{queued_mid}").json()["status"] == "failed"
        assert client.delete(f"/v1/models/{queued_mid}").status_code == 204
        next_id, next_mid = _submit(client, ds)
        os.kill(pid1, signal.SIGKILL)  # attempt 1 lost: re-queued first and run again by the new worker
        pid2 = _running_pid(client, job_id, not_pid=pid1)
        os.kill(pid2, signal.SIGKILL)  # attempt 2 of 2 lost: failed
        job = wait_job(client, job_id, timeout=30)
        assert job["status"] == "failed" and job["error"]["type"] == "WorkerLost", job
        assert "worker process running this job died" in job["error"]["message"]
        assert "attempt 2 of 2" in job["error"]["message"]
        assert client.get(f"/v1/models/{mid}").json()["status"] == "failed"
        assert client.delete(f"/v1/models/{mid}").status_code == 204
        nxt = wait_job(client, next_id, timeout=60)
        assert nxt["status"] == "succeeded", nxt
        assert client.get(f"/v1/models/{next_mid}").json()["status"] == "ready"
        assert_consistent(client.app.state.runtime.meta)


@pytest.mark.slow
def test_a_frozen_worker_loses_its_lease_and_its_late_result_is_discarded(tmp_path):
    """SIGSTOP of a busy worker: its lease expires, the reconciler fails the job (no attempts left), the
    dispatcher kills the stale worker and replaces it; the pool runs the next job."""
    settings = Settings(data_dir=tmp_path / "d", workers=1, secret_key="s", job_poll_interval=0.05,
                        job_max_attempts=1, job_lease_timeout=1.0, job_sweep_interval=0.2)
    with TestClient(create_app(settings)) as client:
        ds = upload_csv(client, iris_csv()).json()["id"]
        job_id, mid = _submit(client, ds, LONG_FIT)
        pid = _running_pid(client, job_id)
        _freeze_outside_a_write(settings.data_dir / "orchard.db", pid)
        try:
            job = wait_job(client, job_id, timeout=30)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert job["status"] == "failed" and "stopped renewing its lease" in job["error"]["message"], job
        assert client.get(f"/v1/models/{mid}").json()["status"] == "failed"
        _, nxt = train(client, algorithm="logistic_regression", dataset_id=ds, target="species")
        assert nxt["status"] == "succeeded", nxt
        assert client.app.state.runtime.meta.get_job(job_id)["status"] == "failed"
        assert_consistent(client.app.state.runtime.meta)
