"""The objects a running app holds: settings, stores, queue, model cache."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from .queue.factory import make_queue
from .services.dataplane import DataPlane
from .services.inference import ModelCache
from .settings import Settings
from .storage.artifacts import ArtifactStore
from .storage.metadata import MetadataStore
from .storage.stores import open_stores


@dataclass
class Runtime:
    settings: Settings
    meta: MetadataStore
    art: ArtifactStore
    queue: object
    cache: ModelCache
    plane: DataPlane  # inference over the cache, for /v1, /v2 and the predict front door
    guard: object = None  # security.Guard: key ring, rate limiter, audit log (set by the app's lifespan)

    @classmethod
    def open(cls, settings: Settings) -> Runtime:
        meta, art = open_stores(settings)
        queue = make_queue(settings, meta, art)
        cache = ModelCache(meta, art, settings.model_cache_bytes)
        return cls(settings, meta, art, queue, cache, DataPlane(cache, meta, settings.max_predict_rows))


def rt(request: Request) -> Runtime:
    return request.app.state.runtime
