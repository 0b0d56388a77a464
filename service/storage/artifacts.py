"""Artifact store: files under the data directory, written atomically, model bundles signed.

* Every write goes to a temporary file in the same directory, is fsynced, then renamed.
* Model bundles are joblib pickles framed as ``MAGIC | HMAC-SHA256(key, payload) | payload``;
  ``load_bundle`` verifies the tag with a constant-time comparison BEFORE unpickling anything,
  so a tampered, truncated or foreign file is refused and never deserialised.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import joblib
import numpy as np

MAGIC = b"ORCHARD-BUNDLE-v1\n"
TAG_LEN = 32


class ArtifactError(Exception):
    """An artifact is missing, unsigned, tampered with or unreadable."""


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class ArtifactStore:
    local = True  # artifacts are files here: an existence check is a stat

    def __init__(self, root: Path, secret: bytes):
        self.root = Path(root)
        self.secret = secret
        (self.root / "datasets").mkdir(parents=True, exist_ok=True)
        (self.root / "models").mkdir(parents=True, exist_ok=True)
        (self.root / "tmp").mkdir(parents=True, exist_ok=True)

    def ping(self) -> None:
        probe = self.root / "tmp" / f".probe-{uuid.uuid4().hex}"
        probe.write_bytes(b"ok")
        probe.unlink()

    @property
    def tmp_dir(self) -> Path:
        return self.root / "tmp"

    # -- datasets: one directory of .npy columns + schema.json ------------------------------
    def dataset_dir(self, dataset_id: str) -> Path:
        return self.root / "datasets" / dataset_id

    def write_dataset(self, dataset_id: str, arrays: dict[str, np.ndarray], schema: dict) -> int:
        """Write all column arrays into a fresh directory, then rename it into place."""
        final = self.dataset_dir(dataset_id)
        staging = self.tmp_dir / f"ds-{dataset_id}-{uuid.uuid4().hex}"
        staging.mkdir(parents=True)
        try:
            size = 0
            for key, arr in arrays.items():
                p = staging / f"{key}.npy"
                with open(p, "wb") as fh:
                    np.save(fh, arr, allow_pickle=False)
                    fh.flush()
                    os.fsync(fh.fileno())
                size += p.stat().st_size
            raw = json.dumps(schema).encode()
            with open(staging / "schema.json", "wb") as fh:
                fh.write(raw)
                fh.flush()
                os.fsync(fh.fileno())
            size += len(raw)
            os.replace(staging, final)
            _fsync_dir(final.parent)
            return size
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def read_dataset_schema(self, dataset_id: str) -> dict:
        try:
            return json.loads((self.dataset_dir(dataset_id) / "schema.json").read_bytes())
        except FileNotFoundError:
            raise ArtifactError(f"dataset {dataset_id} has no stored data") from None

    def read_dataset_array(self, dataset_id: str, key: str, mmap: bool = True) -> np.ndarray:
        try:
            return np.load(self.dataset_dir(dataset_id) / f"{key}.npy", mmap_mode="r" if mmap else None,
                           allow_pickle=False)
        except FileNotFoundError:
            raise ArtifactError(f"dataset {dataset_id} is missing column file {key}") from None

    def delete_dataset(self, dataset_id: str) -> None:
        shutil.rmtree(self.dataset_dir(dataset_id), ignore_errors=True)

    # -- model bundles ------------------------------------------------------------------------
    def model_path(self, model_id: str) -> Path:
        return self.root / "models" / f"{model_id}.joblib"

    def _tag(self, payload: bytes) -> bytes:
        return hmac.new(self.secret, payload, hashlib.sha256).digest()

    def signed_blob(self, bundle: Any) -> bytes:
        """A bundle as stored: ``MAGIC | HMAC-SHA256(key, payload) | payload`` (payload: a joblib pickle)."""
        buf = io.BytesIO()
        joblib.dump(bundle, buf, compress=3)
        payload = buf.getvalue()
        return MAGIC + self._tag(payload) + payload

    def verified_bundle(self, blob: bytes, name: str) -> Any:
        """The bundle in ``blob``, unpickled only after its signature is verified (constant-time)."""
        if not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + TAG_LEN:
            raise ArtifactError(f"model artifact {name} is not a signed Orchard bundle; refusing to load it")
        tag = blob[len(MAGIC): len(MAGIC) + TAG_LEN]
        payload = blob[len(MAGIC) + TAG_LEN:]
        if not hmac.compare_digest(tag, self._tag(payload)):
            raise ArtifactError(
                f"model artifact {name} failed signature verification (tampered with, or signed with "
                "another ORCHARD_SECRET_KEY); refusing to load it"
            )
        return joblib.load(io.BytesIO(payload))

    def save_bundle(self, model_id: str, bundle: Any) -> int:
        blob = self.signed_blob(bundle)
        atomic_write(self.model_path(model_id), blob)
        return len(blob)

    def stage_bundle(self, model_id: str, bundle: Any) -> tuple[Path, int]:
        """Write a signed bundle next to its final path under a unique name (fsynced); ``publish_bundle`` renames
        it into place. Lets a job attempt publish only after the metadata store confirms it still holds the job."""
        blob = self.signed_blob(bundle)
        final = self.model_path(model_id)
        final.parent.mkdir(parents=True, exist_ok=True)
        staged = final.parent / f".{final.name}.{uuid.uuid4().hex}.tmp"
        with open(staged, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        return staged, len(blob)

    def publish_bundle(self, staged: Path, model_id: str) -> None:
        os.replace(staged, self.model_path(model_id))
        _fsync_dir(self.model_path(model_id).parent)

    def load_bundle(self, model_id: str) -> Any:
        path = self.model_path(model_id)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            raise ArtifactError(f"model artifact {path.name} is missing") from None
        return self.verified_bundle(blob, path.name)

    def model_exists(self, model_id: str) -> bool:
        return self.model_path(model_id).exists()

    def delete_model(self, model_id: str) -> None:
        self.model_path(model_id).unlink(missing_ok=True)

    def cleanup_tmp(self) -> None:
        for p in self.tmp_dir.iterdir():
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
