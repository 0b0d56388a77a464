"""Metrics, request ids and JSON logs."""

import logging

import orjson
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from service.app import create_app
from service.observability import JsonFormatter, request_id_var
from service.settings import Settings
from service.storage.metadata import MetadataStore, utcnow
from tests.service.conftest import iris_csv, train, upload_csv


def scrape(client) -> dict:
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    out = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
def trained(client):
    ds = upload_csv(client, iris_csv(), name="iris").json()["id"]
    mid, job = train(client, algorithm="logistic_regression", dataset_id=ds, target="species", name="iris-lr")
    assert job["status"] == "succeeded"
    return mid


def test_request_id_is_echoed_or_generated(client):
    r = client.get("/health/live", headers={"X-Request-ID": "client-id-42"})
    assert r.headers["x-request-id"] == "client-id-42"
    a, b = client.get("/health/live").headers["x-request-id"], client.get("/health/live").headers["x-request-id"]
    assert a != b and len(a) == 32
    bad = client.get("/health/live", headers={"X-Request-ID": "bad id with spaces\t"}).headers["x-request-id"]
    assert bad != "bad id with spaces\t" and len(bad) == 32
    r = client.get("/v1/models/nope")  # errors carry it too
    assert r.status_code == 404 and len(r.headers["x-request-id"]) == 32


def test_metrics_count_routes_predict_fast_path_rows_jobs_and_cache(client, trained):
    mid = trained
    rows = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]
    for _ in range(3):
        assert client.post(f"/v1/models/{mid}/predict", json={"rows": rows}).status_code == 200
    assert client.post(f"/v1/models/{mid}/predict", json={"rows": [[1.0]]}).status_code == 422
    assert client.post("/v1/models/mdl_nope/predict", json={"rows": rows}).status_code == 404
    r = client.post("/v2/models/iris-lr/infer",
                    json={"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP64", "data": sum(rows, [])}]})
    assert r.status_code == 200
    client.get("/no/such/route")
    m = scrape(client)
    route = "/v1/models/{model_id}/predict"
    assert m[("orchard_http_requests_total", (("method", "POST"), ("route", route), ("status", "200")))] == 3
    assert m[("orchard_http_requests_total", (("method", "POST"), ("route", route), ("status", "422")))] == 1
    assert m[("orchard_http_requests_total", (("method", "POST"), ("route", route), ("status", "404")))] == 1
    assert m[("orchard_http_requests_total", (("method", "POST"), ("route", "/v2/models/{model_name}/infer"),
                                              ("status", "200")))] == 1
    assert m[("orchard_http_requests_total", (("method", "GET"), ("route", "<unmatched>"), ("status", "404")))] == 1
    assert m[("orchard_http_request_duration_seconds_count", (("method", "POST"), ("route", route)))] == 5
    assert m[("orchard_predicted_rows_total", (("protocol", "v1"),))] == 6
    assert m[("orchard_predicted_rows_total", (("protocol", "v2"),))] == 2
    assert m[("orchard_jobs", (("kind", "train"), ("status", "succeeded")))] == 1
    assert m[("orchard_queue_depth", ())] == 0
    assert m[("orchard_model_cache_misses_total", ())] >= 1 and m[("orchard_model_cache_hits_total", ())] >= 3
    assert m[("orchard_model_cache_models", ())] == 1 and m[("orchard_model_cache_size_bytes", ())] > 0


def test_job_metrics_come_from_the_store_so_other_processes_count(client, settings):
    """Jobs recorded by another process (another store connection) appear at the next scrape."""
    other = MetadataStore(settings.resolved_database_url())
    for i, status in enumerate(["queued", "queued", "running"]):
        other.insert_job({"id": f"job_other{i}", "kind": "tune", "status": status, "progress": 0.0, "message": "",
                          "created_at": utcnow(), "payload": {}})
    other.dispose()
    m = scrape(client)
    assert m[("orchard_jobs", (("kind", "tune"), ("status", "queued")))] == 2
    assert m[("orchard_jobs", (("kind", "tune"), ("status", "running")))] == 1
    assert m[("orchard_queue_depth", ())] == 2


def test_metrics_and_access_log_can_be_switched_off(tmp_path, caplog):
    s = Settings(data_dir=tmp_path / "d", workers=0, secret_key="k", metrics=False, access_log=False)
    with TestClient(create_app(s)) as c, caplog.at_level(logging.INFO, logger="orchard.access"):
        r = c.get("/metrics")
        assert r.status_code == 404 and "ORCHARD_METRICS=false" in r.json()["detail"]
        assert r.headers["x-request-id"]  # request ids are not part of the switch
    assert not [rec for rec in caplog.records if rec.name == "orchard.access"]


def test_access_log_lines_are_json_with_the_request_id(client, caplog):
    with caplog.at_level(logging.INFO, logger="orchard.access"):
        client.get("/v1/algorithms/logistic_regression", headers={"X-Request-ID": "rid-7"})
    recs = [r for r in caplog.records if r.name == "orchard.access"]
    assert recs
    line = JsonFormatter().format(recs[-1])
    assert "\n" not in line
    doc = orjson.loads(line)
    assert doc["request_id"] == "rid-7" and doc["status"] == 200 and doc["method"] == "GET"
    assert doc["route"] == "/v1/algorithms/{name}" and doc["duration_ms"] >= 0 and doc["level"] == "info"


def test_json_formatter_takes_the_request_id_from_context_and_formats_exceptions():
    token = request_id_var.set("ctx-1")
    try:
        try:
            raise ValueError("boom")
        except ValueError:
            rec = logging.getLogger("orchard").makeRecord("orchard", logging.ERROR, __file__, 1, "failed %s", ("x",),
                                                          __import__("sys").exc_info())
        doc = orjson.loads(JsonFormatter().format(rec))
    finally:
        request_id_var.reset(token)
    assert doc["msg"] == "failed x" and doc["request_id"] == "ctx-1" and "ValueError: boom" in doc["exc"]
