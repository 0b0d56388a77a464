"""API keys, scopes, projects, audit and limits (docs/security.md), against the app in one process."""

import datetime as dt
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.testclient import TestClient

from service import security
from service.app import create_app
from service.security import MUTATING, READ_ONLY_ACTIONS
from service.services import keys as keys_mod
from service.services import ratelimit
from service.settings import Settings
from tests.service.conftest import assert_problem, iris_csv

ROOT = Path(__file__).resolve().parents[2]
IRIS_ROW = {"rows": [[5.1, 3.5, 1.4, 0.2]]}
INFER = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP64", "data": [5.1, 3.5, 1.4, 0.2]}]}


def bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def make_key(c, admin: str | None, scopes, project=None, name="k", **extra) -> dict:
    body = {"name": name, "scopes": list(scopes), **({"project": project} if project else {}), **extra}
    r = c.post("/v1/keys", json=body, headers=bearer(admin) if admin else {})
    assert r.status_code == 201, r.text
    return r.json()


@pytest.fixture
def app_settings(tmp_path):
    return Settings(data_dir=tmp_path / "data", workers=0, max_body_bytes=2_000_000, secret_key="test-secret")


@pytest.fixture
def secured(app_settings):
    """An app whose first key (admin, created while it was open) switched keys on."""
    with TestClient(create_app(app_settings)) as c:
        admin = make_key(c, None, ["admin"], name="root")["key"]
        yield c, admin


def _upload(c, key, name="iris"):
    r = c.post("/v1/datasets", params={"name": name}, content=iris_csv().encode(),
               headers={"content-type": "text/csv", **bearer(key)})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _train(c, key, ds, name="iris-lr"):
    r = c.post("/v1/train", json={"algorithm": "logistic_regression", "dataset_id": ds, "target": "species",
                                  "name": name}, headers=bearer(key))
    assert r.status_code == 202, r.text
    job = r.json()["job"]["id"]
    done = c.get(f"/v1/jobs/{job}", headers=bearer(key)).json()
    while done["status"] not in ("succeeded", "failed", "cancelled"):
        done = c.get(f"/v1/jobs/{job}", headers=bearer(key)).json()
    assert done["status"] == "succeeded", done
    return r.json()["model_id"], job


def api_routes(app) -> list[APIRoute]:
    return [rc.original_route for rc in iter_route_contexts(app.routes) if isinstance(rc.original_route, APIRoute)]


def _scopes(dependant) -> set:
    return set(dependant.own_oauth_scopes or ()).union(*(_scopes(d) for d in dependant.dependencies))


# -- open by default, keys once one exists ---------------------------------------------------------------
def test_open_until_the_first_key_then_every_route_needs_one(app_settings):
    with TestClient(create_app(app_settings)) as c:
        assert c.get("/v1/datasets").status_code == 200  # open: loopback defaults, no key yet
        created = make_key(c, None, ["admin"], name="first")
        assert created["key"].startswith("orch_") and len(created["key"]) >= 5 + 43
        r = c.get("/v1/datasets")
        body = assert_problem(r, 401, "API key")
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert body["title"] == "Unauthorized"
        for bad in ("Bearer orch_not-a-key", "Basic abc", "Bearer ", "orch_x"):
            r = c.get("/v1/models", headers={"Authorization": bad})
            assert_problem(r, 401)
            assert r.headers["www-authenticate"].startswith("Bearer")
        assert c.get("/v1/datasets", headers=bearer(created["key"])).status_code == 200
        # health stays open; the docs too
        assert c.get("/health/live").status_code == 200 and c.get("/health/ready").status_code == 200
        assert c.get("/v2/health/live").status_code == 200 and c.get("/openapi.json").status_code == 200
        assert c.get("/v2/health/ready").status_code == 200
        # /v2 answers in its own error shape, with the challenge
        r = c.get("/v2")
        assert r.status_code == 401 and "error" in r.json() and r.headers["www-authenticate"].startswith("Bearer")
        # the front door too: v1 problem+json, v2 {"error"}
        r = c.post("/v1/models/mdl_x/predict", json=IRIS_ROW)
        assert_problem(r, 401)
        assert r.headers["www-authenticate"].startswith("Bearer") and r.headers["x-request-id"]
        r = c.post("/v2/models/mdl_x/infer", json=INFER)
        assert r.status_code == 401 and "error" in r.json() and r.headers["www-authenticate"].startswith("Bearer")


def test_keys_are_shown_once_and_stored_hashed(secured, app_settings):
    c, admin = secured
    k = make_key(c, admin, ["read"], name="reader")
    listed = c.get("/v1/keys", headers=bearer(admin)).json()
    assert listed["count"] == 2
    assert all("key" not in x and "key_hash" not in x for x in listed["data"])
    assert k["key"] not in str(listed)
    from sqlalchemy import create_engine, text

    engine = create_engine(app_settings.resolved_database_url())
    with engine.connect() as conn:
        stored = [tuple(r) for r in conn.execute(text("SELECT * FROM api_keys"))]
    engine.dispose()
    assert k["key"] not in str(stored) and keys_mod.hash_key(k["key"]) in str(stored)


@pytest.mark.parametrize("body, field", [
    ({"name": "x", "scopes": []}, "scopes"),
    ({"name": "x", "scopes": ["root"]}, "scopes"),
    ({"name": "", "scopes": ["read"]}, "name"),
    ({"name": "x", "scopes": ["read"], "project": "Bad Name"}, "project"),
    ({"name": "x", "scopes": ["read"], "expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
    ({"name": "x", "scopes": ["read"], "expires_at": "2031-01-01T00:00:00"}, "expires_at"),
    ({"name": "x", "scopes": ["read"], "extra": 1}, "extra"),
])
def test_bad_key_requests_are_422_naming_the_field(secured, body, field):
    c, admin = secured
    before = c.get("/v1/keys", headers=bearer(admin)).json()["count"]
    r = c.post("/v1/keys", json=body, headers=bearer(admin))
    assert_problem(r, 422, field)
    assert c.get("/v1/keys", headers=bearer(admin)).json()["count"] == before


# -- scopes ----------------------------------------------------------------------------------------------
@pytest.fixture
def world(secured):
    """An admin, a model and a dataset in project 'default', and one key per single scope."""
    c, admin = secured
    ds = _upload(c, admin)
    mid, job = _train(c, admin, ds)
    keys = {s: make_key(c, admin, [s], name=s)["key"] for s in ("read", "predict", "train")}
    return c, admin, keys, ds, mid, job


def _calls(ds, mid, job):
    """(scope needed, method, path, json body): the main endpoints, the front door and /v2 included."""
    return [
        ("read", "GET", "/v1/datasets", None),
        ("read", "GET", f"/v1/datasets/{ds}", None),
        ("read", "GET", f"/v1/datasets/{ds}/rows", None),
        ("read", "GET", "/v1/models", None),
        ("read", "GET", f"/v1/models/{mid}", None),
        ("read", "GET", "/v1/jobs", None),
        ("read", "GET", f"/v1/jobs/{job}", None),
        ("read", "GET", f"/v1/jobs/{job}/events", None),
        ("read", "GET", "/v1/algorithms", None),
        ("read", "GET", "/metrics", None),
        ("read", "GET", "/v2", None),
        ("read", "GET", f"/v2/models/{mid}", None),
        ("read", "GET", f"/v2/models/{mid}/ready", None),
        ("predict", "POST", f"/v1/models/{mid}/predict", IRIS_ROW),
        ("predict", "POST", f"/v2/models/{mid}/infer", INFER),
        ("predict", "POST", f"/v2/models/{mid}/versions/1/infer", INFER),
        ("predict", "POST", f"/v1/models/{mid}/evaluate", {"dataset_id": ds}),
        ("predict", "POST", f"/v1/models/{mid}/explain", {"rows": [[5.1, 3.5, 1.4, 0.2]]}),
        ("train", "POST", "/v1/train", {"algorithm": "logistic_regression", "dataset_id": ds, "target": "species"}),
        ("train", "POST", "/v1/cross-validate", {"algorithm": "logistic_regression", "dataset_id": ds,
                                                 "target": "species", "folds": 2}),
        ("train", "POST", f"/v1/jobs/{job}/cancel", None),  # 409: it finished; the scope is checked first
        ("admin", "GET", "/v1/keys", None),
        ("admin", "GET", "/v1/audit", None),
        ("admin", "POST", "/v1/keys", {"name": "x", "scopes": ["read"]}),
    ]


def test_each_scope_allows_its_calls_and_only_those(world):
    c, admin, keys, ds, mid, job = world
    for needed, method, path, body in _calls(ds, mid, job):
        for scope, key in keys.items():
            r = c.request(method, path, json=body, headers=bearer(key))
            if scope == needed:
                assert r.status_code not in (401, 403), (scope, method, path, r.text)
                assert r.status_code < 500
            else:
                assert r.status_code == 403, (scope, method, path, r.status_code, r.text)
                detail = r.json().get("detail") or r.json().get("error")
                assert f"'{needed}'" in detail, detail
        r = c.request(method, path, json=body, headers=bearer(admin))  # admin holds every scope
        assert r.status_code not in (401, 403), (method, path, r.text)
    assert c.post(f"/v1/models/{mid}/predict", json=IRIS_ROW,
                  headers=bearer(keys["predict"])).json()["predictions"] == ["setosa"]
    r = c.post(f"/v2/models/{mid}/infer", json=INFER, headers=bearer(keys["read"]))
    assert r.status_code == 403 and "predict" in r.json()["error"]  # V2's shape


def test_delete_needs_train_and_a_train_key_deletes(world):
    c, admin, keys, ds, mid, job = world
    assert c.delete(f"/v1/models/{mid}", headers=bearer(keys["read"])).status_code == 403
    assert c.delete(f"/v1/models/{mid}", headers=bearer(keys["predict"])).status_code == 403
    assert c.delete(f"/v1/models/{mid}", headers=bearer(keys["train"])).status_code == 204
    assert c.delete(f"/v1/datasets/{ds}", headers=bearer(keys["train"])).status_code == 204


def test_metrics_public_when_configured(tmp_path):
    s = Settings(data_dir=tmp_path / "d", workers=0, secret_key="k", metrics_public=True)
    with TestClient(create_app(s)) as c:
        make_key(c, None, ["admin"])
        assert c.get("/metrics").status_code == 200
        assert c.get("/v1/models").status_code == 401


def test_every_route_declares_one_scope_and_the_spec_documents_401_403_429(app_settings):
    app = create_app(app_settings)
    open_ops = {"health_live", "health_ready", "v2_server_live", "v2_server_ready"}
    routes = api_routes(app)
    assert len(routes) >= 35
    for route in routes:
        op = route.operation_id or route.name
        scopes = _scopes(route.dependant)
        if op in open_ops:
            assert not scopes, op
        else:
            assert len(scopes) == 1 and scopes <= set(keys_mod.SCOPES), (op, scopes)
            # a POST that is not audited (changes nothing) is a predict-scope operation, and only those
            if "POST" in route.methods:
                assert (op in READ_ONLY_ACTIONS) == (scopes == {"predict"}), (op, scopes)
    spec = app.openapi()
    assert spec["components"]["securitySchemes"]["bearer"] == {**spec["components"]["securitySchemes"]["bearer"],
                                                               "type": "http", "scheme": "bearer"}
    for path, ops in spec["paths"].items():
        for op in ops.values():
            if op["operationId"] in open_ops:
                assert "security" not in op
                continue
            assert op["security"] and {"401", "403", "429"} <= set(op["responses"]), (path, op["operationId"])
            assert "WWW-Authenticate" in op["responses"]["401"]["headers"]


# -- projects --------------------------------------------------------------------------------------------
def test_projects_see_only_their_own_and_other_ids_are_404(secured):
    c, admin = secured
    a = make_key(c, admin, ["read", "predict", "train"], project="alpha", name="a")["key"]
    b = make_key(c, admin, ["read", "predict", "train"], project="beta", name="b")["key"]
    ds = _upload(c, a, name="alpha-iris")
    mid, job = _train(c, a, ds, name="shared-name")
    ds_b = _upload(c, b, name="beta-iris")
    mid_b, _ = _train(c, b, ds_b, name="shared-name")  # the same name in another project: no ambiguity
    assert c.post("/v2/models/shared-name/infer", json=INFER, headers=bearer(a)).status_code == 200
    # every path to alpha's records from beta: 404 (never 403), the same answer as an unknown id
    for method, path, body in [
        ("GET", f"/v1/datasets/{ds}", None), ("GET", f"/v1/datasets/{ds}/rows", None),
        ("DELETE", f"/v1/datasets/{ds}", None), ("GET", f"/v1/models/{mid}", None),
        ("DELETE", f"/v1/models/{mid}", None), ("POST", f"/v1/models/{mid}/predict", IRIS_ROW),
        ("POST", f"/v1/models/{mid}/evaluate", {"dataset_id": ds_b}),
        ("POST", f"/v1/models/{mid}/explain", {"rows": [[5.1, 3.5, 1.4, 0.2]]}),
        ("POST", f"/v1/models/{mid}/importance", {"dataset_id": ds_b}),
        ("POST", f"/v1/models/{mid}/partial-dependence", {"dataset_id": ds_b, "features": ["sepal_length"]}),
        ("GET", f"/v1/jobs/{job}", None), ("GET", f"/v1/jobs/{job}/events", None),
        ("POST", f"/v1/jobs/{job}/cancel", None),
        ("GET", f"/v2/models/{mid}", None), ("GET", f"/v2/models/{mid}/ready", None),
        ("POST", f"/v2/models/{mid}/infer", INFER),
        # beta's requests that refer to alpha's dataset or model
        ("POST", "/v1/train", {"algorithm": "logistic_regression", "dataset_id": ds, "target": "species"}),
        ("POST", "/v1/cross-validate", {"algorithm": "logistic_regression", "dataset_id": ds, "target": "species"}),
        ("POST", "/v1/tune", {"algorithm": "logistic_regression", "dataset_id": ds, "target": "species",
                              "space": {"C": [1, 10]}}),
        ("POST", f"/v1/models/{mid_b}/evaluate", {"dataset_id": ds}),
        ("POST", f"/v1/models/{mid_b}/explain", {"rows": [[5.1, 3.5, 1.4, 0.2]], "background": {"dataset_id": ds}}),
        ("POST", f"/v1/models/{mid_b}/importance", {"dataset_id": ds}),
    ]:
        r = c.request(method, path, json=body, headers=bearer(b))
        assert r.status_code == 404, (method, path, r.status_code, r.text)
        text = r.text
        assert "alpha" not in text, text
    # once cached by alpha, the model is still invisible to beta (the front door's cache check)
    assert c.post(f"/v1/models/{mid}/predict", json=IRIS_ROW, headers=bearer(a)).status_code == 200
    assert c.post(f"/v1/models/{mid}/predict", json=IRIS_ROW, headers=bearer(b)).status_code == 404
    # lists: each key its own; admin all, or one project
    assert [d["id"] for d in c.get("/v1/datasets", headers=bearer(b)).json()["data"]] == [ds_b]
    assert [m["id"] for m in c.get("/v1/models", headers=bearer(a)).json()["data"]] == [mid]
    assert {j["id"] for j in c.get("/v1/jobs", headers=bearer(a)).json()["data"]} == {job}
    assert c.get("/v1/models", headers=bearer(admin)).json()["count"] == 2
    assert [m["id"] for m in c.get("/v1/models?project=beta", headers=bearer(admin)).json()["data"]] == [mid_b]
    assert c.get(f"/v1/models/{mid}", headers=bearer(admin)).status_code == 200
    # a non-admin key cannot name another project
    assert_problem(c.get("/v1/models?project=alpha", headers=bearer(b)), 403, "beta")
    assert c.get("/v1/models?project=beta", headers=bearer(b)).status_code == 200
    # what beta left alone is intact
    assert c.get(f"/v1/datasets/{ds}", headers=bearer(a)).status_code == 200
    assert c.get(f"/v1/models/{mid}", headers=bearer(a)).status_code == 200


def test_an_admin_creates_in_the_project_it_names(secured):
    c, admin = secured
    a = make_key(c, admin, ["read"], project="alpha")["key"]
    r = c.post("/v1/datasets?project=alpha&name=x", content=iris_csv().encode(),
               headers={"content-type": "text/csv", **bearer(admin)})
    assert r.status_code == 201
    assert c.get(f"/v1/datasets/{r.json()['id']}", headers=bearer(a)).status_code == 200


# -- expiry and revocation: the next request, here and in another process on the same data -----------------
def test_expiry_takes_effect_on_the_next_request(secured, monkeypatch):
    c, admin = secured
    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat()
    k = make_key(c, admin, ["read"], expires_at=soon)
    assert c.get("/v1/models", headers=bearer(k["key"])).status_code == 200

    class Later:
        @staticmethod
        def time():
            return dt.datetime.now(dt.UTC).timestamp() + 3601

    monkeypatch.setattr(keys_mod, "time", Later)
    monkeypatch.setattr(security, "time", Later.time)  # the gate's inline check of the usual header
    assert_problem(c.get("/v1/models", headers=bearer(k["key"])), 401, "expired")
    assert c.post("/v1/models/m/predict", json=IRIS_ROW, headers=bearer(k["key"])).status_code == 401
    assert c.get("/v1/models", headers=bearer(admin)).status_code == 200  # no expiry: still valid


def test_revocation_takes_effect_on_the_next_request_in_every_process(app_settings):
    with TestClient(create_app(app_settings)) as one, TestClient(create_app(app_settings)) as two:
        admin = make_key(one, None, ["admin"])["key"]
        k = make_key(one, admin, ["read", "predict"])
        assert two.get("/v1/models", headers=bearer(k["key"])).status_code == 200  # made by the other app
        assert one.delete(f"/v1/keys/{k['id']}", headers=bearer(admin)).status_code == 204
        assert_problem(two.get("/v1/models", headers=bearer(k["key"])), 401, "revoked")
        assert two.post("/v1/models/m/predict", json=IRIS_ROW, headers=bearer(k["key"])).status_code == 401
        assert_problem(one.get("/v1/models", headers=bearer(k["key"])), 401, "revoked")
        assert one.delete("/v1/keys/key_nope", headers=bearer(admin)).status_code == 404
        listed = {x["id"]: x for x in one.get("/v1/keys", headers=bearer(admin)).json()["data"]}
        assert listed[k["id"]]["revoked_at"] is not None


def test_orchard_keys_command_creates_lists_and_revokes_for_a_running_server(app_settings):
    env_cmd = [sys.executable, "-m", "service.cli", "keys", "--data-dir", str(app_settings.data_dir)]
    with TestClient(create_app(app_settings)) as c:
        assert c.get("/v1/models").status_code == 200  # open
        made = subprocess.run([*env_cmd, "create", "--name", "ops", "--scopes", "read,admin"], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr
        import json

        key = json.loads(made.stdout)
        assert "shown only this once" in made.stderr and key["scopes"] == ["read", "admin"]
        assert c.get("/v1/models").status_code == 401  # the server learnt of the first key
        assert c.get("/v1/models", headers=bearer(key["key"])).status_code == 200
        listed = subprocess.run([*env_cmd, "list"], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert key["id"] in listed.stdout and key["key"] not in listed.stdout
        bad = subprocess.run([*env_cmd, "create", "--name", "x", "--scopes", "root"], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
        assert bad.returncode == 2 and "scope" in bad.stderr
        gone = subprocess.run([*env_cmd, "revoke", key["id"]], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert gone.returncode == 0, gone.stderr
        assert_problem(c.get("/v1/models", headers=bearer(key["key"])), 401, "revoked")


# -- audit -----------------------------------------------------------------------------------------------
def _mutating_routes():
    out = []
    for route in api_routes(create_app(Settings(workers=0, data_dir=Path("/nonexistent-not-created")))):
        for m in sorted(route.methods & MUTATING):
            out.append((m, route.path, route.operation_id or route.name))
    assert len(out) >= 20, out
    return out


@pytest.mark.parametrize("method, path, op", _mutating_routes(), ids=lambda v: str(v))
def test_every_mutating_route_is_audited(secured, method, path, op):
    """Every POST/PUT/PATCH/DELETE route of the app writes a row (failed calls too), but those that change
    nothing (predict scope): a new mutating route without audit fails here."""
    c, admin = secured
    reader = make_key(c, admin, ["read"], name="reader")
    concrete = path
    for name in ("dataset_id", "model_id", "job_id", "key_id", "model_name", "model_version"):
        concrete = concrete.replace("{" + name + "}", "1" if name == "model_version" else f"x_{name}")
    for key, name in ((admin, "root"), (reader["key"], "reader"), ("orch_unknown", None)):
        r = c.request(method, concrete, json={}, headers=bearer(key))
        rows = c.get("/v1/audit", params={"action": op}, headers=bearer(admin)).json()["data"]
        if op in READ_ONLY_ACTIONS:
            assert rows == [], rows
            continue
        assert rows, (method, path, op)
        row = rows[0]
        assert (row["method"], row["route"], row["status"]) == (method, path, r.status_code), row
        assert row["key_name"] == name and row["request_id"] == r.headers["x-request-id"]
        assert row["target_id"] == (f"x_{path.split('{')[1].split('}')[0]}" if "{" in path else None), row
        assert row["status"] >= 400  # {} is no valid body anywhere, x_... no id


def test_audit_rows_of_a_session_and_their_filters(secured):
    c, admin = secured
    t = make_key(c, admin, ["train", "read"], project="alpha", name="trainer")
    ds = _upload(c, t["key"])
    assert c.delete(f"/v1/datasets/{ds}", headers=bearer(t["key"])).status_code == 204
    assert c.delete(f"/v1/datasets/{ds}", headers=bearer(t["key"])).status_code == 404
    assert c.get("/v1/datasets", headers=bearer(t["key"])).status_code == 200  # a read: not audited
    page = c.get("/v1/audit", params={"key_id": t["id"]}, headers=bearer(admin)).json()
    assert page["count"] == 3
    assert [(e["action"], e["status"], e["target_id"]) for e in page["data"]] == [
        ("delete_dataset", 404, ds), ("delete_dataset", 204, ds), ("upload_dataset", 201, ds)]
    assert {e["project"] for e in page["data"]} == {"alpha"} and page["data"][0]["key_name"] == "trainer"
    created = c.get("/v1/audit", params={"action": "create_key"}, headers=bearer(admin)).json()["data"]
    assert created[0]["target_id"] == t["id"] and created[0]["status"] == 201
    assert c.get("/v1/audit", params={"status": "4xx", "key_id": t["id"]},
                 headers=bearer(admin)).json()["count"] == 1
    assert c.get("/v1/audit", params={"status": "204"}, headers=bearer(admin)).json()["count"] == 1
    assert c.get("/v1/audit", params={"project": "alpha"}, headers=bearer(admin)).json()["count"] == 3
    future = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).isoformat()
    assert c.get("/v1/audit", params={"since": future}, headers=bearer(admin)).json()["count"] == 0
    assert c.get("/v1/audit", params={"until": future, "limit": 2, "offset": 1},
                 headers=bearer(admin)).json()["count"] >= 4
    assert len(c.get("/v1/audit", params={"limit": 2}, headers=bearer(admin)).json()["data"]) == 2
    for bad in ({"limit": 0}, {"limit": 100_000}, {"offset": -1}, {"status": "600"}, {"since": "yesterday"}):
        assert_problem(c.get("/v1/audit", params=bad, headers=bearer(admin)), 422)
    assert c.get("/v1/audit", headers=bearer(t["key"])).status_code == 403


# -- limits ----------------------------------------------------------------------------------------------
def test_rate_limit_429_with_retry_after_then_recovery(tmp_path, monkeypatch):
    clock = [1000.0]

    class Clock:
        @staticmethod
        def monotonic():
            return clock[0]

    monkeypatch.setattr(ratelimit, "time", Clock)
    s = Settings(data_dir=tmp_path / "d", workers=0, secret_key="k", rate_limit_per_s=0.5, rate_limit_burst=2)
    with TestClient(create_app(s)) as c:
        admin = make_key(c, None, ["admin"])["key"]
        other = make_key(c, admin, ["read", "predict"])["key"]
        assert c.get("/v1/models", headers=bearer(admin)).status_code == 200
        r = c.get("/v1/models", headers=bearer(admin))
        body = assert_problem(r, 429, "rate limit")
        assert r.headers["retry-after"] == "2" and "ORCHARD_RATE_LIMIT_PER_S" in body["detail"]
        r = c.post("/v1/models/m/predict", json=IRIS_ROW, headers=bearer(admin))  # the front door counts too
        assert r.status_code == 429 and r.headers["retry-after"]
        assert c.get("/v1/models", headers=bearer(other)).status_code == 200  # per key
        r = c.delete("/v1/models/m", headers=bearer(admin))
        assert r.status_code == 429
        row = c.get("/v1/audit", params={"action": "delete_model"}, headers=bearer(other))
        assert row.status_code == 403  # (other is no admin; and its request did not spend admin's tokens)
        clock[0] += 2.0  # one token back
        row = c.get("/v1/audit", params={"action": "delete_model"}, headers=bearer(admin)).json()["data"][0]
        assert (row["status"], row["key_name"], row["target_id"]) == (429, "k", "m")
        clock[0] += 2.0
        assert c.get("/v1/models", headers=bearer(admin)).status_code == 200
        assert c.get("/v1/models", headers=bearer(admin)).status_code == 429


def test_project_job_cap(tmp_path):
    from service.storage.metadata import MetadataStore, utcnow

    s = Settings(data_dir=tmp_path / "d", workers=0, secret_key="k", max_project_jobs=2)
    with TestClient(create_app(s)) as c:
        admin = make_key(c, None, ["admin"])["key"]
        a = make_key(c, admin, ["train", "read"], project="alpha")["key"]
        b = make_key(c, admin, ["train", "read"], project="beta")["key"]
        ds_a, ds_b = _upload(c, a), _upload(c, b)
        meta = MetadataStore(s.resolved_database_url())
        for i, status in enumerate(("queued", "running")):  # two jobs of alpha still going
            meta.insert_job({"id": f"job_busy{i}", "kind": "train", "status": status, "progress": 0.0,
                             "message": "", "payload": {}, "cancel_requested": False, "created_at": utcnow(),
                             "project": "alpha"})
        meta.dispose()
        train = {"algorithm": "logistic_regression", "target": "species"}
        r = c.post("/v1/train", json={**train, "dataset_id": ds_a}, headers=bearer(a))
        body = assert_problem(r, 429, "alpha", "ORCHARD_MAX_PROJECT_JOBS")
        assert body["type"] == "urn:orchard:problem:project-job-cap"
        r = c.post("/v1/cross-validate", json={**train, "dataset_id": ds_a}, headers=bearer(a))
        assert r.status_code == 429
        assert c.get("/v1/models", headers=bearer(a)).json()["count"] == 0  # nothing stored
        assert c.post("/v1/train", json={**train, "dataset_id": ds_b}, headers=bearer(b)).status_code == 202


# -- secure default: the bind --------------------------------------------------------------------------
def test_serve_refuses_a_public_bind_without_keys(tmp_path):
    from service.cli import check_bind

    def s(**kw):
        return Settings(data_dir=tmp_path / "d", workers=0, secret_key="k", **kw)

    assert check_bind(s(host="127.0.0.1")) is None and check_bind(s(host="::1")) is None
    assert check_bind(s(host="localhost")) is None
    refusal = check_bind(s(host="0.0.0.0"))
    assert "orchard keys create --name admin --scopes admin" in refusal and "ORCHARD_ADMIN_KEY" in refusal
    assert check_bind(s(host="0.0.0.0", auth="off")) is None
    assert check_bind(s(host="0.0.0.0", admin_key="x" * 40)) is None
    proc = subprocess.run([sys.executable, "-m", "service.cli", "serve", "--host", "0.0.0.0", "--port", "1",
                           "--data-dir", str(tmp_path / "d")], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and "refusing to serve on 0.0.0.0" in proc.stderr, proc.stderr
    with TestClient(create_app(s())) as c:
        make_key(c, None, ["admin"])
    assert check_bind(s(host="0.0.0.0")) is None  # a key exists: keys are required, it may start


def test_admin_key_from_the_environment(tmp_path):
    token = "a-long-random-admin-key-from-a-secret-store-0123456789"
    s = Settings(data_dir=tmp_path / "d", workers=0, secret_key="k", admin_key=token)
    with TestClient(create_app(s)) as c:
        assert c.get("/v1/models").status_code == 401  # the key exists: required
        assert c.get("/v1/keys", headers=bearer(token)).json()["data"][0]["scopes"] == ["admin"]
    with TestClient(create_app(s)) as c:  # a restart accepts it again, no second row
        assert c.get("/v1/keys", headers=bearer(token)).json()["count"] == 1
    short = Settings(data_dir=tmp_path / "e", workers=0, secret_key="k", admin_key="short")
    with pytest.raises(ValueError, match="at least 32"):
        with TestClient(create_app(short)):
            pass

