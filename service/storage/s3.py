"""The artifact store on S3-compatible object storage (``ORCHARD_ARTIFACTS_URL=s3://bucket/prefix``).

Replicas and workers then share nothing but PostgreSQL, Redis and the bucket: each process keeps its own data
directory for temporary files and a local copy of the datasets it has read. Objects:

* ``<prefix>/models/<id>.joblib``: the signed bundle, one object (a PUT is atomic: a reader sees the whole old
  object or the whole new one); uploaded and downloaded in parts by boto3's transfer manager.
* ``<prefix>/datasets/<id>/<column>.npy`` and ``schema.json`` last: the dataset's metadata row is inserted only
  after ``publish_dataset`` returns, so no reader looks for a dataset whose objects are still being uploaded.
  A dataset is immutable: a process downloads it once into its data directory (into a staging directory,
  renamed into place) and memory-maps it from there. The janitor removes a local copy once its dataset's row
  is gone (deleted, maybe through another replica) and the copy has not been read for its grace period.

Endpoint, credentials and region come from the usual AWS variables (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``...), read by boto3 itself.
"""

from __future__ import annotations

import io
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from .artifacts import ArtifactError, ArtifactStore, fsync_dir

# a local dataset copy's directory mtime is moved to the time of a read at most this often (seconds)
LOCAL_COPY_TOUCH_S = 60.0


def parse_s3_url(url: str) -> tuple[str, str]:
    """(bucket, prefix) of ``s3://bucket/prefix``; ValueError naming the problem otherwise."""
    parts = urlparse(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise ValueError(f"ORCHARD_ARTIFACTS_URL must look like s3://bucket/prefix, got {url!r}")
    return parts.netloc, parts.path.strip("/")


class S3ArtifactStore(ArtifactStore):
    """``ArtifactStore`` whose datasets and models live in a bucket; ``root`` is this process's local directory."""

    local = False

    def __init__(self, root: Path, secret: bytes, url: str, client=None):
        super().__init__(root, secret)
        import boto3
        from boto3.s3.transfer import TransferConfig
        from botocore.config import Config

        self.url = url
        self.bucket, self.prefix = parse_s3_url(url)
        self.client = client or boto3.client("s3", config=Config(
            retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=5, read_timeout=60))
        self.transfer = TransferConfig(multipart_threshold=16 * 1024 * 1024, multipart_chunksize=16 * 1024 * 1024)

    def _key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def _missing(self, exc: Exception) -> bool:
        code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
        return code in ("404", "NoSuchKey", "NotFound")

    def ping(self) -> None:
        super().ping()  # the local directory (temporary files) must be writable too
        self.client.head_bucket(Bucket=self.bucket)

    # -- datasets ---------------------------------------------------------------------------------
    def publish_dataset(self, dataset_id: str, staging: Path, schema: dict) -> int:
        size = super().publish_dataset(dataset_id, staging, schema)  # the local copy, renamed into place
        local = self.dataset_dir(dataset_id)
        names = sorted(p.name for p in local.iterdir() if p.name != "schema.json") + ["schema.json"]
        try:
            for name in names:  # schema.json last: its presence means the dataset is complete
                self.client.upload_file(str(local / name), self.bucket, self._key("datasets", dataset_id, name),
                                        Config=self.transfer)
        except BaseException:
            self.delete_dataset(dataset_id)
            raise
        return size

    def _ensure_local(self, dataset_id: str) -> None:
        local = self.dataset_dir(dataset_id)
        if (local / "schema.json").exists():
            try:  # a copy in use stays recent for the janitor (list_local_dataset_copies): one write a minute
                if time.time() - local.stat().st_mtime >= LOCAL_COPY_TOUCH_S:
                    os.utime(local)
            except OSError:  # removed meanwhile: the read that follows says so
                pass
            return
        prefix = self._key("datasets", dataset_id) + "/"
        keys = [o["Key"] for page in self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix) for o in page.get("Contents", ())]
        if prefix + "schema.json" not in keys:
            raise ArtifactError(f"dataset {dataset_id} has no stored data")
        staging = self.tmp_dir / f"dl-{dataset_id}-{uuid.uuid4().hex}"
        staging.mkdir(parents=True)
        try:
            for key in keys:
                try:
                    self.client.download_file(self.bucket, key, str(staging / key[len(prefix):]),
                                              Config=self.transfer)
                except Exception as exc:  # noqa: BLE001 - botocore's ClientError and its 404s
                    if self._missing(exc):  # deleted since it was listed
                        raise ArtifactError(f"dataset {dataset_id} is missing object {key}") from None
                    raise
            final = self.dataset_dir(dataset_id)
            try:
                os.replace(staging, final)
            except OSError:  # another thread of this process got there first: its copy is the same
                shutil.rmtree(staging, ignore_errors=True)
            fsync_dir(final.parent)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def read_dataset_schema(self, dataset_id: str) -> dict:
        self._ensure_local(dataset_id)
        return super().read_dataset_schema(dataset_id)

    def read_dataset_array(self, dataset_id: str, key: str, mmap: bool = True):
        self._ensure_local(dataset_id)
        return super().read_dataset_array(dataset_id, key, mmap)

    def delete_dataset(self, dataset_id: str) -> None:
        prefix = self._key("datasets", dataset_id) + "/"
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            objs = [{"Key": o["Key"]} for o in page.get("Contents", ())]
            if objs:
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": objs, "Quiet": True})
        super().delete_dataset(dataset_id)

    # -- the janitor's view: the bucket's objects, and the local copies apart ----------------------------
    def _objects(self, *parts: str):
        prefix = self._key(*parts) + "/"
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            for o in page.get("Contents", ()):
                yield o["Key"][len(prefix):], o["LastModified"].timestamp()

    def list_dataset_artifacts(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, mtime in self._objects("datasets"):
            ds_id = name.split("/", 1)[0]
            out[ds_id] = max(out.get(ds_id, 0.0), mtime)
        return out

    def list_model_artifacts(self) -> dict[str, float]:
        return {name: mtime for name, mtime in self._objects("models") if "/" not in name}

    def list_local_dataset_copies(self) -> dict[str, float]:
        """This process's read-through copies (``datasets/<id>`` under its data directory): dataset id -> the
        newest of its files' and its directory's mtimes (the directory's is moved on reads, so a copy in use
        stays recent). A copy is complete once there: downloads are staged in the temporary directory."""
        return super().list_dataset_artifacts()

    def remove_local_dataset_copy(self, dataset_id: str) -> None:
        super().delete_dataset(dataset_id)

    def remove_model_file(self, name: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key("models", name))

    # -- model bundles ------------------------------------------------------------------------------
    def save_bundle(self, model_id: str, bundle: Any) -> int:
        blob = self.signed_blob(bundle)
        self.client.upload_fileobj(io.BytesIO(blob), self.bucket, self._key("models", f"{model_id}.joblib"),
                                   Config=self.transfer)
        return len(blob)

    def publish_bundle(self, staged: Path, model_id: str) -> None:
        """Upload a bundle staged locally (``stage_bundle``) as the model's object, then drop the local file."""
        self.client.upload_file(str(staged), self.bucket, self._key("models", f"{model_id}.joblib"),
                                Config=self.transfer)
        staged.unlink(missing_ok=True)

    def load_bundle(self, model_id: str) -> Any:
        name = f"{model_id}.joblib"
        buf = io.BytesIO()
        try:
            self.client.download_fileobj(self.bucket, self._key("models", name), buf, Config=self.transfer)
        except Exception as exc:  # noqa: BLE001 - botocore's ClientError and its 404s
            if self._missing(exc):
                raise ArtifactError(f"model artifact {name} is missing") from None
            raise
        return self.verified_bundle(buf.getvalue(), name)

    def model_exists(self, model_id: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key("models", f"{model_id}.joblib"))
        except Exception as exc:  # noqa: BLE001
            if self._missing(exc):
                return False
            raise
        return True

    def delete_model(self, model_id: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key("models", f"{model_id}.joblib"))
