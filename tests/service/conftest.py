import threading
import time

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings

TERMINAL = ("succeeded", "failed", "cancelled")


@pytest.fixture
def settings(tmp_path):
    return Settings(data_dir=tmp_path / "data", workers=0, max_body_bytes=2_000_000, secret_key="test-secret")


@pytest.fixture
def client(settings):
    with TestClient(create_app(settings)) as c:
        yield c


def wait_job(client, job_id, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in TERMINAL:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish: {job}")


def iris_csv() -> str:
    from sklearn.datasets import load_iris

    d = load_iris()
    names = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
    lines = [",".join(names + ["species"])]
    for row, t in zip(d.data, d.target, strict=True):
        lines.append(",".join(f"{v:g}" for v in row) + "," + d.target_names[t])
    return "\n".join(lines) + "\n"


def upload_csv(client, text, name=None, types=None):
    params = {}
    if name:
        params["name"] = name
    if types:
        params["types"] = types
    r = client.post("/v1/datasets", content=text.encode(), params=params, headers={"content-type": "text/csv"})
    return r


def train(client, **body):
    r = client.post("/v1/train", json=body)
    assert r.status_code == 202, r.text
    job = wait_job(client, r.json()["job"]["id"])
    return r.json()["model_id"], job


def assert_problem(r, status, *fragments):
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers["content-type"]
    body = r.json()
    assert body["status"] == status and body["title"] and body["detail"]
    for f in fragments:
        assert f in body["detail"], (f, body["detail"])
    return body


def assert_consistent(meta):
    """The lifecycle's invariants: no job left queued/running, and a model is ready only under a succeeded job."""
    from service.storage.metadata import jobs, models

    with meta.engine.connect() as conn:
        unfinished = jobs.select().where(jobs.c.status.in_(["queued", "running"]))
        open_jobs = [dict(r._mapping) for r in conn.execute(unfinished)]
        ready = [(r.id, r.job_id) for r in conn.execute(models.select().where(models.c.status == "ready"))]
        status = {r.id: r.status for r in conn.execute(jobs.select())}
    assert open_jobs == [], open_jobs
    assert all(status.get(job_id) == "succeeded" for _, job_id in ready), (ready, status)


def while_paused(obj, name: str, request, during, *, when=lambda *args, **kw: True, timeout: float = 10.0):
    """Runs ``request()`` on a thread until it calls ``obj.<name>`` (a call for which ``when(*args, **kw)``
    holds), runs ``during()`` while that call waits, then lets it go on: ``(request's result, during's result)``.
    The window a race hits by chance, every run (a delete while a load or a download is under way)."""
    original = getattr(obj, name)
    entered, go = threading.Event(), threading.Event()

    def paused(*args, **kw):
        if when(*args, **kw):
            entered.set()
            assert go.wait(timeout)
        return original(*args, **kw)

    setattr(obj, name, paused)
    out = []
    thread = threading.Thread(target=lambda: out.append(request()))
    try:
        thread.start()
        assert entered.wait(timeout), f"the request never called {name}"
        meanwhile = during()
        go.set()
        thread.join(2 * timeout)
    finally:
        go.set()
        setattr(obj, name, original)
    assert out, "the request did not finish"
    return out[0], meanwhile
