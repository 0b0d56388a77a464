"""Schema migrations on PostgreSQL: the migrations build exactly metadata.py's schema, and several processes
starting at once on an empty database all succeed (the upgrade runs under a PostgreSQL advisory lock)."""

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from service.storage import schema
from service.storage.metadata import MetadataStore
from tests.integration.test_scaled_out import PG_ADMIN, _require
from tests.service.test_migrations import legacy_create_all, schema_differences

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.services]

# one "replica" per process, started once: imports first, then for each round waits for that round's go file so
# that all processes open the stores of that round's fresh database at the same moment (the start-up path of
# `orchard serve` and `orchard worker`: storage.stores.open_stores)
STARTER = """
import os, sys, time
from service.storage.stores import open_stores
from service.settings import Settings
data_dir, marks, urls = sys.argv[1], sys.argv[2], sys.argv[3:]
open(f"{marks}/ready.{os.getpid()}", "w").close()
for i, url in enumerate(urls):
    while not os.path.exists(f"{marks}/go.{i}"):
        time.sleep(0.001)
    meta, art = open_stores(Settings(data_dir=f"{data_dir}/{i}", database_url=url, secret_key="s"))
    meta.ping()
    meta.dispose()
    open(f"{marks}/done.{i}.{os.getpid()}", "w").close()
"""


@pytest.fixture
def pg_admin():
    try:
        import psycopg

        admin = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
    except Exception as exc:  # noqa: BLE001
        _require("PostgreSQL on 127.0.0.1:5432", exc)
    made = []

    def new_database() -> str:
        name = f"orchard_{uuid.uuid4().hex[:12]}"
        admin.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"

    try:
        yield new_database
    finally:
        for name in made:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def test_migrations_build_exactly_the_declared_schema_on_postgresql(pg_admin):
    store = MetadataStore(pg_admin())
    assert store.upgrade_schema() == schema.head_revision()
    assert schema_differences(store.engine) == []
    store.dispose()


def test_a_postgresql_database_made_by_create_all_is_stamped(pg_admin):
    url = pg_admin()
    engine = create_engine(url)
    legacy_create_all(engine)  # the schema as first released, without alembic_version
    engine.dispose()
    store = MetadataStore(url)
    assert store.upgrade_schema() == schema.head_revision()
    assert schema_differences(store.engine) == []
    store.dispose()


def test_concurrent_first_starts_on_an_empty_postgresql_database_all_succeed(tmp_path, pg_admin):
    """Five processes open the stores of one fresh database at the same moment, three times over (the failure
    this guards against: `metadata.create_all` racing, UniqueViolation); every one starts every time, and each
    database ends at the migrations' head."""
    n, rounds = 5, 3
    urls = [pg_admin() for _ in range(rounds)]
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
    env["PYTHONPATH"] = str(ROOT)
    procs = [subprocess.Popen([sys.executable, "-c", STARTER, str(tmp_path / "data"), str(marks), *urls], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(n)]

    def wait_for(pattern: str) -> None:
        deadline = time.monotonic() + 180
        while len(list(marks.glob(pattern))) < n:
            ended = [p for p in procs if p.poll() is not None and p.returncode != 0]
            assert not ended, [(p.returncode, p.communicate()[1][-1500:]) for p in ended]
            assert time.monotonic() < deadline, f"the processes did not reach {pattern}"
            time.sleep(0.01)

    try:
        wait_for("ready.*")
        for i in range(rounds):
            (marks / f"go.{i}").touch()
            wait_for(f"done.{i}.*")
        outs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    failures = [(p.returncode, err[-1500:]) for p, (_, err) in zip(procs, outs, strict=True) if p.returncode != 0]
    assert not failures, failures
    for url in urls:
        store = MetadataStore(url)
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT count(*), min(version_num) FROM alembic_version")).one() == (
                1, schema.head_revision())
        assert schema_differences(store.engine) == []
        store.dispose()
