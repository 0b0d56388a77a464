"""API keys, projects and the audit log (docs/security.md).

- ``project`` on datasets, models and jobs (every existing row belongs to ``default``);
- ``api_keys``: only the SHA-256 of each key, its scopes, project, expiry and revocation;
- ``audit_log``: one row per mutating call.

Revision ID: 0003_auth
Revises: 0002
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_auth"
down_revision = "0002"
branch_labels = None
depends_on = None

_TABLES = ("datasets", "models", "jobs")


def upgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("project", sa.String(63), nullable=False, server_default=sa.text("'default'")))
            batch.create_index(f"ix_{table}_project", ["project"])
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("scopes", sa.JSON(), nullable=False),
        sa.Column("project", sa.String(63), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("key_id", sa.String(40), nullable=True),
        sa.Column("key_name", sa.String(100), nullable=True),
        sa.Column("project", sa.String(63), nullable=True),
        sa.Column("method", sa.String(10), nullable=False),
        sa.Column("route", sa.String(255), nullable=False),
        sa.Column("action", sa.String(100), nullable=False),
        sa.Column("target_id", sa.String(255), nullable=True),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("client", sa.String(64), nullable=True),
    )
    for col in ("at", "key_id", "project", "action", "status"):
        op.create_index(f"ix_audit_log_{col}", "audit_log", [col])


def downgrade() -> None:
    op.drop_table("audit_log")
    op.drop_table("api_keys")
    for table in reversed(_TABLES):
        with op.batch_alter_table(table) as batch:
            batch.drop_index(f"ix_{table}_project")
            batch.drop_column("project")
