"""Metadata store: datasets, models and jobs in SQL (SQLite by default, PostgreSQL when configured).

SQLAlchemy Core, three tables, JSON columns for nested fields.  The schema is created and changed only by the
Alembic migrations in ``migrations/`` (``upgrade_schema``); a change here needs a new revision there.  Every write
is one transaction.  Job (and their models') state changes live in ``service/services/jobs.py``: conditional
updates on the job's status and attempt token, so that two processes never both claim or finish a job.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
    func,
    select,
    text,
    update,
)
from sqlalchemy.engine import Engine

metadata = MetaData()

datasets = Table(
    "datasets", metadata,
    Column("id", String(40), primary_key=True),
    Column("name", String(255), nullable=False),
    Column("n_rows", Integer, nullable=False),
    Column("n_columns", Integer, nullable=False),
    Column("columns", JSON, nullable=False),
    Column("size_bytes", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, index=True),
    Column("notes", JSON, nullable=True),
    Column("project", String(63), nullable=False, server_default=text("'default'"), index=True),
)

models = Table(
    "models", metadata,
    Column("id", String(40), primary_key=True),
    Column("name", String(255), nullable=False, index=True),
    Column("algorithm", String(100), nullable=False, index=True),
    Column("task", String(40), nullable=False),
    Column("params", JSON, nullable=False),
    Column("status", String(20), nullable=False, index=True),
    Column("job_id", String(40), nullable=False),
    Column("dataset_id", String(40)),
    Column("features", JSON),
    Column("target", String(255)),
    Column("classes", JSON),
    Column("metrics", JSON),
    Column("insight", JSON, nullable=True),  # feature importances / coefficients (GET /v1/models/{id})
    Column("size_bytes", Integer, nullable=False, default=0),
    Column("created_at", DateTime(timezone=True), nullable=False, index=True),
    Column("notes", JSON, nullable=True),
    Column("preprocessing", JSON, nullable=True),
    Column("project", String(63), nullable=False, server_default=text("'default'"), index=True),
)

jobs = Table(
    "jobs", metadata,
    Column("id", String(40), primary_key=True),
    Column("kind", String(40), nullable=False, index=True),
    Column("status", String(20), nullable=False, index=True),
    Column("progress", Float, nullable=False, default=0.0),
    Column("message", Text, nullable=False, default=""),
    Column("payload", JSON, nullable=False),
    Column("result", JSON),
    Column("error", JSON),
    Column("model_id", String(40)),
    Column("cancel_requested", Boolean, nullable=False, default=False),
    Column("worker", String(255)),
    Column("created_at", DateTime(timezone=True), nullable=False, index=True),
    Column("started_at", DateTime(timezone=True)),
    Column("finished_at", DateTime(timezone=True)),
    Column("updated_at", DateTime(timezone=True)),
    # the attempt token (fencing): incremented by every claim; only the attempt holding it may change the job
    Column("attempt", Integer, nullable=False, server_default=text("0"), default=0),
    # the running attempt's lease: renewed by it every third of ORCHARD_JOB_LEASE_TIMEOUT (services/jobs.py)
    Column("lease_expires_at", DateTime(timezone=True), index=True),
    Column("project", String(63), nullable=False, server_default=text("'default'"), index=True),
)

# API keys (services/keys.py): only the SHA-256 of a key is stored; revoked keys are kept (audit, and so that
# "keys exist" stays true once the first one was made)
api_keys = Table(
    "api_keys", metadata,
    Column("id", String(40), primary_key=True),
    Column("name", String(100), nullable=False),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("prefix", String(16), nullable=False),
    Column("scopes", JSON, nullable=False),
    Column("project", String(63), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=True),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
)

# every mutating call (services/audit.py), newest first by id
audit_log = Table(
    "audit_log", metadata,
    Column("id", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False, index=True),
    Column("key_id", String(40), nullable=True, index=True),
    Column("key_name", String(100), nullable=True),
    Column("project", String(63), nullable=True, index=True),
    Column("method", String(10), nullable=False),
    Column("route", String(255), nullable=False),
    Column("action", String(100), nullable=False, index=True),
    Column("target_id", String(255), nullable=True),
    Column("status", Integer, nullable=False, index=True),
    Column("request_id", String(128), nullable=True),
    Column("client", String(64), nullable=True),
)

TERMINAL = ("succeeded", "failed", "cancelled")


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _as_utc(value):
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value


def _row(r) -> dict[str, Any] | None:
    if r is None:
        return None
    d = dict(r._mapping)
    for k, v in d.items():
        d[k] = _as_utc(v)
    return d


class MetadataStore:
    def __init__(self, url: str):
        self.url = url
        # model rows inserted, updated or deleted through this store (this process), counted after each commit:
        # what the data plane's memory of V2 model names is checked against (services/dataplane.py)
        self.model_writes = 0
        kw: dict[str, Any] = {"future": True}
        if url.startswith("sqlite"):
            kw["connect_args"] = {"check_same_thread": False, "timeout": 30}
        else:
            kw["pool_pre_ping"] = True
        self.engine: Engine = create_engine(url, **kw)
        if url.startswith("sqlite"):
            @event.listens_for(self.engine, "connect")
            def _pragmas(dbapi_conn, _):  # WAL: readers never block the writer
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=NORMAL")
                cur.execute("PRAGMA busy_timeout=30000")
                cur.close()

    def upgrade_schema(self) -> str:
        """Create or upgrade the schema with the Alembic migrations, under a lock (``storage/schema.py``)."""
        from .schema import upgrade

        return upgrade(self.engine)

    def ping(self) -> None:
        with self.engine.connect() as conn:
            conn.execute(select(1))

    def dispose(self) -> None:
        self.engine.dispose()

    # -- generic -----------------------------------------------------------------------
    def _insert(self, table: Table, values: dict) -> None:
        with self.engine.begin() as conn:
            conn.execute(table.insert().values(**values))

    def _get(self, table: Table, id_: str) -> dict | None:
        with self.engine.connect() as conn:
            return _row(conn.execute(select(table).where(table.c.id == id_)).first())

    def _list(self, table: Table, filters: dict, limit: int, offset: int, extra=()) -> tuple[list[dict], int]:
        conds = [getattr(table.c, k) == v for k, v in filters.items() if v is not None] + list(extra)
        with self.engine.connect() as conn:
            q = select(table).where(*conds).order_by(table.c.created_at.desc(), table.c.id)
            rows = [_row(r) for r in conn.execute(q.limit(limit).offset(offset))]
            total = conn.execute(select(func.count()).select_from(table).where(*conds)).scalar_one()
        return rows, int(total)

    def _delete(self, table: Table, id_: str) -> bool:
        with self.engine.begin() as conn:
            return conn.execute(table.delete().where(table.c.id == id_)).rowcount > 0

    # -- datasets ----------------------------------------------------------------------
    def insert_dataset(self, values: dict) -> None:
        self._insert(datasets, values)

    def get_dataset(self, id_: str) -> dict | None:
        return self._get(datasets, id_)

    def list_datasets(self, limit: int, offset: int, project: str | None = None):
        return self._list(datasets, {"project": project}, limit, offset)

    def delete_dataset(self, id_: str) -> bool:
        return self._delete(datasets, id_)

    def dataset_ids(self) -> set[str]:
        with self.engine.connect() as conn:
            return {r[0] for r in conn.execute(select(datasets.c.id))}

    # -- models ------------------------------------------------------------------------
    def insert_model(self, values: dict) -> None:
        self._insert(models, values)
        self.model_writes += 1

    def get_model(self, id_: str) -> dict | None:
        return self._get(models, id_)

    def find_models_by_name(self, name: str, project: str | None = None) -> list[dict]:
        q = select(models).where(models.c.name == name)
        if project is not None:
            q = q.where(models.c.project == project)
        with self.engine.connect() as conn:
            return [_row(r) for r in conn.execute(q)]

    def list_models(self, limit: int, offset: int, algorithm=None, status=None, project: str | None = None):
        return self._list(models, {"algorithm": algorithm, "status": status, "project": project}, limit, offset)

    def update_model(self, id_: str, **values) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(models).where(models.c.id == id_).values(**values))
        self.model_writes += 1

    def delete_model(self, id_: str) -> bool:
        try:
            return self._delete(models, id_)
        finally:
            self.model_writes += 1

    def model_ids(self) -> set[str]:
        with self.engine.connect() as conn:
            return {r[0] for r in conn.execute(select(models.c.id))}

    def model_statuses(self) -> dict[str, str]:
        with self.engine.connect() as conn:
            return {r[0]: r[1] for r in conn.execute(select(models.c.id, models.c.status))}

    # -- jobs --------------------------------------------------------------------------
    def insert_job(self, values: dict) -> None:
        self._insert(jobs, values)

    def insert_job_and_model(self, job: dict, model: dict | None) -> None:
        with self.engine.begin() as conn:
            conn.execute(jobs.insert().values(**job))
            if model is not None:
                conn.execute(models.insert().values(**model))
        if model is not None:
            self.model_writes += 1

    def get_job(self, id_: str) -> dict | None:
        return self._get(jobs, id_)

    def list_jobs(self, limit: int, offset: int, status=None, kind=None, project: str | None = None):
        # the trials of model-selection jobs are listed only when asked for (kind=trial)
        return self._list(jobs, {"status": status, "kind": kind, "project": project}, limit, offset,
                          extra=() if kind else (jobs.c.kind != "trial",))

    def count_active_jobs(self, project: str) -> int:
        """Queued and running jobs of a project (trials, the parts of a selection job, not counted)."""
        q = (select(func.count()).select_from(jobs)
             .where(jobs.c.project == project, jobs.c.status.in_(["queued", "running"]), jobs.c.kind != "trial"))
        with self.engine.connect() as conn:
            return int(conn.execute(q).scalar_one())

    def jobs_in(self, statuses: Iterable[str]) -> list[dict]:
        with self.engine.connect() as conn:
            q = select(jobs).where(jobs.c.status.in_(list(statuses))).order_by(jobs.c.created_at)
            return [_row(r) for r in conn.execute(q)]

    def count_jobs(self, status: str) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(jobs).where(jobs.c.status == status)).scalar_one())

    def job_counts(self) -> dict[tuple[str, str], int]:
        """(kind, status) -> number of jobs: one GROUP BY, read at metrics scrape time."""
        with self.engine.connect() as conn:
            q = select(jobs.c.kind, jobs.c.status, func.count()).group_by(jobs.c.kind, jobs.c.status)
            return {(k, s): int(n) for k, s, n in conn.execute(q)}

    # -- API keys and audit (services/keys.py, services/audit.py) ------------------------------
    def insert_key(self, values: dict) -> None:
        self._insert(api_keys, values)

    def all_keys(self) -> list[dict]:
        with self.engine.connect() as conn:
            return [_row(r) for r in conn.execute(select(api_keys).order_by(api_keys.c.created_at, api_keys.c.id))]

    def key_by_hash(self, key_hash: str) -> dict | None:
        with self.engine.connect() as conn:
            return _row(conn.execute(select(api_keys).where(api_keys.c.key_hash == key_hash)).first())

    def get_key(self, id_: str) -> dict | None:
        return self._get(api_keys, id_)

    def list_keys(self, limit: int, offset: int, project: str | None = None) -> tuple[list[dict], int]:
        return self._list(api_keys, {"project": project}, limit, offset)

    def revoke_key(self, id_: str, at: dt.datetime) -> bool:
        """Revoke a key; False if it does not exist (revoking a revoked key keeps its first revocation time)."""
        with self.engine.begin() as conn:
            if conn.execute(select(api_keys.c.id).where(api_keys.c.id == id_)).first() is None:
                return False
            conn.execute(update(api_keys).where(api_keys.c.id == id_, api_keys.c.revoked_at.is_(None))
                         .values(revoked_at=at))
        return True

    def any_key(self) -> bool:
        with self.engine.connect() as conn:
            return conn.execute(select(api_keys.c.id).limit(1)).first() is not None

    def insert_audit(self, values: dict) -> None:
        self._insert(audit_log, values)

    def list_audit(self, limit: int, offset: int, conds: list) -> tuple[list[dict], int]:
        with self.engine.connect() as conn:
            q = select(audit_log).where(*conds).order_by(audit_log.c.id.desc())
            rows = [_row(r) for r in conn.execute(q.limit(limit).offset(offset))]
            total = conn.execute(select(func.count()).select_from(audit_log).where(*conds)).scalar_one()
        return rows, int(total)
