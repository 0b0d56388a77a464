"""Artifact store: files under the data directory, written atomically, model bundles signed.

* Every write goes to a temporary file in the same directory, is fsynced, then renamed.
* Temporary files (uploads being received, datasets being staged) live in a directory of their own per
  process, ``tmp/<hostname>-<pid>-<random>/``, with an ``owner.json`` saying which process owns it. At start a
  process removes only the temporary directories of processes that are provably dead (``sweep_tmp``), never
  those of another live replica sharing the data directory.
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
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import joblib
import numpy as np

from .files import sync_path


class _ViewReader(io.RawIOBase):
    """A read-only, seekable file over a memoryview (``io.BytesIO`` would copy a view it is given)."""

    def __init__(self, view: memoryview):
        self._view = view
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._view)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer) -> int:
        chunk = self._view[self._pos:self._pos + len(buffer)]
        n = len(chunk)
        memoryview(buffer).cast("B")[:n] = chunk
        self._pos += n
        return n


_READ_CHUNK = 8 << 20


def _read_unlocked(path: Path) -> memoryview:
    """A file's bytes read into fresh memory a chunk at a time. ``Path.read_bytes`` holds the GIL while it sizes
    and finishes its buffer, ``bytearray(n)`` while it zeroes it (tens to hundreds of milliseconds for a large
    model on a busy machine); here the pages are first touched by ``read``, which runs without the GIL."""
    with open(path, "rb", buffering=0) as fh:
        size = os.fstat(fh.fileno()).st_size
        view = memoryview(np.empty(size, dtype=np.uint8))
        pos = 0
        while pos < size:
            n = fh.readinto(view[pos:pos + _READ_CHUNK])
            if not n:
                break
            pos += n
    return view[:pos]


MAGIC = b"ORCHARD-BUNDLE-v1\n"
TAG_LEN = 32


class ArtifactError(Exception):
    """An artifact is missing, unsigned, tampered with or unreadable."""


def fsync_dir(path: Path) -> None:
    sync_path(path, best_effort=True)


def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


# a temporary directory whose owner cannot be proved dead (another host, another PID namespace) is removed
# only when nothing in it has changed for this long
FOREIGN_TMP_STALE_S = 24 * 3600


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), None if it is gone:
    with the PID it identifies a process even after its PID is reused."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def process_identity() -> dict:
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "boot_id": _read("/proc/sys/kernel/random/boot_id"),
            "pid_ns": _pid_namespace(), "start_time": _start_time(pid)}


def owner_is_dead(owner: dict, me: dict) -> bool:
    """Whether the process described by ``owner`` (an ``owner.json``) has provably ended. Only a process of this
    host can be proved dead: same hostname and either an earlier boot, or the same boot and PID namespace with
    no process of that PID and start time any more."""
    if owner.get("host") != me["host"] or not me["boot_id"] or not owner.get("boot_id"):
        return False
    if owner["boot_id"] != me["boot_id"]:
        return True  # the host rebooted since: every process of the earlier boot has ended
    if not me["pid_ns"] or owner.get("pid_ns") != me["pid_ns"]:
        return False  # another container on this host: its PIDs are not ours to look up
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    if pid == me["pid"] and owner.get("start_time") == me["start_time"]:
        return False
    started = _start_time(pid)
    return started is None or started != owner.get("start_time")


def _newest_mtime(path: Path) -> float:
    newest = path.lstat().st_mtime
    if path.is_dir() and not path.is_symlink():
        for dirpath, dirnames, filenames in os.walk(path):
            for name in dirnames + filenames:
                try:
                    newest = max(newest, os.lstat(os.path.join(dirpath, name)).st_mtime)
                except OSError:
                    pass
    return newest


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


class ArtifactStore:
    local = True  # artifacts are files here: an existence check is a stat

    def __init__(self, root: Path, secret: bytes):
        self.root = Path(root)
        self.secret = secret
        (self.root / "datasets").mkdir(parents=True, exist_ok=True)
        (self.root / "models").mkdir(parents=True, exist_ok=True)
        (self.root / "tmp").mkdir(parents=True, exist_ok=True)
        self._tmp: Path | None = None
        self._tmp_pid: int | None = None

    def ping(self) -> None:
        probe = self.tmp_dir / f".probe-{uuid.uuid4().hex}"
        probe.write_bytes(b"ok")
        probe.unlink()

    @property
    def tmp_root(self) -> Path:
        return self.root / "tmp"

    @property
    def tmp_dir(self) -> Path:
        """This process's own temporary directory (made on first use, again after a fork)."""
        if self._tmp_pid != os.getpid() or self._tmp is None or not self._tmp.is_dir():
            me = process_identity()
            d = self.tmp_root / f"{me['host']}-{me['pid']}-{uuid.uuid4().hex[:8]}"
            d.mkdir(parents=True)
            atomic_write(d / "owner.json", json.dumps(me).encode())
            self._tmp, self._tmp_pid = d, me["pid"]
        return self._tmp

    def sweep_tmp(self, grace_s: float, now: float | None = None) -> list[str]:
        """Remove the temporary directories of ended processes (and loose files left in ``tmp/`` by older
        versions) once nothing in them has changed for ``grace_s`` seconds. A directory whose owner may be
        alive is kept; one whose owner cannot be checked (another host or container) is removed only after
        ``FOREIGN_TMP_STALE_S`` without a change. Safe to run in several processes at once. Returns the names
        removed."""
        now = time.time() if now is None else now
        me = process_identity()
        removed = []
        try:
            entries = list(self.tmp_root.iterdir())
        except FileNotFoundError:
            return removed
        for p in entries:
            if p == self._tmp and self._tmp_pid == me["pid"]:
                continue
            try:
                owner = json.loads((p / "owner.json").read_bytes()) if p.is_dir() else None
            except (OSError, ValueError):
                owner = None
            try:
                idle = now - _newest_mtime(p)
            except OSError:
                continue  # removed meanwhile
            dead = isinstance(owner, dict) and owner_is_dead(owner, me)
            if not dead and isinstance(owner, dict) and all(owner.get(k) == me[k] for k in ("host", "boot_id",
                                                                                              "pid_ns")):
                continue  # a live process of this host and PID namespace: never touched
            if idle >= (grace_s if dead else max(grace_s, FOREIGN_TMP_STALE_S)):
                _remove(p)
                removed.append(p.name)
        return removed

    # -- datasets: one directory of .npy columns + schema.json ------------------------------
    def dataset_dir(self, dataset_id: str) -> Path:
        return self.root / "datasets" / dataset_id

    def write_dataset(self, dataset_id: str, arrays: dict[str, np.ndarray], schema: dict) -> int:
        """Write all column arrays into a fresh directory, then rename it into place."""
        staging = self.dataset_staging(dataset_id)
        try:
            for key, arr in arrays.items():
                with open(staging / f"{key}.npy", "wb") as fh:
                    np.save(fh, arr, allow_pickle=False)
            return self.publish_dataset(dataset_id, staging, schema)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def dataset_staging(self, dataset_id: str) -> Path:
        """A fresh directory for a dataset's column files (``c{j}.npy``), published by ``publish_dataset``."""
        staging = self.tmp_dir / f"ds-{dataset_id}-{uuid.uuid4().hex}"
        staging.mkdir(parents=True)
        return staging

    def publish_dataset(self, dataset_id: str, staging: Path, schema: dict) -> int:
        """fsync the column files, add schema.json, rename the directory into place; returns the bytes stored.
        The caller removes ``staging`` when this raises."""
        files = list(staging.iterdir())
        if len(files) > 1:  # in parallel: the device takes the files' writes at once, not one file after another
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(len(files), 8), thread_name_prefix="orchard-fsync") as pool:
                list(pool.map(sync_path, files))
        else:
            for p in files:
                sync_path(p)
        size = sum(p.stat().st_size for p in files)
        raw = json.dumps(schema).encode()
        with open(staging / "schema.json", "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        size += len(raw)
        final = self.dataset_dir(dataset_id)
        os.replace(staging, final)
        fsync_dir(final.parent)
        return size

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

    def verified_bundle(self, blob: bytes | memoryview, name: str) -> Any:
        """The bundle in ``blob``, unpickled only after its signature is verified (constant-time)."""
        view = memoryview(blob)
        if len(view) < len(MAGIC) + TAG_LEN or view[:len(MAGIC)] != MAGIC:
            raise ArtifactError(f"model artifact {name} is not a signed Orchard bundle; refusing to load it")
        tag = bytes(view[len(MAGIC): len(MAGIC) + TAG_LEN])
        # a view, not a slice: copying a large bundle's bytes holds the GIL for as long as it takes (~0.3 s for
        # 150 MB on a busy machine) and every other thread, the event loop's included, waits meanwhile
        payload = view[len(MAGIC) + TAG_LEN:]
        if not hmac.compare_digest(tag, self._tag(payload)):
            raise ArtifactError(
                f"model artifact {name} failed signature verification (tampered with, or signed with "
                "another ORCHARD_SECRET_KEY); refusing to load it"
            )
        return joblib.load(io.BufferedReader(_ViewReader(payload)))

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
        fsync_dir(self.model_path(model_id).parent)

    def load_bundle(self, model_id: str) -> Any:
        path = self.model_path(model_id)
        try:
            blob = _read_unlocked(path)
        except FileNotFoundError:
            raise ArtifactError(f"model artifact {path.name} is missing") from None
        return self.verified_bundle(blob, path.name)

    def model_exists(self, model_id: str) -> bool:
        return self.model_path(model_id).exists()

    def delete_model(self, model_id: str) -> None:
        self.model_path(model_id).unlink(missing_ok=True)

    def remove_own_tmp(self) -> None:
        """At a clean shutdown: this process's temporary directory goes."""
        if self._tmp is not None and self._tmp_pid == os.getpid():
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    # -- the janitor's view -------------------------------------------------------------------
    def list_dataset_artifacts(self) -> dict[str, float]:
        """dataset id -> newest modification time of its directory's files."""
        out = {}
        for p in (self.root / "datasets").iterdir():
            try:
                out[p.name] = _newest_mtime(p)
            except OSError:
                pass
        return out

    def list_local_dataset_copies(self) -> dict[str, float]:
        """Local copies of datasets stored elsewhere: dataset id -> when the copy was last written or read. None
        here, where a dataset's directory is the dataset itself (``list_dataset_artifacts``)."""
        return {}

    def remove_local_dataset_copy(self, dataset_id: str) -> None:
        """Remove this process's local copy of a dataset stored elsewhere (nothing here)."""

    def list_model_artifacts(self) -> dict[str, float]:
        """File name -> modification time, for every file under models/ (bundles and leftover temp files)."""
        out = {}
        for p in (self.root / "models").iterdir():
            try:
                out[p.name] = p.lstat().st_mtime
            except OSError:
                pass
        return out

    def remove_model_file(self, name: str) -> None:
        _remove(self.root / "models" / name)
