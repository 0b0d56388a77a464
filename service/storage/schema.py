"""Creating and upgrading the metadata schema with Alembic, safely from many processes at once.

``upgrade(engine)`` brings a database to the newest revision shipped in ``service/storage/migrations``:

* a quick look first: a database already at the head is left alone (no lock, no Alembic command), so the
  usual start of a replica or worker costs one small query;
* otherwise under a lock, so that concurrent first starts (several replicas, workers) are safe: on PostgreSQL a
  session-level ``pg_advisory_lock`` held on the dedicated connection that runs the migration; on SQLite an
  exclusive ``flock`` on ``<database file>.migrate.lock``. The process that gets the lock second finds the
  schema at the head and does nothing;
* a database made before migrations existed (``metadata.create_all``: the tables, no ``alembic_version``) is
  stamped with the baseline revision instead of being created again, then upgraded.

No alembic.ini: the configuration is built here, and the migration scripts are package data.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
from pathlib import Path

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

log = logging.getLogger("orchard.schema")

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
BASELINE = "0001"
BASELINE_TABLES = ("datasets", "models", "jobs")
# pg_advisory_lock key: any 64-bit integer the application reserves; this one is "orchard1" in ASCII
ADVISORY_LOCK_KEY = int.from_bytes(b"orchard1", "big") - 2**63


def alembic_config(url: str | None = None, connection: Connection | None = None):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


_REVISION = re.compile(r"^revision\s*=\s*['\"]([^'\"]+)['\"]", re.M)
_DOWN = re.compile(r"^down_revision\s*=\s*(.+)$", re.M)


def head_revision() -> str:
    """The newest revision, read from the version files without importing Alembic (importing it costs about a
    second of every start; ``tests/service/test_migrations.py`` checks this agrees with Alembic's own answer)."""
    revisions, parents = set(), set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        text_ = path.read_text()
        m = _REVISION.search(text_)
        if m is None:
            continue
        revisions.add(m.group(1))
        down = _DOWN.search(text_)
        if down is not None:
            parents.update(re.findall(r"['\"]([^'\"]+)['\"]", down.group(1)))
    heads = sorted(revisions - parents)
    if len(heads) != 1:
        raise RuntimeError(f"the migrations have {len(heads)} heads ({heads}); merge them into one")
    return heads[0]


def current_revision(conn: Connection) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def upgrade(engine: Engine, revision: str = "head") -> str:
    """Bring the schema to ``revision`` (default: the newest); returns the revision the database is at."""
    target = head_revision() if revision == "head" else revision
    with engine.connect() as conn:
        if current_revision(conn) == target:
            return target
    with _migration_lock(engine) as conn:
        return _upgrade_locked(conn, target)


def _upgrade_locked(conn: Connection, target: str) -> str:
    from alembic import command

    current = current_revision(conn)
    conn.commit()
    if current == target:
        return current
    cfg = alembic_config(connection=conn)
    if current is None:
        present = [t for t in BASELINE_TABLES if inspect(conn).has_table(t)]
        conn.commit()
        if present and len(present) < len(BASELINE_TABLES):
            raise RuntimeError(f"the database has some of Orchard's tables ({', '.join(present)}) but not all, and "
                               "no alembic_version table: it was not made by Orchard, or its creation was "
                               "interrupted; restore it or start from an empty database")
        if present:
            log.info("database created before migrations: stamping it with the baseline revision %s", BASELINE)
            with conn.begin():
                command.stamp(cfg, BASELINE)
    with conn.begin():
        command.upgrade(cfg, target)
    now = current_revision(conn)
    conn.commit()
    log.info("metadata schema upgraded from %s to %s", current or "an empty database", now)
    return now


@contextlib.contextmanager
def _migration_lock(engine: Engine):
    """A connection that holds the migration lock (PostgreSQL advisory lock, or a file lock for SQLite)."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": ADVISORY_LOCK_KEY})
            conn.commit()
            try:
                yield conn
            finally:
                conn.rollback()
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": ADVISORY_LOCK_KEY})
                conn.commit()
        return
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:" or database.startswith("file:"):
        with engine.connect() as conn:  # one process only, or a database that takes its own locks
            yield conn
        return
    lock_path = f"{database}.migrate.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with engine.connect() as conn:
            yield conn
    finally:
        os.close(fd)  # releases the lock
