"""The metadata schema comes from the Alembic migrations (service/storage/migrations), which must describe exactly
the tables of service/storage/metadata.py; databases made before migrations existed are stamped, not re-created."""

import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from service.storage import schema
from service.storage.metadata import MetadataStore, metadata, utcnow

ROOT = Path(__file__).resolve().parents[2]


def schema_differences(engine) -> list:
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
        return compare_metadata(ctx, metadata)


def test_migrations_build_exactly_the_declared_schema_on_sqlite(tmp_path):
    store = MetadataStore(f"sqlite:///{tmp_path / 'm.db'}")
    assert store.upgrade_schema() == schema.head_revision()
    assert schema_differences(store.engine) == []
    # the head is known without Alembic's help on the next start (fast path): nothing changes
    assert store.upgrade_schema() == schema.head_revision()
    store.dispose()


def test_the_head_read_from_the_files_is_alembics():
    from alembic.script import ScriptDirectory

    assert ScriptDirectory(str(schema.MIGRATIONS)).get_heads() == [schema.head_revision()]


def test_a_changed_table_definition_is_a_difference(tmp_path):
    """The comparison can fail: a column the migrations do not create is reported."""
    from sqlalchemy import Column, MetaData, String, Table

    store = MetadataStore(f"sqlite:///{tmp_path / 'm.db'}")
    store.upgrade_schema()
    changed = MetaData()
    for t in metadata.sorted_tables:
        t.to_metadata(changed)
    Table("jobs", changed, Column("not_migrated", String(40)), extend_existing=True)
    with store.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), changed)
    assert [d[0] for d in diffs] == ["add_column"] and diffs[0][3].name == "not_migrated"
    store.dispose()


def test_a_database_made_by_create_all_is_stamped_not_recreated(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = create_engine(url)
    legacy_create_all(engine)  # how Orchard made its schema before migrations
    with engine.begin() as conn:
        conn.execute(metadata.tables["datasets"].insert().values(
            id="ds_old", name="old", n_rows=1, n_columns=1, columns=[], size_bytes=1, created_at=utcnow()))
    engine.dispose()
    store = MetadataStore(url)
    assert store.upgrade_schema() == schema.head_revision()
    assert store.get_dataset("ds_old")["name"] == "old"  # kept
    assert schema_differences(store.engine) == []
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == schema.head_revision()
    store.dispose()


def test_some_tables_but_no_version_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'partial.db'}"
    engine = create_engine(url)
    metadata.tables["datasets"].create(engine)
    engine.dispose()
    store = MetadataStore(url)
    with pytest.raises(RuntimeError, match="some of Orchard's tables"):
        store.upgrade_schema()
    store.dispose()


def test_orchard_migrate_command(tmp_path):
    env_cmd = [sys.executable, "-m", "service.cli", "migrate", "--data-dir", str(tmp_path / "d")]
    check = subprocess.run([*env_cmd, "--check"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert check.returncode == 1 and "revision none" in check.stdout, check.stdout + check.stderr
    done = subprocess.run(env_cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"schema at revision {schema.head_revision()}"
    check = subprocess.run([*env_cmd, "--check"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    tables = set(inspect(create_engine(f"sqlite:///{tmp_path / 'd' / 'orchard.db'}")).get_table_names())
    assert tables == {"alembic_version", "datasets", "models", "jobs", "api_keys", "audit_log"}


def test_migration_files_are_package_data():
    """A non-editable install (and the image) gets the migration scripts: they are in the package, and the
    template is declared as package data."""
    import tomllib

    assert (schema.MIGRATIONS / "env.py").is_file() and (schema.MIGRATIONS / "versions" / "__init__.py").is_file()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "script.py.mako" in data["service.storage.migrations"]


def legacy_create_all(engine) -> None:
    """The tables as ``metadata.create_all`` made them before migrations existed: the baseline revision's schema,
    without an ``alembic_version`` table."""
    schema.upgrade(engine, schema.BASELINE)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE alembic_version"))
