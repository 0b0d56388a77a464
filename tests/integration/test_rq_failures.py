"""RQ mode under failure: a Redis this test starts itself (own port, no persistence) is stopped, restarted empty
and frozen; the `orchard worker` main process is SIGKILLed with its work-horse alive, and a whole worker dies.
Each test ends with every job terminal and no `ready` model under a job that did not succeed."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.integration.test_scaled_out import _require, pg_url  # noqa: F401 - a fixture
from tests.service.conftest import assert_consistent, assert_problem, iris_csv, upload_csv, wait_job

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.services, pytest.mark.slow]

LONG_FIT = {"solver": "gd", "max_iter": 1_000_000, "tol": 1e-300, "C": 1e10}  # runs until stopped
SHORT_FIT = {"n_estimators": 100}  # random forest on iris: a second or a few


class OwnRedis:
    def __init__(self, exe: str, workdir: Path):
        self.exe, self.workdir = exe, workdir
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = None

    def start(self) -> None:
        self.proc = subprocess.Popen([self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", str(self.workdir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis

        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        client.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture
def own_redis(tmp_path):
    exe = shutil.which("redis-server")
    if exe is None:
        _require("redis-server (to start a Redis of the test's own)", FileNotFoundError("redis-server"))
    r = OwnRedis(exe, tmp_path)
    r.start()
    try:
        yield r
    finally:
        r.stop()


@pytest.fixture
def settings(tmp_path, pg_url, own_redis):  # noqa: F811 - the fixture imported above
    return Settings(data_dir=tmp_path / "shared", database_url=pg_url, queue_url=own_redis.url,
                    queue_name=f"orchard-test-{uuid.uuid4().hex[:8]}", secret_key="shared-secret",
                    job_lease_timeout=3.0, job_sweep_interval=0.3, job_max_attempts=2, job_poll_interval=0.05,
                    redis_socket_timeout=1.0, redis_connect_timeout=1.0)


class Workers:
    def __init__(self, settings: Settings):
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
        self.env["PYTHONPATH"] = str(ROOT)
        for name, value in settings.model_dump(exclude_none=True).items():
            self.env[f"ORCHARD_{name.upper()}"] = str(value)
        self.procs = []

    def start(self) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-m", "service.cli", "worker"], cwd=ROOT, env=self.env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(p)
        return p

    def kill_all(self) -> None:
        """Every worker main process and work-horse of this test (a horse runs in a session of its own and
        outlives a killed main process): the processes whose environment names this test's queue."""
        mark = f"ORCHARD_QUEUE_NAME={self.env['ORCHARD_QUEUE_NAME']}".encode()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                if mark in (proc / "environ").read_bytes().split(b"\0"):
                    os.kill(int(proc.name), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass
        for p in self.procs:
            p.wait(timeout=30)


@pytest.fixture
def workers(settings):
    w = Workers(settings)
    try:
        yield w
    finally:
        w.kill_all()


def _submit(api, ds, algorithm="random_forest_classifier", params=None):
    r = api.post("/v1/train", json={"algorithm": algorithm, "dataset_id": ds, "target": "species",
                                    "params": SHORT_FIT if params is None else params})
    assert r.status_code == 202, r.text
    return r.json()["job"]["id"], r.json()["model_id"]


def _wait(pred, what, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, what() if callable(what) else what
        time.sleep(0.05)


def _running(api, job_id):
    _wait(lambda: api.get(f"/v1/jobs/{job_id}").json()["status"] == "running", f"job {job_id} never started")
    return int(api.app.state.runtime.meta.get_job(job_id)["worker"].rsplit(":", 1)[1])


def _finish(api, *job_ids):
    """Every job reaches a terminal state within the documented bound (plus worker start-up)."""
    return [wait_job(api, j, timeout=120) for j in job_ids]


def test_cancel_of_a_queued_rq_job(settings, workers):
    with TestClient(create_app(settings)) as api:
        ds = upload_csv(api, iris_csv()).json()["id"]
        job_id, mid = _submit(api, ds)  # no worker yet: stays queued
        r = api.post(f"/v1/jobs/{job_id}/cancel")
        assert r.status_code == 202 and r.json()["status"] == "cancelled", r.text
        model = api.get(f"/v1/models/{mid}").json()
        assert model["status"] == "failed" and "cancelled before it started" in model["metrics"]["error"]
        assert_problem(api.post(f"/v1/jobs/{job_id}/cancel"), 409, "already finished")
        assert api.delete(f"/v1/models/{mid}").status_code == 204
        # a worker that later pops the cancelled job leaves it alone, and runs the next one
        workers.start()
        nxt, nmid = _submit(api, ds)
        assert _finish(api, nxt)[0]["status"] == "succeeded"
        assert api.get(f"/v1/jobs/{job_id}").json()["status"] == "cancelled"
        assert_consistent(api.app.state.runtime.meta)


def test_redis_stopped_and_restarted_empty_while_a_job_runs_and_one_is_submitted(settings, own_redis, workers):
    """Submitting while Redis is down stores the job (202); when Redis is back (empty) the reconciler enqueues
    it; the worker waits the outage out and runs it; the running job finishes meanwhile."""
    with TestClient(create_app(settings)) as api:
        ds = upload_csv(api, iris_csv()).json()["id"]
        worker = workers.start()
        running_id, running_mid = _submit(api, ds, params=SHORT_FIT)
        _running(api, running_id)
        own_redis.stop()
        assert api.get("/health/ready").status_code == 503
        down_id, down_mid = _submit(api, ds)
        assert api.get(f"/v1/jobs/{down_id}").json()["status"] == "queued"
        assert wait_job(api, running_id, timeout=120)["status"] == "succeeded"  # its state lives in PostgreSQL
        time.sleep(1.0)  # an outage of some length: the worker keeps retrying meanwhile
        assert worker.poll() is None, "the worker exited during the Redis outage"
        own_redis.start()  # empty: no persistence
        jobs = _finish(api, down_id)
        assert jobs[0]["status"] == "succeeded", jobs
        assert worker.poll() is None
        assert api.get(f"/v1/models/{running_mid}").json()["status"] == "ready"
        assert api.get(f"/v1/models/{down_mid}").json()["status"] == "ready"
        assert_consistent(api.app.state.runtime.meta)


def test_queued_jobs_lost_with_redis_data_are_enqueued_again(settings, own_redis, workers):
    with TestClient(create_app(settings)) as api:
        ds = upload_csv(api, iris_csv()).json()["id"]
        ids = [_submit(api, ds)[0] for _ in range(2)]  # enqueued, no worker yet
        own_redis.stop()
        own_redis.start()  # restarted empty: RQ forgot both
        workers.start()
        assert [j["status"] for j in _finish(api, *ids)] == ["succeeded", "succeeded"]
        assert api.app.state.runtime.meta.count_jobs("queued") == 0
        assert_consistent(api.app.state.runtime.meta)


def test_redis_frozen_with_a_running_and_a_submitted_job(settings, own_redis, workers):
    with TestClient(create_app(settings)) as api:
        ds = upload_csv(api, iris_csv()).json()["id"]
        worker = workers.start()
        running_id, _ = _submit(api, ds, params=SHORT_FIT)
        _running(api, running_id)
        os.kill(own_redis.proc.pid, signal.SIGSTOP)
        try:
            frozen_id, _ = _submit(api, ds)  # the enqueue times out (ORCHARD_REDIS_SOCKET_TIMEOUT): stored, 202
            assert api.get("/health/ready").status_code == 503
            assert wait_job(api, running_id, timeout=120)["status"] == "succeeded"
        finally:
            os.kill(own_redis.proc.pid, signal.SIGCONT)
        assert _finish(api, frozen_id)[0]["status"] == "succeeded"
        assert worker.poll() is None
        assert_consistent(api.app.state.runtime.meta)


def test_sigkill_of_the_worker_main_process_with_its_horse_alive(settings, workers):
    """The horse holds the job's lease and finishes it: the job succeeds and only then is its model ready.
    Then a horse alone is killed (attempt lost at once, retried), then a whole worker (lease expires: failed)."""
    with TestClient(create_app(settings)) as api:
        ds = upload_csv(api, iris_csv()).json()["id"]
        main = workers.start()
        job_id, mid = _submit(api, ds, params=SHORT_FIT)
        horse = _running(api, job_id)
        assert horse != main.pid
        os.kill(main.pid, signal.SIGKILL)  # the process, not its group: the horse goes on
        main.wait(timeout=30)
        job = wait_job(api, job_id, timeout=120)
        assert job["status"] == "succeeded", job
        assert api.get(f"/v1/models/{mid}").json()["status"] == "ready"
        # the work-horse alone killed mid-fit (the OOM killer): its main process declares the attempt lost at
        # once, the reconciler enqueues the job again and the same worker runs attempt 2
        second = workers.start()
        lost_id, lost_mid = _submit(api, ds, algorithm="logistic_regression", params=LONG_FIT)
        horse = _running(api, lost_id)
        os.kill(horse, signal.SIGKILL)
        meta = api.app.state.runtime.meta
        _wait(lambda: meta.get_job(lost_id)["attempt"] == 2 and meta.get_job(lost_id)["status"] == "running",
              lambda: f"attempt 2 never started: {meta.get_job(lost_id)}")
        horse2 = int(meta.get_job(lost_id)["worker"].rsplit(":", 1)[1])
        assert horse2 != horse and second.poll() is None
        # then the whole worker dies (machine death): nobody renews the lease; attempt 2 of 2 lost: failed
        os.kill(second.pid, signal.SIGKILL)
        os.kill(horse2, signal.SIGKILL)  # RQ starts each horse in a session of its own
        second.wait(timeout=30)
        job = wait_job(api, lost_id, timeout=120)
        assert job["status"] == "failed" and job["error"]["type"] == "WorkerLost", job
        assert "stopped renewing its lease" in job["error"]["message"] and "attempt 2 of 2" in job["error"]["message"]
        assert api.get(f"/v1/models/{lost_mid}").json()["status"] == "failed"
        assert_consistent(meta)


def test_a_job_past_its_timeout_is_failed(settings, workers):
    settings = settings.model_copy(update={"job_timeout": 2.0})
    workers.env["ORCHARD_JOB_TIMEOUT"] = "2.0"
    with TestClient(create_app(settings)) as api:
        ds = upload_csv(api, iris_csv()).json()["id"]
        workers.start()
        job_id, mid = _submit(api, ds, algorithm="logistic_regression", params=LONG_FIT)
        job = wait_job(api, job_id, timeout=120)
        assert job["status"] == "failed" and job["error"]["type"] == "JobTimeout", job
        assert "ORCHARD_JOB_TIMEOUT" in job["error"]["message"]
        assert api.get(f"/v1/models/{mid}").json()["status"] == "failed"
        assert_consistent(api.app.state.runtime.meta)
