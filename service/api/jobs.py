"""Jobs: list, get, cancel, and a server-sent event stream of progress."""

from __future__ import annotations

import asyncio

import orjson
from fastapi import APIRouter, Depends, Query, Request
from sse_starlette.sse import EventSourceResponse
from starlette.concurrency import run_in_threadpool

from ..errors import Conflict, NotFound
from ..schemas.models import Job, JobList
from ..services import jobs as lifecycle
from ..storage.metadata import TERMINAL
from .common import Page, errors
from .deps import ReadRT, TrainRT

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

_FIELDS = ("id", "kind", "status", "progress", "message", "created_at", "started_at", "finished_at", "error",
           "result", "model_id")


def job_view(job: dict) -> dict:
    return {k: job.get(k) for k in _FIELDS}


def _get(r, job_id: str) -> dict:
    job = r.meta.get_job(job_id)
    if job is None:
        raise NotFound(f"job {job_id!r} does not exist")
    return job


@router.get("", response_model=JobList, operation_id="list_jobs")
def list_jobs(r: ReadRT, page: Page = Depends(),
              status: str | None = Query(None, pattern="^(queued|running|succeeded|failed|cancelled)$"),
              kind: str | None = Query(None, max_length=40)):
    rows, total = r.meta.list_jobs(page.limit, page.offset, status=status, kind=kind)
    return {"data": [job_view(j) for j in rows], "count": total}


@router.get("/{job_id}", response_model=Job, operation_id="get_job", responses=errors(404))
def get_job(job_id: str, r: ReadRT):
    return job_view(_get(r, job_id))


@router.post("/{job_id}/cancel", status_code=202, response_model=Job, operation_id="cancel_job",
             responses=errors(404, 409))
def cancel_job(job_id: str, r: TrainRT):
    """Ask a job to stop: a queued job is cancelled at once (its model fails), a running fit at its next step."""
    meta = r.meta.store
    job = _get(r, job_id)
    if job["status"] in TERMINAL:
        raise Conflict(f"job {job_id!r} already finished ({job['status']}); nothing to cancel")
    status = lifecycle.cancel(meta, job_id)
    if status is None:
        raise NotFound(f"job {job_id!r} does not exist")
    if status in ("succeeded", "failed"):
        raise Conflict(f"job {job_id!r} already finished ({status}); nothing to cancel")
    return job_view(meta.get_job(job_id))


@router.get("/{job_id}/events", operation_id="stream_job_events", responses={
    **errors(404),
    200: {"description": "Server-sent events: `progress` and `status` events, then `end`.",
          "content": {"text/event-stream": {"schema": {"type": "string"}}}},
})
async def stream_job_events(request: Request, job_id: str, r: ReadRT,
                            interval: float = Query(0.25, ge=0.05, le=5.0)):
    """Progress and status of a job as server-sent events, until it ends."""
    meta = r.meta
    await run_in_threadpool(_get, r, job_id)

    async def events():
        last = None
        while True:
            job = await run_in_threadpool(meta.get_job, job_id)
            if job is None:
                yield {"event": "error", "data": orjson.dumps({"detail": "job deleted"}).decode()}
                return
            view = job_view(job)
            key = (view["status"], round(view["progress"], 4), view["message"])
            if key != last:
                kind = "progress" if last is not None and last[0] == view["status"] else "status"
                yield {"event": kind, "data": orjson.dumps(view, default=str).decode()}
                last = key
            if view["status"] in TERMINAL:
                yield {"event": "end", "data": orjson.dumps(view, default=str).decode()}
                return
            if await request.is_disconnected():
                return
            await asyncio.sleep(interval)

    return EventSourceResponse(events(), ping=15)
