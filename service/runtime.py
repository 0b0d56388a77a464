"""The objects a running app holds: settings, stores, queue, model cache."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from .queue.runtime import make_queue, open_stores
from .services.inference import ModelCache
from .settings import Settings
from .storage.artifacts import ArtifactStore
from .storage.metadata import MetadataStore


@dataclass
class Runtime:
    settings: Settings
    meta: MetadataStore
    art: ArtifactStore
    queue: object
    cache: ModelCache
    guard: object = None  # security.Guard: key ring, rate limiter, audit log (set by the app's lifespan)

    @classmethod
    def open(cls, settings: Settings) -> Runtime:
        meta, art = open_stores(settings)
        queue = make_queue(settings, meta, art)
        return cls(settings, meta, art, queue, ModelCache(meta, art, settings.model_cache_bytes))


def rt(request: Request) -> Runtime:
    return request.app.state.runtime
