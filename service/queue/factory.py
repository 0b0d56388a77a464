"""The job queue the settings name: RQ over Redis when ``queue_url`` is set, else the embedded process pool.

The backends never import this module (they open their stores with ``storage.stores``), so the queue package
has no import cycle.
"""

from __future__ import annotations

from ..settings import Settings
from ..storage.artifacts import ArtifactStore
from ..storage.metadata import MetadataStore


def make_queue(settings: Settings, meta: MetadataStore, art: ArtifactStore):
    if settings.queue_url:
        from .rq_backend import RQQueue

        return RQQueue(settings, meta, art)
    from .embedded import EmbeddedQueue

    return EmbeddedQueue(settings, meta, art)
