"""Private files: the data directory 0700, every file Orchard creates 0600, the signing key made atomically.

* ``private_data_dir`` creates the data directory 0700 (tightening an existing one Orchard owns) and sets the
  process umask to 077, so that every file and directory the process then creates (SQLite database and its
  journal, artifacts, temporary uploads, lock files; also by libraries: SQLite, joblib, Arrow) is 0600/0700.
* ``load_or_create_secret`` reads ``secret.key`` or creates it: a full key is written to a temporary file of its
  own, fsynced, then hard-linked to the final name. ``link`` fails if the name exists, so exactly one process
  wins, and the name only ever points at a complete file: every process reads the same full key. A key
  readable by group or others, or shorter than ``MIN_KEY_BYTES``, is refused with a message saying how to fix
  it.

See docs/decisions/file-permissions.md.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

MIN_KEY_BYTES = 32


class SecretKeyError(RuntimeError):
    """The signing key cannot be used as it is; the message says what to do."""


def private_data_dir(path: Path) -> None:
    os.umask(0o077)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.stat()
    if stat.S_IMODE(st.st_mode) & 0o077 and st.st_uid == os.geteuid():
        os.chmod(path, 0o700)


def sync_path(path: Path, *, data_only: bool = False, best_effort: bool = False) -> None:
    """fsync (or fdatasync) a file or directory by path; `best_effort` skips what cannot be opened or synced
    (a file removed meanwhile, a file system without directory fsync)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        if best_effort:
            return
        raise
    try:
        (os.fdatasync if data_only else os.fsync)(fd)
    except OSError:
        if not best_effort:
            raise
    finally:
        os.close(fd)


def _read_key(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise SecretKeyError(
                f"the signing key {path} is open to group or others (mode {stat.S_IMODE(st.st_mode):04o}): "
                f"anyone who reads it can forge model artifacts. Run `chmod 600 {path}` (and check who could "
                "have read it; if in doubt, delete it and retrain: artifacts signed with it stop loading), or set "
                "ORCHARD_SECRET_KEY instead")
        with os.fdopen(os.dup(fd), "rb") as fh:
            key = fh.read().strip()
    finally:
        os.close(fd)
    if len(key) < MIN_KEY_BYTES:
        raise SecretKeyError(f"the signing key {path} holds {len(key)} bytes, fewer than {MIN_KEY_BYTES}: it was "
                             "cut short or edited. Restore it from a backup, or delete it (a new key is made at "
                             "the next start; models signed with the old key will no longer load)")
    return key


def load_or_create_secret(data_dir: Path) -> bytes:
    """The key in ``<data_dir>/secret.key``, created (once, by exactly one process) when missing."""
    path = data_dir / "secret.key"
    if not path.exists():
        private_data_dir(data_dir)
        fd, tmp = tempfile.mkstemp(dir=data_dir, prefix=".secret.key.", suffix=".tmp")  # 0600, a name of its own
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(os.urandom(32).hex().encode())
                fh.flush()
                os.fsync(fh.fileno())
            try:
                os.link(tmp, path)  # atomic, and fails if another process linked its key first
            except FileExistsError:
                pass
            else:
                sync_path(data_dir)
        finally:
            os.unlink(tmp)
    return _read_key(path)
