"""Job attempt tokens and leases; model insight, notes and preprocessing; dataset notes.

- ``jobs.attempt`` (the fencing token every claim increments) and ``jobs.lease_expires_at`` (the running
  attempt's lease, indexed for the reconciler): services/jobs.py.
- ``models.insight`` (feature importances, coefficients), ``models.notes`` and ``models.preprocessing`` (what
  training chose and why), ``datasets.notes`` (what ingestion did, e.g. a dropped pandas index).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("attempt", sa.Integer(), nullable=False, server_default=sa.text("0")))
        batch.add_column(sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True))
        batch.create_index("ix_jobs_lease_expires_at", ["lease_expires_at"])
    with op.batch_alter_table("models") as batch:
        batch.add_column(sa.Column("insight", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("notes", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("preprocessing", sa.JSON(), nullable=True))
    with op.batch_alter_table("datasets") as batch:
        batch.add_column(sa.Column("notes", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.drop_column("notes")
    with op.batch_alter_table("models") as batch:
        batch.drop_column("preprocessing")
        batch.drop_column("notes")
        batch.drop_column("insight")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_lease_expires_at")
        batch.drop_column("lease_expires_at")
        batch.drop_column("attempt")
