"""Routes over the services they call: the versioned V2 infer route answers as the front door does, readiness
names the stores that fail, a multipart upload reads its form through the API layer, a job's event stream
follows its record."""

import asyncio

import numpy as np
import orjson
import pytest

from service.services import jobs as lifecycle
from tests.service.conftest import iris_csv, train, upload_csv
from tests.service.test_observability import scrape

ROWS = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]
TENSOR = {"name": "input", "shape": [2, 4], "datatype": "FP64", "data": sum(ROWS, [])}


@pytest.fixture
def model(client):
    ds = upload_csv(client, iris_csv(), name="iris").json()["id"]
    mid, job = train(client, algorithm="logistic_regression", dataset_id=ds, target="species", name="lr")
    assert job["status"] == "succeeded"
    return mid


def test_versioned_infer_route_answers_as_the_front_door(client, model):
    door, route = f"/v2/models/{model}/infer", f"/v2/models/{model}/versions/1/infer"
    X = np.asarray(ROWS, dtype=np.float32)
    head = orjson.dumps({"inputs": [{"name": "input", "shape": [2, 4], "datatype": "FP32",
                                     "parameters": {"binary_data_size": X.nbytes}}],
                         "outputs": [{"name": "predict", "parameters": {"binary_data": True}}]})
    binary = {"content": head + X.tobytes(), "headers": {"Inference-Header-Content-Length": str(len(head)),
                                                          "content-type": "application/octet-stream"}}
    asks = [
        {"json": {"inputs": [TENSOR]}},
        {"content": orjson.dumps({"inputs": [TENSOR]}), "headers": {"content-type": "Application/JSON; charset=utf-8"}},
        binary,
        {"content": b"a,b", "headers": {"content-type": "text/csv"}},  # 415: the one content-type check
        {"content": b"{}", "headers": {"content-type": "application/x-www-form-urlencoded"}},
        {"content": b"{not json"},
    ]
    for kw in asks:
        a, b = client.post(door, **kw), client.post(route, **kw)
        assert (a.status_code, a.content) == (b.status_code, b.content), kw
        assert a.headers.get("inference-header-content-length") == b.headers.get("inference-header-content-length")
    assert [client.post(route, **kw).status_code for kw in asks] == [200, 200, 200, 415, 415, 400]
    assert "Inference-Header-Content-Length" in client.post(route, **asks[3]).json()["error"]
    # both count the rows they predicted: 3 answers of 2 rows each, twice over, and the 3 of the line above
    assert scrape(client)[("orchard_predicted_rows_total", (("protocol", "v2"),))] == 2 * 3 * 2 + 3 * 2


def test_readiness_names_every_failing_store_and_v2_the_first(client, monkeypatch):
    runtime = client.app.state.runtime
    pinged = []

    def failing(name):
        def ping():
            pinged.append(name)
            raise ConnectionError(f"{name} is down")
        return ping

    monkeypatch.setattr(runtime.meta, "ping", failing("metadata"))
    monkeypatch.setattr(runtime.queue, "ping", failing("queue"))
    r = client.get("/health/ready")
    assert r.status_code == 503 and r.headers["content-type"] == "application/problem+json"
    body = r.json()
    assert body["detail"] == "not ready: metadata, queue not answering"
    assert body["checks"] == {"metadata": "failing: metadata is down", "artifacts": "ok",
                              "queue": "failing: queue is down"}
    assert pinged == ["metadata", "queue"]
    pinged.clear()
    r = client.get("/v2/health/ready")
    assert r.status_code == 503 and r.json() == {"error": "not ready: metadata not answering (metadata is down)"}
    assert pinged == ["metadata"]  # the first failure answers; the queue is not asked
    monkeypatch.undo()
    assert client.get("/health/ready").json() == {"status": "ok", "checks": dict.fromkeys(
        ("metadata", "artifacts", "queue"), "ok")}


def test_multipart_upload_reads_its_file_and_name_fields(client):
    csv = b"x,y\n1,a\n2,b\n"
    r = client.post("/v1/datasets", files={"name": (None, "only-a-name")})  # a field, no file part
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["loc"] == ["body", "file"] and "'file' part" in r.json()["detail"]
    r = client.post("/v1/datasets", files={"file": (None, "not a file"), "other": ("o.csv", csv, "text/csv")})
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["body", "file"]
    named = {
        "by-form": ({"name": "by-form"}, {}),
        "by-query": ({"name": "by-form"}, {"name": "by-query"}),
        "t.csv": ({}, {}),
    }
    for want, (data, params) in named.items():
        r = client.post("/v1/datasets", data=data, params=params, files={"file": ("t.csv", csv, "text/csv")})
        assert r.status_code == 201, r.text
        assert (r.json()["name"], r.json()["n_rows"], r.json()["n_columns"]) == (want, 2, 2)
    # the part's content type names Parquet (parameters and case aside): parsed as Parquet, refused as such
    r = client.post("/v1/datasets", files={"file": ("t.csv", csv, "Application/Vnd.Apache.Parquet; x=1")})
    assert r.status_code == 422 and "parquet" in r.json()["detail"].lower(), r.text


class _Records:
    """A project's view of the store whose ``get_job`` answers from a script, one record per call."""

    def __init__(self, *records):
        self.records = list(records)

    def get_job(self, job_id):
        return self.records.pop(0)


def _job(status, progress=0.0, message=""):
    return {"id": "job_1", "status": status, "progress": progress, "message": message}


def _watch(meta, disconnect_after=None):
    calls = []

    async def disconnected():
        calls.append(1)
        return disconnect_after is not None and len(calls) >= disconnect_after

    async def collect():
        return [(event, job and (job["status"], job["progress"], job["message"]))
                async for event, job in lifecycle.watch(meta, "job_1", 0.0, disconnected)]

    return asyncio.run(collect())


def test_job_changes_are_watched_until_the_job_ends_or_goes():
    meta = _Records(_job("queued"), _job("running"), _job("running", 0.5), _job("running", 0.50001),
                    _job("running", 0.5, "fold 2"), _job("succeeded", 1.0))
    assert _watch(meta) == [
        ("status", ("queued", 0.0, "")), ("status", ("running", 0.0, "")), ("progress", ("running", 0.5, "")),
        ("progress", ("running", 0.5, "fold 2")), ("status", ("succeeded", 1.0, "")),
        ("end", ("succeeded", 1.0, "")),
    ]
    assert _watch(_Records(_job("running"), None)) == [("status", ("running", 0.0, "")), ("deleted", None)]
    assert _watch(_Records(_job("running"), _job("running")), disconnect_after=1) == [
        ("status", ("running", 0.0, ""))]
