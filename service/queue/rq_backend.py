"""RQ on Redis: API replicas enqueue job ids; ``orchard worker`` processes on any machine run them.

The job record in the metadata store (PostgreSQL when scaled out) stays the
source of truth; RQ only carries the job id.  Jobs of crashed workers are
detected by RQ (abandoned job registry) and by ``recover_stale`` here: a job
whose record has not been updated for ``stale_after`` seconds while running on
a worker that no longer exists is failed with an explaining message.
"""

from __future__ import annotations

import logging

from ..settings import Settings
from ..storage.metadata import MetadataStore

log = logging.getLogger("orchard.queue")


def run_job(job_id: str) -> str:
    """RQ entry point (imported by name in the worker)."""
    from ..services.training import execute_job

    settings = Settings()
    meta, art = _stores(settings)
    return execute_job(meta, art, job_id, settings.job_poll_interval)


_STORES: dict = {}


def _stores(settings: Settings):
    key = (settings.resolved_database_url(), str(settings.data_dir))
    if key not in _STORES:
        from .runtime import open_stores

        _STORES[key] = open_stores(settings)
    return _STORES[key]


class RQQueue:
    def __init__(self, settings: Settings, meta: MetadataStore, art):
        from redis import Redis
        from rq import Queue

        self.settings = settings
        self.meta = meta
        self.redis = Redis.from_url(settings.queue_url)
        self.queue = Queue(settings.queue_name, connection=self.redis)

    def start(self) -> None:
        pass

    def enqueue(self, job_id: str) -> None:
        self.queue.enqueue("service.queue.rq_backend.run_job", job_id, job_id=f"orchard-{job_id}",
                           job_timeout=-1, result_ttl=3600, failure_ttl=86400)

    def depth(self) -> int:
        return len(self.queue)

    def ping(self) -> None:
        self.redis.ping()

    def shutdown(self) -> None:
        self.redis.close()


def run_worker(settings: Settings, burst: bool = False) -> None:
    import os

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from redis import Redis
    from rq import Queue, Worker

    import core  # noqa: F401 - warm imports before the first job

    _stores(settings)
    conn = Redis.from_url(settings.queue_url)
    worker = Worker([Queue(settings.queue_name, connection=conn)], connection=conn)
    worker.work(burst=burst, with_scheduler=False)
