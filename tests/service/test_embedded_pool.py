"""The embedded pool: workers forked by a preloaded, single-threaded forkserver; a killed worker's job fails and
the worker is replaced."""

import json
import multiprocessing.forkserver
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.queue.embedded import pool_context
from service.settings import Settings
from tests.service.conftest import assert_consistent, iris_csv, train, upload_csv, wait_job

ROOT = Path(__file__).resolve().parents[2]
BLAS_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

# run by `exec` in a child of the pool's context: nothing of the test module is imported there first
PROBE = """
import json, os, sys
from threadpoolctl import threadpool_info
json.dump({"preloaded": sorted(m for m in ("core.algorithms", "service.services.training", "scipy.linalg")
                               if m in sys.modules),
           "ppid": os.getppid(), "blas_threads": sorted({p["num_threads"] for p in threadpool_info()})},
          open(%r, "w"))
"""


def test_preload_limits_blas_threads_before_numpy_loads():
    """The forkserver's preload module, in a fresh interpreter without the variables (OpenBLAS would use one
    thread per core): BLAS has one thread, the training stack is imported, no thread was started."""
    env = {k: v for k, v in os.environ.items() if k not in BLAS_VARS}
    env["PYTHONPATH"] = str(ROOT)
    code = ("import json, os, sys, threading; import service.queue.worker_preload; "
            "from threadpoolctl import threadpool_info; "
            "print(json.dumps({'threads': threading.active_count(), "
            "'blas': sorted({p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas'}), "
            "'env': [os.environ.get(v) for v in " + repr(BLAS_VARS) + "], "
            "'loaded': 'service.services.training' in sys.modules and 'core.algorithms' in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=True)
    info = json.loads(out.stdout)
    assert info == {"threads": 1, "blas": [1], "env": ["1", "1", "1"], "loaded": True}, info


def test_pool_children_are_forks_of_the_warm_single_threaded_forkserver(tmp_path):
    ctx = pool_context()
    assert ctx.get_start_method() == "forkserver"
    out = tmp_path / "probe.json"
    p = ctx.Process(target=exec, args=(PROBE % str(out),))
    p.start()
    p.join(120)
    assert p.exitcode == 0
    info = json.loads(out.read_text())
    server = multiprocessing.forkserver._forkserver._forkserver_pid
    assert info["ppid"] == server != os.getpid()
    assert info["preloaded"] == ["core.algorithms", "scipy.linalg", "service.services.training"]
    assert info["blas_threads"] == [1]
    # forking is safe only from a process with one thread: the preload started none
    assert len(os.listdir(f"/proc/{server}/task")) == 1


@pytest.mark.slow
def test_killed_worker_fails_its_job_and_is_replaced(tmp_path):
    settings = Settings(data_dir=tmp_path / "d", workers=1, secret_key="s", job_poll_interval=0.05,
                        job_max_attempts=1)
    with TestClient(create_app(settings)) as client:
        ds = upload_csv(client, iris_csv()).json()["id"]
        r = client.post("/v1/train", json={"algorithm": "logistic_regression", "dataset_id": ds, "target": "species",
                                           "params": {"solver": "gd", "max_iter": 1_000_000, "tol": 1e-300,
                                                      "C": 1e10}})
        job_id, mid = r.json()["job"]["id"], r.json()["model_id"]
        deadline = time.monotonic() + 60
        while client.get(f"/v1/jobs/{job_id}").json()["status"] != "running":
            assert time.monotonic() < deadline, "job never started"
            time.sleep(0.02)
        meta = client.app.state.runtime.meta
        pid = int(meta.get_job(job_id)["worker"].rsplit(":", 1)[1])
        assert pid != os.getpid()
        os.kill(pid, signal.SIGKILL)
        job = wait_job(client, job_id, timeout=30)
        assert job["status"] == "failed", job
        assert "worker process running this job died" in job["error"]["message"], job
        assert job["error"]["type"] == "WorkerLost"
        assert client.get(f"/v1/models/{mid}").json()["status"] == "failed"
        # a new worker (a fresh fork of the forkserver) takes the next job
        deadline = time.monotonic() + 60
        while client.get("/health/ready").status_code != 200:
            assert time.monotonic() < deadline, "no worker came back"
            time.sleep(0.05)
        _, job2 = train(client, algorithm="logistic_regression", dataset_id=ds, target="species")
        assert job2["status"] == "succeeded", job2
        assert int(meta.get_job(job2["id"])["worker"].rsplit(":", 1)[1]) not in (pid, os.getpid())
        assert_consistent(meta)
