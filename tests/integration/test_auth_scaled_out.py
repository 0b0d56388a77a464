"""API keys in the scaled-out mode: two API replicas on one PostgreSQL and one Redis. A key created or revoked on
one replica (or by `orchard keys` in another process) holds on the other from the next request on; key checks
read no database; rate limits are shared."""

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from service.app import create_app
from service.settings import Settings
from tests.integration.test_rq_failures import own_redis  # noqa: F401 - a fixture
from tests.integration.test_scaled_out import pg_url, redis_url  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.services, pytest.mark.slow]


def bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def _settings(tmp_path, pg_url, redis_url, **kw) -> Settings:  # noqa: F811
    return Settings(data_dir=tmp_path / "shared", database_url=pg_url, queue_url=redis_url,
                    queue_name=f"orchard-test-{uuid.uuid4().hex[:8]}", secret_key="shared-secret", **kw)


def test_key_changes_reach_the_other_replica_before_its_next_request(tmp_path, pg_url, redis_url):  # noqa: F811
    settings = _settings(tmp_path, pg_url, redis_url)
    with TestClient(create_app(settings)) as api1, TestClient(create_app(settings)) as api2:
        assert api2.get("/v1/models").status_code == 200  # open: no key yet
        r = api1.post("/v1/keys", json={"name": "root", "scopes": ["admin"]})
        assert r.status_code == 201
        admin = r.json()["key"]
        assert api2.get("/v1/models").status_code == 401  # the first key switched keys on there too
        k = api1.post("/v1/keys", json={"name": "app", "scopes": ["read"]}, headers=bearer(admin)).json()
        assert api2.get("/v1/models", headers=bearer(k["key"])).status_code == 200
        # no database round trip per request for the key check: count api2's statements
        engine = api2.app.state.runtime.meta.engine
        statements = []
        event.listen(engine, "before_cursor_execute", lambda *a, **kw: statements.append(a[2]))
        for _ in range(20):
            assert api2.get("/v2", headers=bearer(k["key"])).status_code == 200
        assert statements == []
        # revoked on api1: refused by api2 on its very next request
        assert api1.delete(f"/v1/keys/{k['id']}", headers=bearer(admin)).status_code == 204
        r = api2.get("/v1/models", headers=bearer(k["key"]))
        assert r.status_code == 401 and "revoked" in r.json()["detail"]
        assert api2.post("/v1/models/m/predict", json={"rows": [[1]]}, headers=bearer(k["key"])).status_code == 401
        # and by the shell, in a third process: both replicas refuse it at once
        env = {k_: v for k_, v in os.environ.items() if not k_.startswith("ORCHARD_")}
        env.update({"PYTHONPATH": str(ROOT), "ORCHARD_DATABASE_URL": settings.database_url,
                    "ORCHARD_QUEUE_URL": settings.queue_url, "ORCHARD_QUEUE_NAME": settings.queue_name,
                    "ORCHARD_DATA_DIR": str(tmp_path / "cli")})
        cli = [sys.executable, "-m", "service.cli", "keys"]
        made = subprocess.run([*cli, "create", "--name", "ops", "--scopes", "read"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr
        ops = json.loads(made.stdout)
        assert api1.get("/v1/models", headers=bearer(ops["key"])).status_code == 200
        assert api2.get("/v1/models", headers=bearer(ops["key"])).status_code == 200
        gone = subprocess.run([*cli, "revoke", ops["id"]], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=120)
        assert gone.returncode == 0, gone.stderr
        assert api1.get("/v1/models", headers=bearer(ops["key"])).status_code == 401
        assert api2.get("/v1/models", headers=bearer(ops["key"])).status_code == 401
        assert api2.get("/v1/models", headers=bearer(admin)).status_code == 200


def test_rate_limit_is_shared_by_the_replicas(tmp_path, pg_url, redis_url):  # noqa: F811
    settings = _settings(tmp_path, pg_url, redis_url, rate_limit_per_s=0.01, rate_limit_burst=4)
    with TestClient(create_app(settings)) as api1, TestClient(create_app(settings)) as api2:
        admin = api1.post("/v1/keys", json={"name": "root", "scopes": ["admin"]}).json()["key"]
        other = api1.post("/v1/keys", json={"name": "o", "scopes": ["read"]}, headers=bearer(admin)).json()["key"]
        # the admin's 4 tokens: 1 spent creating `other`, then 2 on api1 and 1 on api2
        assert [api1.get("/v1/models", headers=bearer(admin)).status_code for _ in range(2)] == [200, 200]
        assert api2.get("/v1/models", headers=bearer(admin)).status_code == 200
        r = api2.get("/v1/models", headers=bearer(admin))
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        assert api1.post("/v1/models/m/predict", json={"rows": [[1]]}, headers=bearer(admin)).status_code == 429
        assert api2.get("/v1/models", headers=bearer(other)).status_code == 200  # per key


def test_a_replica_without_its_subscription_reads_keys_from_the_database(tmp_path, pg_url, own_redis):  # noqa: F811
    """Redis stopped: the change feed is gone, so each replica checks keys against PostgreSQL per request (a
    revocation still holds at once); Redis back: the replicas subscribe again and serve keys from memory."""
    import time

    settings = Settings(data_dir=tmp_path / "shared", database_url=pg_url, queue_url=own_redis.url,
                        queue_name=f"orchard-test-{uuid.uuid4().hex[:8]}", secret_key="shared-secret",
                        redis_socket_timeout=1.0, redis_connect_timeout=1.0)

    def wait_for(pred, what, timeout=60.0):
        deadline = time.monotonic() + timeout
        while not pred():
            assert time.monotonic() < deadline, what
            time.sleep(0.05)

    with TestClient(create_app(settings)) as api1, TestClient(create_app(settings)) as api2:
        admin = api1.post("/v1/keys", json={"name": "root", "scopes": ["admin"]}).json()["key"]
        k = api1.post("/v1/keys", json={"name": "app", "scopes": ["read"]}, headers=bearer(admin)).json()
        assert api2.get("/v1/models", headers=bearer(k["key"])).status_code == 200
        sync2 = api2.app.state.runtime.guard.ring.sync
        assert sync2.live
        own_redis.stop()
        wait_for(lambda: not sync2.live, "replica 2 did not notice its subscription was lost")
        assert api1.delete(f"/v1/keys/{k['id']}", headers=bearer(admin)).status_code == 204  # not published
        r = api2.get("/v1/models", headers=bearer(k["key"]))
        assert r.status_code == 401 and "revoked" in r.json()["detail"]
        assert api2.get("/v1/models", headers=bearer(admin)).status_code == 200
        own_redis.start()
        wait_for(lambda: sync2.live, "replica 2 did not subscribe again")
        new = api1.post("/v1/keys", json={"name": "new", "scopes": ["read"]}, headers=bearer(admin)).json()
        assert api2.get("/v1/models", headers=bearer(new["key"])).status_code == 200
        assert api2.get("/v1/models", headers=bearer(k["key"])).status_code == 401
