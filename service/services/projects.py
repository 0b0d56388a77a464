"""Projects: what one request may see and where what it creates goes.

``ProjectRuntime`` is the runtime as seen by one principal: its ``meta`` and ``cache`` answer only for records of
the visible project (``None``: every project, for admin keys that name none), as if the others did not exist
(so another project's id is a 404, never a 403, on every path: get, list, delete, predict, /v2, SSE, cancel, and
the datasets and models that train, selection, explain and importance requests refer to), and stamp what they
create with the ``home`` project. Services take it where they took the runtime; they need no change.
"""

from __future__ import annotations

from ..errors import found
from .dataplane import DataPlane


class ProjectMeta:
    """The metadata store restricted to a project. Only the methods request handlers use are here: another
    one fails loudly (AttributeError) rather than reading across projects."""

    def __init__(self, meta, project: str | None, home: str):
        self.store, self.project, self.home = meta, project, home
        self.engine = meta.engine

    def _visible(self, row: dict | None) -> dict | None:
        if row is None or self.project is None or row.get("project") == self.project:
            return row
        return None

    def ping(self) -> None:
        self.store.ping()

    def get_dataset(self, id_: str):
        return self._visible(self.store.get_dataset(id_))

    def get_model(self, id_: str):
        return self._visible(self.store.get_model(id_))

    def get_job(self, id_: str):
        return self._visible(self.store.get_job(id_))

    def list_datasets(self, limit, offset):
        return self.store.list_datasets(limit, offset, project=self.project)

    def list_models(self, limit, offset, algorithm=None, status=None):
        return self.store.list_models(limit, offset, algorithm=algorithm, status=status, project=self.project)

    def list_jobs(self, limit, offset, status=None, kind=None):
        return self.store.list_jobs(limit, offset, status=status, kind=kind, project=self.project)

    def find_models_by_name(self, name: str):
        return self.store.find_models_by_name(name, project=self.project)

    def insert_dataset(self, values: dict) -> None:
        self.store.insert_dataset({**values, "project": self.home})

    def insert_job(self, values: dict) -> None:
        self.store.insert_job({**values, "project": self.home})

    def insert_job_and_model(self, job: dict, model: dict | None) -> None:
        self.store.insert_job_and_model({**job, "project": self.home},
                                        None if model is None else {**model, "project": self.home})

    def delete_dataset(self, id_: str) -> bool:
        return self.get_dataset(id_) is not None and self.store.delete_dataset(id_)

    def delete_model(self, id_: str) -> bool:
        return self.get_model(id_) is not None and self.store.delete_model(id_)


class ProjectCache:
    """The model cache restricted to a project: a cached model of another project is not there."""

    def __init__(self, cache, meta: ProjectMeta):
        self.inner, self.meta, self.project = cache, meta, meta.project

    def peek(self, model_id: str):
        b = self.inner.peek(model_id)
        if b is None or getattr(b, "project", None) == self.project:
            return b
        return None

    def get(self, model_id: str):
        b = self.peek(model_id)
        if b is not None:
            return b
        found(self.meta.get_model(model_id), "model", model_id)
        return self.inner.get(model_id)

    async def aget(self, model_id: str):
        from starlette.concurrency import run_in_threadpool

        b = self.peek(model_id)
        return b if b is not None else await run_in_threadpool(self.get, model_id)

    def evict(self, model_id: str) -> None:
        self.inner.evict(model_id)


class ProjectRuntime:
    """The runtime (settings, stores, queue, cache) as one principal sees it."""

    def __init__(self, runtime, principal, project: str | None, home: str):
        self.runtime, self.principal, self.project, self.home = runtime, principal, project, home
        self.settings, self.art, self.queue = runtime.settings, runtime.art, runtime.queue
        self.meta = ProjectMeta(runtime.meta, project, home)
        # every project (an admin naming none): the cache itself
        self.cache = runtime.cache if project is None else ProjectCache(runtime.cache, self.meta)
        # inference over that cache (the predict front door and the routes of one project share one per key ring)
        self.plane = runtime.plane if project is None else DataPlane(self.cache, self.meta,
                                                                      runtime.settings.max_predict_rows)
