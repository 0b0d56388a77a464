"""RQ on Redis: API replicas enqueue job ids; ``orchard worker`` processes on any machine run them.

The job record in the metadata store (PostgreSQL when scaled out) stays the
source of truth; RQ only carries the job id.  Lost jobs are found by ``RQQueue.sweep``,
which every API replica runs at start and then every ``ORCHARD_JOB_SWEEP_INTERVAL``
seconds: a job whose record says ``running`` while RQ has failed, stopped or forgotten
it is failed with an explaining message. RQ fails a job itself when its work-horse
crashes, and (through its started-job registry, whose cleanup the sweep runs) when the
whole worker stops heart-beating, i.e. its machine died: about 7 minutes
(RQ's worker TTL) after the last heartbeat.
"""

from __future__ import annotations

import logging
import threading

from ..settings import Settings
from ..storage.metadata import MetadataStore

log = logging.getLogger("orchard.queue")


def run_job(job_id: str) -> str:
    """RQ entry point (imported by name in the worker)."""
    from ..services.resources import apply_worker_memory_limit
    from ..services.training import execute_job

    settings = Settings()
    apply_worker_memory_limit(settings.worker_memory_bytes)  # in the work-horse: a runaway fit fails its job
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
        self._stop = threading.Event()
        self._sweeper = threading.Thread(target=self._sweep_loop, name="orchard-rq-sweeper", daemon=True)
        self._sweeper.start()

    def _sweep_loop(self) -> None:
        while True:
            try:
                self.sweep()
            except Exception:  # noqa: BLE001 - Redis or the database blinking must not stop the sweeper
                log.exception("sweeping lost jobs failed; trying again later")
            if self._stop.wait(self.settings.job_sweep_interval):
                return

    def sweep(self, now: float | None = None) -> list[str]:
        """Fail the records of running jobs that RQ has failed, stopped or lost; returns their ids.

        ``now`` (a Unix time) is the cut-off for RQ's abandoned-job detection (default: the current time).
        """
        running = self.meta.jobs_in(["running"])
        if not running:
            return []
        from rq.exceptions import NoSuchJobError
        from rq.job import Job, JobStatus
        from rq.registry import StartedJobRegistry

        # started jobs whose worker stopped heart-beating -> RQ's failed registry (status failed)
        StartedJobRegistry(queue=self.queue).cleanup(timestamp=now)
        lost = (JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED)
        failed = []
        for job in running:
            try:
                status = Job.fetch(f"orchard-{job['id']}", connection=self.redis).get_status(refresh=False)
            except NoSuchJobError:
                status = None
            if status is not None and status not in lost:
                continue
            msg = ("the worker running this job was lost (" + (f"RQ status {status.value}" if status else
                   "RQ no longer knows the job") + "); submit the job again")
            if self.meta.finish_job(job["id"], "failed", error={"type": "WorkerLost", "message": msg},
                                    message=msg, only_from=("running",)):
                if job.get("model_id"):
                    self.meta.update_model(job["model_id"], status="failed", metrics={"error": msg})
                log.warning("job %s: %s", job["id"], msg)
                failed.append(job["id"])
        return failed

    def enqueue(self, job_id: str) -> None:
        self.queue.enqueue("service.queue.rq_backend.run_job", job_id, job_id=f"orchard-{job_id}",
                           job_timeout=-1, result_ttl=3600, failure_ttl=86400)

    def depth(self) -> int:
        return len(self.queue)

    def ping(self) -> None:
        self.redis.ping()

    def shutdown(self) -> None:
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
            self._sweeper.join(timeout=5)
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
