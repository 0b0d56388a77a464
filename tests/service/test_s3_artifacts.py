"""Artifacts on S3-compatible object storage (ORCHARD_ARTIFACTS_URL=s3://bucket/prefix), against a real
S3 server (moto's server mode): two apps with separate data directories share datasets and models through the
bucket alone; signatures, deletes and bad configuration behave as with the local directory."""

import time

import boto3
import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.s3server import s3_server
from tests.service.conftest import assert_problem, iris_csv, train, upload_csv, while_paused

ROW = {"rows": [[5.1, 3.5, 1.4, 0.2]]}


@pytest.fixture
def s3(monkeypatch):
    with s3_server() as (env, bucket):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        yield boto3.client("s3"), bucket


def _keys(client, bucket):
    return sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", ()))


def test_two_processes_share_datasets_and_models_through_the_bucket_only(tmp_path, s3):
    client, bucket = s3
    db = f"sqlite:///{tmp_path / 'meta.db'}"
    common = dict(database_url=db, artifacts_url=f"s3://{bucket}/prod", secret_key="shared", workers=0)
    with TestClient(create_app(Settings(data_dir=tmp_path / "a", **common))) as a, \
            TestClient(create_app(Settings(data_dir=tmp_path / "b", **common))) as b:
        assert a.get("/health/ready").json()["checks"]["artifacts"] == "ok"
        ds = upload_csv(a, iris_csv()).json()["id"]
        mid, job = train(a, algorithm="logistic_regression", dataset_id=ds, target="species")
        assert job["status"] == "succeeded", job
        keys = _keys(client, bucket)
        assert f"prod/models/{mid}.joblib" in keys and f"prod/datasets/{ds}/schema.json" in keys
        assert not (tmp_path / "b" / "datasets" / ds).exists()
        # b has never seen either: it reads both from the bucket
        assert b.post(f"/v1/models/{mid}/predict", json=ROW).json()["predictions"] == ["setosa"]
        ev = b.post(f"/v1/models/{mid}/evaluate", json={"dataset_id": ds})
        assert ev.status_code == 200 and ev.json()["metrics"]["accuracy"] > 0.9
        assert b.get(f"/v1/datasets/{ds}/rows?limit=2").status_code == 200
        # a model trained by b is served by a
        mid2, _ = train(b, algorithm="knn_classifier", dataset_id=ds, target="species")
        assert a.post(f"/v1/models/{mid2}/predict", json=ROW).json()["predictions"] == ["setosa"]
        # delete through a: gone from the bucket, 404 in b (whose cache notices within a second)
        assert a.delete(f"/v1/models/{mid}").status_code == 204
        assert f"prod/models/{mid}.joblib" not in _keys(client, bucket)
        deadline = time.monotonic() + 10  # b's cache re-checks the bucket at most once a second, off the loop
        while (r := b.post(f"/v1/models/{mid}/predict", json=ROW)).status_code == 200:
            assert time.monotonic() < deadline, "b kept serving a deleted model"
            time.sleep(0.2)
        assert_problem(r, 404)
        assert a.delete(f"/v1/datasets/{ds}").status_code == 204
        assert not [k for k in _keys(client, bucket) if k.startswith(f"prod/datasets/{ds}/")]


def test_a_tampered_object_is_refused_and_a_missing_one_is_reported(tmp_path, s3):
    client, bucket = s3
    s = Settings(data_dir=tmp_path / "a", artifacts_url=f"s3://{bucket}", secret_key="k", workers=0)
    with TestClient(create_app(s)) as c:
        ds = upload_csv(c, iris_csv()).json()["id"]
        mid, _ = train(c, algorithm="logistic_regression", dataset_id=ds, target="species")
        body = client.get_object(Bucket=bucket, Key=f"models/{mid}.joblib")["Body"].read()
        client.put_object(Bucket=bucket, Key=f"models/{mid}.joblib", Body=body[:-1] + bytes([body[-1] ^ 1]))
        c.app.state.runtime.cache.evict(mid)
        r = c.post(f"/v1/models/{mid}/predict", json=ROW)
        assert r.status_code == 500 and "signature verification" in r.json()["detail"]


def test_an_unreachable_or_misconfigured_bucket(tmp_path, s3, monkeypatch):
    _, bucket = s3
    with pytest.raises(ValueError, match="ORCHARD_SECRET_KEY"):
        with TestClient(create_app(Settings(data_dir=tmp_path / "a", artifacts_url=f"s3://{bucket}", workers=0))):
            pass
    with pytest.raises(ValueError, match="s3://bucket/prefix"):
        with TestClient(create_app(Settings(data_dir=tmp_path / "a", artifacts_url="http://x", secret_key="k",
                                            workers=0))):
            pass
    s = Settings(data_dir=tmp_path / "b", artifacts_url="s3://no-such-bucket/x", secret_key="k", workers=0)
    with TestClient(create_app(s)) as c:
        r = c.get("/health/ready")
        assert r.status_code == 503 and "artifacts" in r.text


def test_the_janitor_collects_orphans_in_the_bucket(tmp_path, s3):
    """With artifacts on S3 the janitor lists the bucket: an orphan dataset and model (objects without rows)
    go once older than the grace period, artifacts with rows stay."""
    from service.services.janitor import collect
    from service.storage.stores import open_stores

    client, bucket = s3
    settings = Settings(data_dir=tmp_path / "a", database_url=f"sqlite:///{tmp_path / 'meta.db'}",
                        artifacts_url=f"s3://{bucket}/prod", secret_key="shared", workers=0)
    with TestClient(create_app(settings)) as a:
        ds = upload_csv(a, iris_csv()).json()["id"]
        mid, _ = train(a, algorithm="logistic_regression", dataset_id=ds, target="species")
    meta, art = open_stores(settings)
    client.put_object(Bucket=bucket, Key="prod/models/mdl_orphan.joblib", Body=b"x")
    client.put_object(Bucket=bucket, Key="prod/datasets/ds_orphan/c0.npy", Body=b"x")
    assert collect(meta, art, grace_s=3600)["models"] == []
    report = collect(meta, art, grace_s=0)
    meta.dispose()
    assert report["models"] == ["mdl_orphan.joblib"] and report["datasets"] == ["ds_orphan"]
    keys = _keys(client, bucket)
    assert f"prod/models/{mid}.joblib" in keys and f"prod/datasets/{ds}/schema.json" in keys
    assert not [k for k in keys if "orphan" in k]


def test_a_dataset_deleted_by_another_replica_while_this_one_downloads_it_is_a_404(tmp_path, s3):
    """b has listed the dataset's objects and is downloading them when a deletes the dataset: b's download
    finds the objects gone and answers 404 problem+json, never 500."""

    _, bucket = s3
    common = dict(database_url=f"sqlite:///{tmp_path / 'meta.db'}", artifacts_url=f"s3://{bucket}/prod",
                  secret_key="shared", workers=0)
    with TestClient(create_app(Settings(data_dir=tmp_path / "a", **common))) as a, \
            TestClient(create_app(Settings(data_dir=tmp_path / "b", **common))) as b:
        ds = upload_csv(a, iris_csv()).json()["id"]
        r, deleted = while_paused(b.app.state.runtime.art.client, "download_file",
                                  lambda: b.get(f"/v1/datasets/{ds}/rows?limit=3"),
                                  lambda: a.delete(f"/v1/datasets/{ds}"))
        assert deleted.status_code == 204
        assert_problem(r, 404, ds)
        assert not (tmp_path / "b" / "datasets" / ds).exists()


def test_objects_above_the_multipart_threshold_round_trip_in_parts(tmp_path, s3):
    """A dataset column and a model bundle larger than the multipart threshold (16 MiB): uploaded in parts,
    read back by another replica in parts (the column streamed to its disk and memory-mapped, the bundle into
    memory and verified), byte for byte; a byte flipped in the second part fails the signature."""
    import hashlib
    import io

    import numpy as np

    from service.storage.artifacts import ArtifactError
    from service.storage.s3 import S3ArtifactStore

    client, bucket = s3
    a = S3ArtifactStore(tmp_path / "a", b"shared", f"s3://{bucket}/big")
    b = S3ArtifactStore(tmp_path / "b", b"shared", f"s3://{bucket}/big")
    part = a.transfer.multipart_chunksize
    threshold = a.transfer.multipart_threshold
    assert threshold == 16 * 1024 * 1024
    rng = np.random.default_rng(0)

    def parts(key):
        head = client.head_object(Bucket=bucket, Key=key)
        etag = head["ETag"].strip('"')  # a multipart upload's ETag ends in -<number of parts>
        return head["ContentLength"], int(etag.rsplit("-", 1)[1]) if "-" in etag else 1

    # a dataset column: 17 MiB of float64
    column = rng.random((threshold + 1024 * 1024) // 8)
    digest = hashlib.sha256(column.data).hexdigest()
    a.write_dataset("ds_big", {"c0": column}, {"columns": [{"name": "x", "type": "numeric", "categories": []}]})
    size, n_parts = parts("big/datasets/ds_big/c0.npy")
    assert size > threshold and n_parts == -(-size // part) >= 2
    del column
    got = b.read_dataset_array("ds_big", "c0")  # downloaded to b's disk in parts, then memory-mapped
    assert isinstance(got, np.memmap) and hashlib.sha256(got.data).hexdigest() == digest
    assert (tmp_path / "b" / "datasets" / "ds_big" / "c0.npy").stat().st_size == size
    del got

    # a model bundle: 17 MiB of random bytes (incompressible, so the signed object is as large)
    payload = rng.integers(0, 256, threshold + 1024 * 1024, dtype=np.uint8)
    digest = hashlib.sha256(payload.data).hexdigest()
    assert a.save_bundle("mdl_big", {"w": payload}) > threshold
    del payload
    size, n_parts = parts("big/models/mdl_big.joblib")
    assert size > threshold and n_parts >= 2
    loaded = b.load_bundle("mdl_big")
    assert hashlib.sha256(loaded["w"].data).hexdigest() == digest
    del loaded
    # a byte flipped in the second part: the signature covers every part
    blob = bytearray(client.get_object(Bucket=bucket, Key="big/models/mdl_big.joblib")["Body"].read())
    blob[part + 1000] ^= 1
    client.upload_fileobj(io.BytesIO(blob), bucket, "big/models/mdl_big.joblib", Config=a.transfer)
    del blob
    with pytest.raises(ArtifactError, match="signature verification"):
        b.load_bundle("mdl_big")


def test_the_janitor_removes_local_copies_of_datasets_deleted_through_another_replica(tmp_path, s3):
    """b's read-through copy of a dataset that a deletes: the bucket's objects go with the delete, b's copy is
    removed by b's janitor once not read for the grace period. A copy read recently, a copy whose dataset
    exists and the copy of a dataset being uploaded through b (no row yet) are kept."""
    import os

    from service.services.janitor import collect

    _, bucket = s3
    common = dict(database_url=f"sqlite:///{tmp_path / 'meta.db'}", artifacts_url=f"s3://{bucket}/prod",
                  secret_key="shared", workers=0)
    with TestClient(create_app(Settings(data_dir=tmp_path / "a", **common))) as a, \
            TestClient(create_app(Settings(data_dir=tmp_path / "b", **common))) as b:
        gone, kept = (upload_csv(a, iris_csv()).json()["id"] for _ in range(2))
        copies = tmp_path / "b" / "datasets"
        for ds in (gone, kept):
            assert b.get(f"/v1/datasets/{ds}/rows?limit=2").status_code == 200  # b's copy, downloaded
            assert (copies / ds / "schema.json").exists()
        hour_ago = time.time() - 3600

        def age(ds):
            for p in (copies / ds, *(copies / ds).iterdir()):
                os.utime(p, (hour_ago, hour_ago))

        # a copy read after an hour untouched becomes recent again (its directory's mtime moves on the read)
        age(gone)
        assert b.get(f"/v1/datasets/{gone}/rows?limit=2").status_code == 200
        assert time.time() - (copies / gone).stat().st_mtime < 60
        assert a.delete(f"/v1/datasets/{gone}").status_code == 204  # through a: b's copy stays behind
        assert (copies / gone / "schema.json").exists()
        rt = b.app.state.runtime
        age(kept)  # not read for an hour, but its dataset exists
        report = collect(rt.meta, rt.art, grace_s=600)
        assert report["local_copies"] == [] and (copies / gone).exists()  # read a moment ago: kept
        # an upload through b in flight: its copy is under datasets/ (renamed there, being uploaded), no row yet

        def in_flight():
            (new,) = set(os.listdir(copies)) - {gone, kept}
            report = collect(rt.meta, rt.art, grace_s=600)
            assert new in os.listdir(copies) and new not in report["local_copies"]  # written a moment ago
            return new

        uploaded, new = while_paused(rt.art.client, "upload_file", lambda: upload_csv(b, iris_csv()), in_flight)
        assert uploaded.status_code == 201 and uploaded.json()["id"] == new
        report = collect(rt.meta, rt.art, grace_s=600, now=time.time() + 3600)
        assert report["local_copies"] == [gone] and not (copies / gone).exists()
        assert (copies / kept / "schema.json").exists() and (copies / new / "schema.json").exists()
        assert report["datasets"] == []  # every dataset left has its row
        assert b.get(f"/v1/datasets/{kept}/rows?limit=2").status_code == 200
        assert_problem(b.get(f"/v1/datasets/{gone}/rows"), 404)
        # a's janitor has nothing of gone left to remove: a's copy went with the delete
        assert collect(a.app.state.runtime.meta, a.app.state.runtime.art, grace_s=0)["local_copies"] == []


def test_an_rq_worker_removes_its_local_copies_of_deleted_datasets_before_a_job(tmp_path, s3, monkeypatch):
    """A worker runs no janitor: before each job (in the work-horse) its copies of datasets whose row is gone go,
    once not read for the grace period; the copies of live datasets stay."""
    import os

    from service.queue import rq_backend
    from service.services import jobs, resources
    from service.storage.stores import open_stores

    _, bucket = s3
    common = dict(database_url=f"sqlite:///{tmp_path / 'meta.db'}", artifacts_url=f"s3://{bucket}/prod",
                  secret_key="shared", janitor_grace_s=600)
    for k, v in {**common, "data_dir": tmp_path / "w", "workers": 0}.items():
        monkeypatch.setenv(f"ORCHARD_{k.upper()}", str(v))
    with TestClient(create_app(Settings(data_dir=tmp_path / "a", workers=0, **common))) as a:
        gone, kept = (upload_csv(a, iris_csv()).json()["id"] for _ in range(2))
        meta, art = open_stores(Settings())
        for ds in (gone, kept):
            art.read_dataset_schema(ds)  # the worker's copy, as a job's read makes it
        meta.dispose()
        assert a.delete(f"/v1/datasets/{gone}").status_code == 204
    copies = tmp_path / "w" / "datasets"
    monkeypatch.setattr(rq_backend, "_STORES", {})
    monkeypatch.setattr(rq_backend, "_set_fanout", lambda settings: None)
    monkeypatch.setattr(resources, "apply_worker_memory_limit", lambda n: None)
    monkeypatch.setattr(jobs, "execute_job", lambda *args, **kw: "ran")
    assert rq_backend.run_job("job_1") == "ran"
    assert (copies / gone).exists() and (copies / kept).exists()  # read a moment ago: kept
    hour_ago = time.time() - 3600
    for ds in (gone, kept):
        for p in (copies / ds, *(copies / ds).iterdir()):
            os.utime(p, (hour_ago, hour_ago))
    assert rq_backend.run_job("job_2") == "ran"
    assert not (copies / gone).exists() and (copies / kept / "schema.json").exists()
    for m, _ in rq_backend._STORES.values():
        m.dispose()
