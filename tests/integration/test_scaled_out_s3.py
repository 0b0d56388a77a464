"""Scaled out with artifacts in a bucket: two API replicas and an RQ worker, each with its own data directory,
share nothing but PostgreSQL, Redis and an S3-compatible bucket (a real S3 server: moto's server mode)."""

import os
import subprocess
import sys
import uuid

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.integration.test_scaled_out import ROOT, pg_url, redis_url  # noqa: F401 - fixtures
from tests.s3server import s3_server
from tests.service.conftest import iris_csv, upload_csv

pytestmark = [pytest.mark.services, pytest.mark.slow]


def test_replicas_and_a_worker_share_only_the_stores_and_the_bucket(tmp_path, pg_url, redis_url,  # noqa: F811
                                                                     monkeypatch):
    with s3_server() as (aws, bucket):
        for k, v in aws.items():
            monkeypatch.setenv(k, v)
        common = dict(database_url=pg_url, queue_url=redis_url, queue_name=f"orchard-test-{uuid.uuid4().hex[:8]}",
                      secret_key="shared-secret", artifacts_url=f"s3://{bucket}/orchard")
        s1, s2 = Settings(data_dir=tmp_path / "api1", **common), Settings(data_dir=tmp_path / "api2", **common)
        with TestClient(create_app(s1)) as api1, TestClient(create_app(s2)) as api2:
            ds = upload_csv(api1, iris_csv()).json()["id"]
            r = api2.post("/v1/train", json={"algorithm": "logistic_regression", "dataset_id": ds, "target": "species"})
            assert r.status_code == 202, r.text
            job_id, mid = r.json()["job"]["id"], r.json()["model_id"]
            env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
            env.update(aws, PYTHONPATH=str(ROOT), ORCHARD_DATABASE_URL=pg_url, ORCHARD_QUEUE_URL=redis_url,
                       ORCHARD_QUEUE_NAME=common["queue_name"], ORCHARD_SECRET_KEY="shared-secret",
                       ORCHARD_ARTIFACTS_URL=common["artifacts_url"], ORCHARD_DATA_DIR=str(tmp_path / "worker"))
            done = subprocess.run([sys.executable, "-m", "service.cli", "worker", "--burst"], cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr[-2000:]
            assert api1.get(f"/v1/jobs/{job_id}").json()["status"] == "succeeded"
            p = api1.post(f"/v1/models/{mid}/predict", json={"rows": [[5.1, 3.5, 1.4, 0.2]]}).json()
            assert p["predictions"] == ["setosa"]
            assert api2.post(f"/v1/models/{mid}/evaluate", json={"dataset_id": ds}).json()["metrics"]["accuracy"] > 0.9
        # no process wrote an artifact into another's directory: the models live in the bucket only
        for d in ("api1", "api2", "worker"):
            assert not list((tmp_path / d / "models").glob("*.joblib")), d
