"""Opening the metadata and artifact stores from settings (shared by the API, the workers and the CLI)."""

from __future__ import annotations

from ..settings import Settings
from .artifacts import ArtifactStore
from .files import private_data_dir
from .metadata import MetadataStore


def open_stores(settings: Settings) -> tuple[MetadataStore, ArtifactStore]:
    private_data_dir(settings.data_dir)  # 0700, and this process's files 0600 (storage/files.py)
    meta = MetadataStore(settings.resolved_database_url())
    meta.upgrade_schema()  # Alembic, under a lock: concurrent first starts are safe
    return meta, open_artifacts(settings)


def open_artifacts(settings: Settings) -> ArtifactStore:
    if settings.artifacts_url:
        from .s3 import S3ArtifactStore, parse_s3_url

        parse_s3_url(settings.artifacts_url)  # a malformed URL fails the start with its message
        if not settings.secret_key:
            raise ValueError("ORCHARD_ARTIFACTS_URL is set but ORCHARD_SECRET_KEY is not: every replica and worker "
                             "must sign and verify artifacts with the same key; set ORCHARD_SECRET_KEY")
        return S3ArtifactStore(settings.data_dir, settings.resolved_secret(), settings.artifacts_url)
    return ArtifactStore(settings.data_dir, settings.resolved_secret())
