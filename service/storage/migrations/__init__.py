"""Alembic migrations of the metadata schema (``service/storage/metadata.py``), shipped inside the package.

Configured programmatically by ``service.storage.schema`` (no alembic.ini at run time). A schema change is a
new file in ``versions/`` whose ``down_revision`` is the current head; see docs/decisions/schema-migrations.md.
"""
