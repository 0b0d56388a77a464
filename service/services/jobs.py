"""The job lifecycle: every change of a job's state, and of its model's, happens here, each in one transaction.

    queued --claim--> running --succeed--> succeeded      (model: training -> ready, in the same transaction)
                              --fail/cancelled/lose--> failed | cancelled   (model -> failed, same transaction)
                              --lose (attempts left)--> queued               (model stays training)
    queued --cancel--> cancelled                                             (model -> failed, same transaction)

**Attempt token.** ``claim`` increments ``jobs.attempt`` and hands the new value to the process that will run
the job; every later change by that process (renewing its lease, progress, succeed, fail, cancelled) is an
update conditional on ``status = 'running' AND attempt = <token>``. Once the attempt was declared lost (lease
expired, worker killed) and the job failed or re-queued, a late finisher of that attempt matches no row: it
changes nothing (its staged artifact is discarded) and logs why.

**Lease.** The running attempt renews ``jobs.lease_expires_at`` from a thread of the process that fits (the
embedded worker, RQ's work-horse) every third of ``ORCHARD_JOB_LEASE_TIMEOUT``. ``reconcile`` (every replica,
at start and every ``ORCHARD_JOB_SWEEP_INTERVAL``) treats an expired lease as a lost worker: the job is
re-queued while it has attempts left (``ORCHARD_JOB_MAX_ATTEMPTS``), else failed. Safe to run concurrently:
every change is conditional on the attempt it read.

**Runners.** A job's kind picks its runner in ``RUNNERS``: ``runner(meta, art, job, ctx) -> Outcome``. The
runner fits and stages its artifact; it never changes the job's or model's state itself.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import importlib
import logging
import os
import socket
import threading
import time
import traceback
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import select, update
from starlette.concurrency import run_in_threadpool

from core.context import FitCancelled, FitContext
from core.params import ParamError
from core.validation import DataError

from ..errors import Conflict, Invalid, NotFound, found
from ..storage.metadata import TERMINAL, MetadataStore, jobs, models, utcnow

if TYPE_CHECKING:
    from .projects import ProjectMeta

log = logging.getLogger("orchard.jobs")

# job kind -> runner ("module:function", imported on first use, or the callable itself)
RUNNERS: dict[str, str | Callable] = {
    "train": "service.services.training:run_train",
    "importance": "service.services.importance:run_importance",
}


@dataclass
class Outcome:
    """What a runner hands back: the job's result, the columns of its model once ``ready``, and the artifact it
    staged (published, i.e. renamed into place, only if the attempt still holds the job)."""

    result: dict
    model: dict | None = None
    staged: Path | None = None


RUNNERS.update({kind: f"service.services.selection_jobs:run_{kind.replace('-', '_')}" for kind in (
    "cross-validate", "compare", "tune", "automl", "learning-curve", "feature-selection", "trial")})
CURRENT_SETTINGS: list = [None]  # the settings of the job this process runs (a parent runs its children with them)


def runner_for(kind: str) -> Callable:
    target = RUNNERS.get(kind)
    if target is None:
        raise Invalid(f"unknown job kind {kind!r}")
    if isinstance(target, str):
        module, name = target.split(":")
        target = getattr(importlib.import_module(module), name)
    return target


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _lease_end(now: dt.datetime, lease: float) -> dt.datetime:
    return now + dt.timedelta(seconds=lease)


def _product(job_id: str, model_id: str):
    """The job's model, only if this job produces it (a job may refer to a model another job trained)."""
    return (models.c.id == model_id, models.c.job_id == job_id)


def _fail_model(conn, job_id: str, model_id: str | None, msg: str) -> None:
    if model_id:
        conn.execute(update(models).where(*_product(job_id, model_id)).values(status="failed", metrics={"error": msg}))


def _current(job_id: str, attempt: int):
    return (jobs.c.id == job_id, jobs.c.status == "running", jobs.c.attempt == attempt)


def _discard(staged: Path | None) -> None:
    if staged is not None:
        staged.unlink(missing_ok=True)


def _why_stale(meta: MetadataStore, job_id: str, attempt: int) -> str:
    job = meta.get_job(job_id)
    if job is None:
        return "the job was deleted"
    return f"the job is {job['status']} at attempt {job['attempt']}"


# ------------------------------------------------------------------------------------------------
# transitions
# ------------------------------------------------------------------------------------------------
def claim(meta: MetadataStore, job_id: str, worker: str, lease: float) -> int | None:
    """queued -> running for a new attempt; returns its token, or None if the job is not queued any more."""
    now = utcnow()
    with meta.engine.begin() as conn:
        res = conn.execute(
            update(jobs).where(jobs.c.id == job_id, jobs.c.status == "queued")
            .values(status="running", attempt=jobs.c.attempt + 1, worker=worker, started_at=now, updated_at=now,
                    lease_expires_at=_lease_end(now, lease), progress=0.0, message="running")
        )
        if res.rowcount != 1:
            return None
        return int(conn.execute(select(jobs.c.attempt).where(jobs.c.id == job_id)).scalar_one())


def renew(meta: MetadataStore, job_id: str, attempt: int, lease: float, progress: float | None = None,
          message: str | None = None) -> str:
    """Extend the attempt's lease (and record progress): ``ok``, ``cancel`` (requested) or ``stale``."""
    now = utcnow()
    values: dict[str, Any] = {"lease_expires_at": _lease_end(now, lease), "updated_at": now}
    if progress is not None:
        values["progress"] = float(progress)
    if message is not None:
        values["message"] = message
    with meta.engine.begin() as conn:
        if conn.execute(update(jobs).where(*_current(job_id, attempt)).values(**values)).rowcount != 1:
            return "stale"
        cancel = conn.execute(select(jobs.c.cancel_requested).where(jobs.c.id == job_id)).scalar()
    return "cancel" if cancel else "ok"


def probe(meta: MetadataStore, job_id: str, attempt: int) -> str:
    """Read-only: ``ok``, ``cancel`` (requested) or ``stale`` (this attempt no longer holds the job)."""
    with meta.engine.connect() as conn:
        row = conn.execute(select(jobs.c.status, jobs.c.attempt, jobs.c.cancel_requested)
                           .where(jobs.c.id == job_id)).first()
    if row is None or row.status != "running" or row.attempt != attempt:
        return "stale"
    return "cancel" if row.cancel_requested else "ok"


def succeed(meta: MetadataStore, art, job: dict, attempt: int, outcome: Outcome) -> str:
    """running -> succeeded and the model -> ready, one transaction; the staged artifact is renamed into place
    while the job's row is locked by it. A cancel requested meanwhile wins (``cancelled``); a stale attempt
    changes nothing (``stale``)."""
    now = utcnow()
    with meta.engine.begin() as conn:
        res = conn.execute(
            update(jobs).where(*_current(job["id"], attempt), jobs.c.cancel_requested.is_(False))
            .values(status="succeeded", progress=1.0, result=outcome.result, message="succeeded",
                    finished_at=now, updated_at=now, lease_expires_at=None)
        )
        if res.rowcount == 1:
            if outcome.staged is not None:
                art.publish_bundle(outcome.staged, job["model_id"])  # an error rolls the job back
            if job.get("model_id"):
                conn.execute(update(models).where(*_product(job["id"], job["model_id"]))
                             .values(status="ready", **(outcome.model or {})))
            return "succeeded"
    _discard(outcome.staged)
    if cancelled(meta, job, attempt):
        return "cancelled"
    log.warning("job %s: attempt %d finished but %s; its result is discarded", job["id"], attempt,
                _why_stale(meta, job["id"], attempt))
    return "stale"


def cancelled(meta: MetadataStore, job: dict, attempt: int) -> bool:
    """running -> cancelled (the attempt saw the request) and the model -> failed, one transaction."""
    now = utcnow()
    with meta.engine.begin() as conn:
        res = conn.execute(update(jobs).where(*_current(job["id"], attempt), jobs.c.cancel_requested.is_(True))
                           .values(status="cancelled", message="cancelled while running", finished_at=now,
                                   updated_at=now, lease_expires_at=None))
        if res.rowcount != 1:
            return False
        _fail_model(conn, job["id"], job.get("model_id"), "training was cancelled")
    return True


def fail(meta: MetadataStore, job: dict, attempt: int, etype: str, msg: str) -> bool:
    """running -> failed (the attempt's own error) and the model -> failed, one transaction."""
    now = utcnow()
    with meta.engine.begin() as conn:
        res = conn.execute(update(jobs).where(*_current(job["id"], attempt))
                           .values(status="failed", error={"type": etype, "message": msg}, message=msg,
                                   finished_at=now, updated_at=now, lease_expires_at=None))
        if res.rowcount != 1:
            log.warning("job %s: attempt %d failed (%s) but %s; nothing changed", job["id"], attempt, msg,
                        _why_stale(meta, job["id"], attempt))
            return False
        _fail_model(conn, job["id"], job.get("model_id"), msg)
    return True


def lose(meta: MetadataStore, job: dict, reason: str, max_attempts: int, *, retry: bool = True,
         etype: str = "WorkerLost") -> str | None:
    """The one way a running attempt is declared lost (its worker died, froze, or ran out of time).

    ``job`` is the row as read, so the change applies only to the attempt it names. With attempts left (and
    ``retry``) the job goes back to ``queued`` (the caller enqueues it); otherwise it and its model fail.
    Returns ``requeued``, ``failed`` or None when the attempt had already ended (someone else decided first).
    """
    attempt = int(job.get("attempt") or 0)
    now = utcnow()
    again = retry and attempt < max_attempts
    with meta.engine.begin() as conn:
        if again:
            msg = f"requeued (attempt {attempt} of {max_attempts} lost: {reason})"
            res = conn.execute(update(jobs).where(*_current(job["id"], attempt))
                               .values(status="queued", worker=None, started_at=None, lease_expires_at=None,
                                       progress=0.0, message=msg, updated_at=now))
        else:
            tries = f" (attempt {attempt} of {max_attempts})" if max_attempts > 1 and retry else ""
            msg = f"{reason}{tries}; submit the job again"
            res = conn.execute(update(jobs).where(*_current(job["id"], attempt))
                               .values(status="failed", error={"type": etype, "message": msg}, message=msg,
                                       finished_at=now, updated_at=now, lease_expires_at=None))
            if res.rowcount == 1:
                _fail_model(conn, job["id"], job.get("model_id"), msg)
    if res.rowcount != 1:
        return None
    log.warning("job %s: %s", job["id"], msg)
    return "requeued" if again else "failed"


def cancel(meta: MetadataStore, job_id: str) -> str | None:
    """A user's cancel: a queued job is cancelled at once and its model failed (deletable), one transaction; a
    running job is asked to stop (its attempt sees the request within ORCHARD_JOB_POLL_INTERVAL). Returns the
    job's status afterwards, None if it does not exist."""
    now = utcnow()
    with meta.engine.begin() as conn:
        model_id = conn.execute(select(jobs.c.model_id).where(jobs.c.id == job_id)).scalar()
        res = conn.execute(update(jobs).where(jobs.c.id == job_id, jobs.c.status == "queued")
                           .values(status="cancelled", cancel_requested=True, finished_at=now, updated_at=now,
                                   message="cancelled before it started"))
        if res.rowcount == 1:
            _fail_model(conn, job_id, model_id, "training was cancelled before it started")
            return "cancelled"
        conn.execute(update(jobs).where(jobs.c.id == job_id, jobs.c.status == "running")
                     .values(cancel_requested=True, updated_at=now, message="cancellation requested"))
        return conn.execute(select(jobs.c.status).where(jobs.c.id == job_id)).scalar()


# ------------------------------------------------------------------------------------------------
# what the API asks of one job (``meta``: the project's view of the store, services/projects.py)
# ------------------------------------------------------------------------------------------------
def get_record(meta: ProjectMeta, job_id: str) -> dict:
    """The job's record; 404 when it does not exist (or belongs to another project)."""
    return found(meta.get_job(job_id), "job", job_id)


def request_cancel(meta: ProjectMeta, job_id: str) -> dict:
    """A user's cancel (``cancel``) of a job of the project; 409 when the job finished, before or while asked.
    Returns the job's record afterwards."""
    job = get_record(meta, job_id)
    if job["status"] in TERMINAL:
        raise Conflict(f"job {job_id!r} already finished ({job['status']}); nothing to cancel")
    status = cancel(meta.store, job_id)
    if status is None:
        raise NotFound(f"job {job_id!r} does not exist")
    if status in ("succeeded", "failed"):
        raise Conflict(f"job {job_id!r} already finished ({status}); nothing to cancel")
    return meta.store.get_job(job_id)


async def watch(meta: ProjectMeta, job_id: str, interval: float,
                disconnected: Callable[[], Awaitable[bool]]) -> AsyncGenerator[tuple[str, dict | None], None]:
    """A job's changes until it ends, read every ``interval`` seconds: ``("status", record)`` when its status
    changes (and first), ``("progress", record)`` when its progress or message does, ``("end", record)`` when it
    has ended; ``("deleted", None)`` if it disappears. Stops when ``disconnected()`` says the client went away."""
    last = None
    while True:
        job = await run_in_threadpool(meta.get_job, job_id)
        if job is None:
            yield "deleted", None
            return
        key = (job.get("status"), round(job.get("progress"), 4), job.get("message"))
        if key != last:
            yield "progress" if last is not None and last[0] == key[0] else "status", job
            last = key
        if key[0] in TERMINAL:
            yield "end", job
            return
        if await disconnected():
            return
        await asyncio.sleep(interval)


# ------------------------------------------------------------------------------------------------
# running one attempt (in the process that fits)
# ------------------------------------------------------------------------------------------------
CURRENT: dict[str, int] = {}  # job id -> the attempt this process runs (RQ's failure callback reads it)


def timeout_message(settings) -> str:
    return f"the job ran longer than ORCHARD_JOB_TIMEOUT ({settings.job_timeout:g} s)"


def execute_job(meta: MetadataStore, art, job_id: str, settings, passthrough: tuple = ()) -> str:
    """Claim a queued job and run it to a terminal state; returns the final status (``stale`` when this
    attempt lost the job meanwhile). Exceptions in ``passthrough`` (RQ's job timeout) propagate unhandled."""
    lease = settings.job_lease_timeout
    CURRENT_SETTINGS[0] = settings
    attempt = claim(meta, job_id, worker_name(), lease)
    if attempt is None:
        job = meta.get_job(job_id)
        return job["status"] if job else "missing"
    job = meta.get_job(job_id)
    t0 = time.monotonic()
    state = {"cancel": False, "stale": False}

    def note(answer: str) -> None:
        if answer == "stale":
            state["stale"] = True
        elif answer == "cancel":
            state["cancel"] = True

    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(lease / 3):
            try:
                note(renew(meta, job_id, attempt, lease))
            except Exception:  # noqa: BLE001 - the store blinking: the lease may run out, the attempt then is stale
                log.warning("job %s: could not renew the lease", job_id, exc_info=True)

    def on_progress(frac: float, metrics: dict) -> None:
        msg = "running " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                     for k, v in metrics.items()) if metrics else None
        note(renew(meta, job_id, attempt, lease, frac, msg))

    def is_cancelled() -> bool:
        if not (state["cancel"] or state["stale"]):
            note(probe(meta, job_id, attempt))
        return state["cancel"] or state["stale"]

    ctx = FitContext(on_progress=on_progress, is_cancelled=is_cancelled, min_interval=0.25,
                     cancel_interval=settings.job_poll_interval)
    beat = threading.Thread(target=heartbeat, daemon=True, name=f"orchard-lease-{job_id}")
    beat.start()
    CURRENT[job_id] = attempt
    keep = False
    try:
        outcome = runner_for(job["kind"])(meta, art, job, ctx)
        if not isinstance(outcome, Outcome):  # a runner with a result and no model of its own
            outcome = Outcome(outcome)
        notes = (job.get("payload") or {}).get("notes")
        if notes and isinstance(outcome.result, dict) and "notes" not in outcome.result:
            outcome.result = {**outcome.result, "notes": notes}  # what submit decided (e.g. columns left out)
        return succeed(meta, art, job, attempt, outcome)
    except passthrough:
        keep = True  # RQ's failure callback, in this process, ends the attempt
        raise
    except FitCancelled:
        if not state["stale"] and cancelled(meta, job, attempt):
            return "cancelled"
        log.warning("job %s: attempt %d stopped: %s", job_id, attempt, _why_stale(meta, job_id, attempt))
        return "stale"
    except MemoryError:  # past the worker's address-space cap (ORCHARD_WORKER_MEMORY_BYTES): this job only
        from .resources import memory_error_message

        msg = memory_error_message()
        log.warning("job %s failed: %s", job_id, msg)
        return "failed" if fail(meta, job, attempt, "MemoryLimitExceeded", msg) else "stale"
    except (DataError, ParamError, Invalid, NotFound, ValueError) as exc:
        msg = getattr(exc, "detail", None) or str(exc)
        log.info("job %s failed: %s", job_id, msg)
        return "failed" if fail(meta, job, attempt, type(exc).__name__, msg) else "stale"
    except Exception as exc:  # noqa: BLE001 - a job must always end in a terminal state
        if time.monotonic() - t0 >= settings.job_timeout:  # RQ's timeout signal, turned into another error
            log.info("job %s timed out (%s)", job_id, exc)
            return "failed" if fail(meta, job, attempt, "JobTimeout", timeout_message(settings)) else "stale"
        log.error("job %s crashed:\n%s", job_id, traceback.format_exc())
        return "failed" if fail(meta, job, attempt, type(exc).__name__, f"unexpected error: {exc}") else "stale"
    finally:
        stop.set()
        if not keep:
            CURRENT.pop(job_id, None)


# ------------------------------------------------------------------------------------------------
# reconciliation (API replicas)
# ------------------------------------------------------------------------------------------------
def reconcile(meta: MetadataStore, settings, enqueue: Callable[[str], None],
              held: Callable[[str], bool] | None = None, now: dt.datetime | None = None) -> dict[str, list[str]]:
    """Nothing stays queued or running forever. Running jobs past ``ORCHARD_JOB_TIMEOUT`` are failed; running
    jobs whose lease expired are re-queued (attempts left) or failed; queued jobs the queue backend does not
    hold (``held``; e.g. Redis lost them or was down at submission) are enqueued again. Safe to run in
    several replicas at once."""
    now = now or utcnow()
    out: dict[str, list[str]] = {"requeued": [], "failed": [], "enqueued": []}
    for job in meta.jobs_in(["running"]):
        started, lease = job.get("started_at"), job.get("lease_expires_at")
        if lease is None:  # a row written without a lease (before leases existed): its last sign of life
            seen = job.get("updated_at") or started or job["created_at"]
            lease = seen + dt.timedelta(seconds=settings.job_lease_timeout)
        if started is not None and now > started + dt.timedelta(seconds=settings.job_timeout):
            action = lose(meta, job, timeout_message(settings), settings.job_max_attempts, retry=False,
                          etype="JobTimeout")
        elif lease < now:
            action = lose(meta, job, "the worker running this job stopped renewing its lease (killed, frozen, "
                          "or its machine is gone)", settings.job_max_attempts)
        else:
            continue
        if action:
            out[action].append(job["id"])
        if action == "requeued":
            _try_enqueue(enqueue, job["id"])
    grace = dt.timedelta(seconds=settings.job_sweep_interval)
    for job in meta.jobs_in(["queued"]):
        if job["id"] in out["requeued"] or (job.get("updated_at") or job["created_at"]) > now - grace:
            continue  # just submitted or re-queued: its enqueue may be on its way
        try:
            if held is not None and held(job["id"]):
                continue
        except Exception as exc:  # noqa: BLE001 - the backend is down: try again at the next sweep
            log.warning("could not ask the queue which jobs it holds (%s); trying again later", exc)
            break
        if _try_enqueue(enqueue, job["id"]):
            out["enqueued"].append(job["id"])
    return out


def _try_enqueue(enqueue, job_id: str) -> bool:
    try:
        enqueue(job_id)
        return True
    except Exception as exc:  # noqa: BLE001 - the backend is down: the job stays queued, the next sweep retries
        log.warning("job %s: could not enqueue it (%s); it stays queued and is enqueued when the queue is back",
                    job_id, exc)
        return False


class Reconciler:
    """Runs ``reconcile`` at start and every ``ORCHARD_JOB_SWEEP_INTERVAL`` seconds on a daemon thread."""

    def __init__(self, meta: MetadataStore, settings, queue):
        self.meta, self.settings, self.queue = meta, settings, queue
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="orchard-reconciler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def run_once(self) -> dict[str, list[str]]:
        return reconcile(self.meta, self.settings, self.queue.enqueue, self.queue.holds)

    def _loop(self) -> None:
        while True:
            try:
                self.run_once()
            except Exception:  # noqa: BLE001 - the database blinking must not stop the reconciler
                log.exception("reconciling jobs failed; trying again later")
            if self._stop.wait(self.settings.job_sweep_interval):
                return

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
