"""Opening the stores and the queue from settings (shared by the API, workers and the CLI)."""

from __future__ import annotations

from ..settings import Settings
from ..storage.artifacts import ArtifactStore
from ..storage.metadata import MetadataStore


def open_stores(settings: Settings) -> tuple[MetadataStore, ArtifactStore]:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    meta = MetadataStore(settings.resolved_database_url())
    meta.upgrade_schema()  # Alembic, under a lock: concurrent first starts are safe
    art = ArtifactStore(settings.data_dir, settings.resolved_secret())
    return meta, art


def make_queue(settings: Settings, meta: MetadataStore, art: ArtifactStore):
    if settings.queue_url:
        from .rq_backend import RQQueue

        return RQQueue(settings, meta, art)
    from .embedded import EmbeddedQueue

    return EmbeddedQueue(settings, meta, art)
