"""`orchard serve` as a real process: the README walkthrough, a restart, and a SIGKILL mid-job."""

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.integration._server import ServerProcess, free_port
from tests.service.conftest import iris_csv

pytestmark = pytest.mark.slow




def _wait(c: httpx.Client, job_id: str, states=("succeeded", "failed", "cancelled"), timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = c.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in states:
            return job
        time.sleep(0.1)
    raise AssertionError(job)


def test_walkthrough_restart_and_kill(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    server = ServerProcess(data, free_port()).start()
    try:
        c = httpx.Client(base_url=server.url, timeout=30)
        ds = c.post("/v1/datasets?name=iris", content=iris_csv(), headers={"content-type": "text/csv"})
        assert ds.status_code == 201, ds.text
        ds_id = ds.json()["id"]
        r = c.post("/v1/train", json={"algorithm": "logistic_regression", "dataset_id": ds_id,
                                      "target": "species", "name": "iris-lr"})
        assert r.status_code == 202
        job = _wait(c, r.json()["job"]["id"])
        assert job["status"] == "succeeded", job
        mid = r.json()["model_id"]
        rows = {"rows": [[5.1, 3.5, 1.4, 0.2], [6.0, 2.7, 5.1, 1.6], [6.7, 3.0, 5.2, 2.3]], "return_proba": True}
        before = c.post(f"/v1/models/{mid}/predict", json=rows).json()
        assert before["predictions"][0] == "setosa"
        ev = c.post(f"/v1/models/{mid}/evaluate", json={"dataset_id": ds_id}).json()
        assert ev["metrics"]["accuracy"] > 0.9
        # a long job, killed with the whole server mid-fit
        r = c.post("/v1/train", json={"algorithm": "logistic_regression", "dataset_id": ds_id, "target": "species",
                                      "params": {"solver": "gd", "max_iter": 1_000_000, "tol": 1e-300, "C": 1e10}})
        long_job = r.json()["job"]["id"]
        _wait(c, long_job, states=("running",))
        c.close()
    finally:
        server.stop(signal.SIGKILL)
    assert (data / "secret.key").exists()

    # the job left running has no worker renewing its lease: once it expires the reconciler fails it (one
    # attempt allowed here; with more it would be run again)
    server = ServerProcess(data, free_port(), ORCHARD_JOB_LEASE_TIMEOUT="1", ORCHARD_JOB_SWEEP_INTERVAL="0.2",
                    ORCHARD_JOB_MAX_ATTEMPTS="1").start()
    try:
        c = httpx.Client(base_url=server.url, timeout=30)
        job = _wait(c, long_job)
        assert job["status"] == "failed", job
        assert "stopped renewing its lease" in job["error"]["message"]
        assert c.get(f"/v1/models/{job['model_id']}").json()["status"] == "failed"
        after = c.post(f"/v1/models/{mid}/predict", json=rows).json()
        assert after == before
        assert c.get(f"/v1/datasets/{ds_id}").json()["n_rows"] == 150
        c.close()
    finally:
        server.stop()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_workers_exit_when_the_api_process_is_killed_alone(tmp_path):
    """SIGKILL of the API process only (the OOM killer, `kill -9 <pid>`): its training workers, children of
    the forkserver rather than of the API, must not linger waiting for jobs that will never come."""
    data = tmp_path / "data"
    data.mkdir()
    server = ServerProcess(data, free_port())
    server.start()
    pgid = server.proc.pid  # start_new_session: the server leads its own process group
    members = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _pgid(int(p.name)) == pgid]
    assert len(members) >= 3, members  # the API, the forkserver, the worker (and the resource tracker)
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in members if Path(f"/proc/{p}").exists()]
    try:
        assert not left, [Path(f"/proc/{p}/cmdline").read_bytes()[:120] for p in left]
    finally:
        if _group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)
        server.log.close()


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
