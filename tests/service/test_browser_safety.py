"""Browser safety (service/browser_safety.py): the Host allow-list refuses DNS rebinding on every route, the front door
and /v2 included; state-changing requests a web page could send cross-site are refused; CORS is off unless
configured; clients that are not browsers (no Origin) keep working."""

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.browser_safety import BrowserGuard, host_name
from service.settings import Settings
from tests.service.conftest import assert_problem, iris_csv, train, upload_csv

EVIL = {"Host": "evil.example"}


@pytest.fixture
def model(client):
    ds = upload_csv(client, iris_csv(), name="iris").json()["id"]
    mid, job = train(client, algorithm="logistic_regression", dataset_id=ds, target="species")
    assert job["status"] == "succeeded"
    return ds, mid


def _route_calls(app, ds, mid):
    """(method, path) of every operation of the app's OpenAPI document and of its documentation pages, with
    real ids in the path parameters."""
    values = {"dataset_id": ds, "model_id": mid, "model_name": mid, "job_id": "job_x", "model_version": "1",
              "name": "logistic_regression", "key_id": "key_x"}
    calls = [("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/redoc")]
    for path, ops in app.openapi()["paths"].items():
        for k, v in values.items():
            path = path.replace("{" + k + "}", v)
        assert "{" not in path, path
        calls += [(method.upper(), path) for method in ops]
    return calls


def test_the_default_allow_list_is_the_loopback_names():
    assert Settings.model_fields["allowed_hosts"].default == "localhost,127.0.0.1,[::1]"
    guard = BrowserGuard(["localhost", "127.0.0.1", "[::1]"], [])
    for host in (b"localhost", b"localhost:8000", b"LOCALHOST:1", b"127.0.0.1:65535", b"[::1]", b"[::1]:8000"):
        assert guard.host_allowed(host), host
    for host in (b"evil.example", b"localhost.evil.example", b"127.0.0.1.nip.io:8000", b"[::2]:80", b"",
                 b"evil.example:localhost"):
        assert not guard.host_allowed(host), host
    assert guard.host_allowed(None)  # no Host (HTTP/1.0): no browser sends that
    assert host_name("[::1]:8000") == "[::1]" and host_name("Example.COM:80") == "example.com"
    assert BrowserGuard(["*"], []).host_allowed(b"anything:1")
    wild = BrowserGuard(["*.example.com"], [])
    assert wild.host_allowed(b"api.example.com:443") and wild.host_allowed(b"example.com")
    assert not wild.host_allowed(b"evilexample.com") and not wild.host_allowed(b"example.com.evil")


def test_dns_rebinding_host_is_refused_on_every_route_front_door_and_v2_included(client, model):
    ds, mid = model
    calls = _route_calls(client.app, ds, mid)
    assert ("POST", f"/v1/models/{mid}/predict") in calls and ("POST", f"/v2/models/{mid}/infer") in calls
    assert ("GET", "/v2") in calls and ("GET", "/health/live") in calls and len(calls) > 25
    for method, path in calls:
        r = client.request(method, path, headers=EVIL, json={"rows": [[5.1, 3.5, 1.4, 0.2]]})
        assert r.status_code == 400, (method, path, r.status_code, r.text)
        assert len(r.headers["x-request-id"]) == 32
        if path.startswith("/v2"):
            assert "evil.example" in r.json()["error"] and "ORCHARD_ALLOWED_HOSTS" in r.json()["error"]
        else:
            assert_problem(r, 400, "evil.example", "ORCHARD_ALLOWED_HOSTS")
    # the same requests with an allowed Host are served: the model still predicts
    ok = client.post(f"/v1/models/{mid}/predict", json={"rows": [[5.1, 3.5, 1.4, 0.2]]},
                     headers={"Host": "localhost:8000"})
    assert ok.status_code == 200 and ok.json() == {"predictions": ["setosa"]}


def test_an_open_allow_list_serves_any_host(tmp_path):
    settings = Settings(data_dir=tmp_path / "d", workers=0, secret_key="k" * 32, allowed_hosts="*")
    with TestClient(create_app(settings)) as c:
        assert c.get("/health/live", headers=EVIL).status_code == 200


def test_cross_site_text_plain_post_creates_no_dataset(client):
    # what a form or a no-CORS fetch on any web page can send to a server on the visitor's machine
    csv = iris_csv().encode()
    cross = client.post("/v1/datasets?name=x", content=csv,
                        headers={"content-type": "text/plain", "origin": "https://evil.example"})
    assert_problem(cross, 403, "https://evil.example", "ORCHARD_CORS_ORIGINS")
    fetch = client.post("/v1/datasets?name=x", content=csv,
                        headers={"content-type": "text/plain", "sec-fetch-site": "cross-site"})
    assert_problem(fetch, 403, "Sec-Fetch-Site")
    plain = client.post("/v1/datasets?name=x", content=csv, headers={"content-type": "text/plain"})
    assert_problem(plain, 415, "text/plain")
    form = client.post("/v1/datasets?name=x", data={"a": "b"})
    assert_problem(form, 415, "application/x-www-form-urlencoded")
    multipart = client.post("/v1/datasets", files={"file": ("iris.csv", csv, "text/csv")},
                            headers={"origin": "null"})
    assert_problem(multipart, 403, "null")
    assert client.get("/v1/datasets").json()["count"] == 0  # nothing was created


def test_cross_site_state_changes_are_refused_everywhere(client, model):
    ds, mid = model
    evil = {"origin": "http://evil.example"}
    for method, path, body in (("POST", "/v1/train", {"algorithm": "ridge", "dataset_id": ds, "target": "x"}),
                               ("DELETE", f"/v1/models/{mid}", None), ("DELETE", f"/v1/datasets/{ds}", None),
                               ("POST", f"/v1/models/{mid}/predict", {"rows": [[5.1, 3.5, 1.4, 0.2]]})):
        r = client.request(method, path, json=body, headers=evil)
        assert_problem(r, 403, "http://evil.example")
    v2 = client.post(f"/v2/models/{mid}/infer", headers={"sec-fetch-site": "cross-site"}, json={"inputs": []})
    assert v2.status_code == 403 and "cross-site" in v2.json()["error"] and v2.headers["x-request-id"]
    # the model and the dataset are still there
    assert client.get(f"/v1/models/{mid}").status_code == 200 and client.get(f"/v1/datasets/{ds}").status_code == 200
    # reads are not state changes (and without CORS headers a foreign page cannot read the answer)
    read = client.get("/v1/models", headers=evil)
    assert read.status_code == 200 and "access-control-allow-origin" not in read.headers


def test_same_origin_pages_and_clients_without_origin_keep_working(client, model):
    ds, mid = model
    rows = {"rows": [[5.1, 3.5, 1.4, 0.2]]}
    # a page served by Orchard itself (the /docs UI): Origin is the request's own host
    same = client.post(f"/v1/models/{mid}/predict", json=rows,
                       headers={"origin": "http://testserver", "sec-fetch-site": "same-origin"})
    assert same.status_code == 200
    # curl: a multipart upload with no Origin
    up = client.post("/v1/datasets?name=curl", files={"file": ("iris.csv", iris_csv().encode(), "text/csv")})
    assert up.status_code == 201, up.text
    # a different port is a different origin
    other = client.post(f"/v1/models/{mid}/predict", json=rows, headers={"origin": "http://testserver:3000"})
    assert_problem(other, 403)


def test_cors_is_off_unless_configured(client, tmp_path, model):
    ds, mid = model
    pre = {"origin": "https://app.example", "access-control-request-method": "POST",
           "access-control-request-headers": "content-type"}
    off = client.options(f"/v1/models/{mid}/predict", headers=pre)
    assert "access-control-allow-origin" not in off.headers
    settings = Settings(data_dir=tmp_path / "data", workers=0, max_body_bytes=2_000_000, secret_key="test-secret",
                        cors_origins="https://app.example")
    with TestClient(create_app(settings)) as c:
        on = c.options(f"/v1/models/{mid}/predict", headers=pre)
        assert on.status_code == 200 and on.headers["access-control-allow-origin"] == "https://app.example"
        r = c.post(f"/v1/models/{mid}/predict", json={"rows": [[5.1, 3.5, 1.4, 0.2]]},
                   headers={"origin": "https://app.example"})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://app.example"
        assert "x-request-id" in r.headers["access-control-expose-headers"].lower()
        refused = c.post(f"/v1/models/{mid}/predict", json={"rows": [[1, 2, 3, 4]]},
                         headers={"origin": "https://other.example"})
        assert_problem(refused, 403, "https://other.example")
        denied = c.options(f"/v1/models/{mid}/predict", headers={**pre, "origin": "https://other.example"})
        assert "access-control-allow-origin" not in denied.headers
