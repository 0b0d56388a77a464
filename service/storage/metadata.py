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

    def list_datasets(self, limit: int, offset: int):
        return self._list(datasets, {}, limit, offset)

    def delete_dataset(self, id_: str) -> bool:
        return self._delete(datasets, id_)

    def dataset_ids(self) -> set[str]:
        with self.engine.connect() as conn:
            return {r[0] for r in conn.execute(select(datasets.c.id))}

    # -- models ------------------------------------------------------------------------
    def insert_model(self, values: dict) -> None:
        self._insert(models, values)

    def get_model(self, id_: str) -> dict | None:
        return self._get(models, id_)

    def find_models_by_name(self, name: str) -> list[dict]:
        with self.engine.connect() as conn:
            return [_row(r) for r in conn.execute(select(models).where(models.c.name == name))]

    def list_models(self, limit: int, offset: int, algorithm=None, status=None):
        return self._list(models, {"algorithm": algorithm, "status": status}, limit, offset)

    def update_model(self, id_: str, **values) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(models).where(models.c.id == id_).values(**values))

    def delete_model(self, id_: str) -> bool:
        return self._delete(models, id_)

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

    def get_job(self, id_: str) -> dict | None:
        return self._get(jobs, id_)

    def list_jobs(self, limit: int, offset: int, status=None, kind=None):
        # the trials of model-selection jobs are listed only when asked for (kind=trial)
        return self._list(jobs, {"status": status, "kind": kind}, limit, offset,
                          extra=() if kind else (jobs.c.kind != "trial",))

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
