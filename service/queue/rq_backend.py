"""RQ on Redis: API replicas enqueue job ids; ``orchard worker`` processes on any machine run them.

The job record in the metadata store (PostgreSQL when scaled out) stays the source of truth; RQ only carries
the job id. What RQ does for Orchard:

- ``job_timeout`` (``ORCHARD_JOB_TIMEOUT``): the work-horse raises ``JobTimeoutException`` in the fit; the
  job's ``on_failure`` callback (in the horse) fails the attempt as ``JobTimeout``. If the horse is stuck
  where the exception cannot reach it, the worker kills it 60 s later.
- the worker's ``work_horse_killed_handler``: a horse that dies (SIGKILL, OOM killer) has its attempt declared
  lost at once (``services/jobs.lose``: re-queued or failed).
- the Redis client's ``Retry`` with exponential backoff: a worker waits out a Redis outage (stopped, restarted,
  frozen) instead of exiting; API replicas use short, explicit socket timeouts.

Lost workers whose horse cannot report (the machine died, the horse was frozen) are found by the lease the
running attempt renews in the metadata store, and queued jobs Redis lost (or never got: Redis was down at
submission) by the reconciler (``services/jobs.reconcile``), through ``RQQueue.holds``.
"""

from __future__ import annotations

import logging
import os
import socket

from ..settings import Settings
from ..storage.metadata import MetadataStore, utcnow

log = logging.getLogger("orchard.queue")

HELD = ("queued", "started", "deferred", "scheduled")  # RQ statuses of a job RQ will still run


def rq_job_id(job_id: str) -> str:
    return f"orchard-{job_id}"


def run_job(job_id: str) -> str:
    """RQ entry point (imported by name in the work-horse)."""
    from rq.timeouts import JobTimeoutException

    from ..services.jobs import execute_job
    from ..services.resources import apply_worker_memory_limit

    settings = Settings()
    apply_worker_memory_limit(settings.worker_memory_bytes)  # in the work-horse: a runaway fit fails its job
    meta, art = _stores(settings)
    meta.engine.dispose(close=False)  # a fresh fork: never reuse the parent's pooled connections
    _set_fanout(settings)
    _sweep_local_copies(meta, art, settings)
    return execute_job(meta, art, job_id, settings, passthrough=(JobTimeoutException,))


def _sweep_local_copies(meta: MetadataStore, art, settings: Settings) -> None:
    """A worker runs no janitor: before each job, its local copies of datasets deleted since (artifacts on S3)
    go once not read for ``ORCHARD_JANITOR_GRACE_S``, so its data directory does not fill up with them."""
    if art.local:
        return
    from ..services.janitor import collect_local_copies

    try:
        collect_local_copies(meta, art, settings.janitor_grace_s)
    except Exception:  # noqa: BLE001 - never a reason to fail the job; the next job tries again
        log.exception("could not remove local copies of deleted datasets")


def on_rq_failure(job, connection, exc_type, exc_value, tb) -> None:
    """RQ's failure callback (in the work-horse, for an exception that escaped ``run_job``: the job timeout)."""
    from ..services import jobs as lifecycle

    job_id = job.args[0]
    attempt = lifecycle.CURRENT.get(job_id)
    settings = Settings()
    meta, _ = _stores(settings)
    record = meta.get_job(job_id)
    if attempt is None or record is None:
        return
    from rq.timeouts import JobTimeoutException

    if exc_type is not None and issubclass(exc_type, JobTimeoutException):
        lifecycle.fail(meta, record, attempt, "JobTimeout", lifecycle.timeout_message(settings))
    else:
        lifecycle.fail(meta, record, attempt, getattr(exc_type, "__name__", "Error"), f"unexpected error: {exc_value}")


def _set_fanout(settings: Settings) -> None:
    """Model-selection jobs enqueue their trials as RQ jobs of their own (one per trial), on the same queue."""
    from . import fanout

    if not fanout.has_enqueue():
        from rq import Callback, Queue

        q = Queue(settings.queue_name, connection=redis_client(settings))
        fanout.set_enqueue(lambda jid: q.enqueue(
            "service.queue.rq_backend.run_job", jid, job_id=rq_job_id(jid),
            job_timeout=int(max(1, settings.job_timeout)), result_ttl=3600, failure_ttl=86400,
            on_failure=Callback(on_rq_failure)))


_STORES: dict = {}


def _stores(settings: Settings):
    key = (settings.resolved_database_url(), str(settings.data_dir))
    if key not in _STORES:
        from ..storage.stores import open_stores

        _STORES[key] = open_stores(settings)
    return _STORES[key]


def redis_client(settings: Settings, *, wait_out_outages: bool = False):
    """A Redis client with explicit timeouts. API side: a failing command fails fast (one quick retry).
    Worker side (``wait_out_outages``): every command is retried with exponential backoff (0.5 s doubling up to
    10 s) until Redis answers again, so a worker survives an outage of any length."""
    from redis import Redis
    from redis.backoff import ExponentialBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError
    from redis.retry import Retry

    if wait_out_outages:
        retry = Retry(ExponentialBackoff(cap=10.0, base=0.5), retries=-1)
    else:
        retry = Retry(ExponentialBackoff(cap=1.0, base=0.1), retries=1)
    return Redis.from_url(settings.queue_url, socket_timeout=settings.redis_socket_timeout,
                          socket_connect_timeout=settings.redis_connect_timeout, socket_keepalive=True,
                          health_check_interval=30, retry=retry,
                          retry_on_error=[RedisConnectionError, RedisTimeoutError])


class RQQueue:
    def __init__(self, settings: Settings, meta: MetadataStore, art):
        from rq import Queue

        self.settings = settings
        self.meta = meta
        self.redis = redis_client(settings)
        self.queue = Queue(settings.queue_name, connection=self.redis)

    def start(self) -> None:
        pass

    def enqueue(self, job_id: str) -> None:
        from rq import Callback

        self.queue.enqueue("service.queue.rq_backend.run_job", job_id, job_id=rq_job_id(job_id),
                           job_timeout=int(max(1, self.settings.job_timeout)), result_ttl=3600, failure_ttl=86400,
                           on_failure=Callback(on_rq_failure))

    def holds(self, job_id: str) -> bool:
        """Whether RQ still has the job to run (queued or started); False when Redis lost it or ended it."""
        from rq.exceptions import NoSuchJobError
        from rq.job import Job

        try:
            status = Job.fetch(rq_job_id(job_id), connection=self.redis).get_status(refresh=False)
        except NoSuchJobError:
            return False
        return status is not None and str(getattr(status, "value", status)) in HELD

    def depth(self) -> int:
        return self.meta.count_jobs("queued")

    def ping(self) -> None:
        self.redis.ping()

    def shutdown(self) -> None:
        self.redis.close()


def _horse_killed(settings: Settings):
    """The worker's ``work_horse_killed_handler``: the horse died (SIGKILL, OOM killer) while running ``job``;
    its attempt (the record names the horse as its worker) is declared lost at once."""
    from ..services.jobs import lose, timeout_message

    def handler(job, retpid, ret_val, rusage) -> None:
        try:
            meta, _ = _stores(settings)
            record = meta.get_job(job.args[0])
            if (record and record["status"] == "running"
                    and record.get("worker") == f"{socket.gethostname()}:{retpid}"):
                sig = f"signal {os.WTERMSIG(ret_val)}" if ret_val and os.WIFSIGNALED(ret_val) else f"status {ret_val}"
                ran = (utcnow() - record["started_at"]).total_seconds() if record.get("started_at") else 0.0
                if ran > settings.job_timeout:  # RQ killed a horse that did not stop at its timeout
                    lose(meta, record, timeout_message(settings), settings.job_max_attempts, retry=False,
                         etype="JobTimeout")
                else:
                    lose(meta, record, f"the work-horse running this job died ({sig})", settings.job_max_attempts)
                # re-queued: the API replicas' reconciler enqueues it again (it is no longer held by RQ)
        except Exception:  # noqa: BLE001 - the lease catches up
            log.exception("could not record the lost work-horse of %s", job.id)

    return handler


def run_worker(settings: Settings, burst: bool = False) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from rq import Queue, Worker

    import core  # noqa: F401 - warm imports before the first job

    from . import worker_preload  # noqa: F401 - the same warm imports as the embedded pool's workers

    meta, _ = _stores(settings)
    meta.engine.dispose()  # no pooled connection for the work-horses to inherit
    conn = redis_client(settings, wait_out_outages=True)
    worker = Worker([Queue(settings.queue_name, connection=conn)], connection=conn,
                    work_horse_killed_handler=_horse_killed(settings))
    worker.work(burst=burst, with_scheduler=False)
