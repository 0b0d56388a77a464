"""Jobs: list, get, cancel, and a server-sent event stream of progress."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

import orjson
from fastapi import APIRouter, Depends, Query, Request
from sse_starlette.sse import EventSourceResponse
from starlette.concurrency import run_in_threadpool

from ..schemas.models import Job, JobList
from ..services import jobs as lifecycle
from .common import Page, errors
from .deps import ReadRT, TrainRT

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

_FIELDS = ("id", "kind", "status", "progress", "message", "created_at", "started_at", "finished_at", "error",
           "result", "model_id")


def job_view(job: dict) -> dict:
    return {k: job.get(k) for k in _FIELDS}


@router.get("", response_model=JobList, operation_id="list_jobs")
def list_jobs(r: ReadRT, page: Page = Depends(),
              status: str | None = Query(None, pattern="^(queued|running|succeeded|failed|cancelled)$"),
              kind: str | None = Query(None, max_length=40)):
    rows, total = r.meta.list_jobs(page.limit, page.offset, status=status, kind=kind)
    return {"data": [job_view(j) for j in rows], "count": total}


@router.get("/{job_id}", response_model=Job, operation_id="get_job", responses=errors(404))
def get_job(job_id: str, r: ReadRT):
    return job_view(lifecycle.get_record(r.meta, job_id))


@router.post("/{job_id}/cancel", status_code=202, response_model=Job, operation_id="cancel_job",
             responses=errors(404, 409))
def cancel_job(job_id: str, r: TrainRT):
    """Ask a job to stop: a queued job is cancelled at once (its model fails), a running fit at its next step."""
    return job_view(lifecycle.request_cancel(r.meta, job_id))


@router.get("/{job_id}/events", operation_id="stream_job_events", responses={
    **errors(404),
    200: {"description": "Server-sent events: `progress` and `status` events, then `end`.",
          "content": {"text/event-stream": {"schema": {"type": "string"}}}},
})
async def stream_job_events(request: Request, job_id: str, r: ReadRT,
                            interval: float = Query(0.25, ge=0.05, le=5.0)):
    """Progress and status of a job as server-sent events, until it ends."""
    await run_in_threadpool(lifecycle.get_record, r.meta, job_id)  # 404 before the stream starts
    changes = lifecycle.watch(r.meta, job_id, interval, request.is_disconnected)
    return EventSourceResponse(_events(changes), ping=15)


async def _events(changes: AsyncGenerator[tuple[str, dict | None], None]):
    """Server-sent events of a job's changes (``lifecycle.watch``): the job's view as JSON."""
    async with aclosing(changes):
        async for event, job in changes:
            if job is None:
                yield {"event": "error", "data": orjson.dumps({"detail": "job deleted"}).decode()}
            else:
                yield {"event": event, "data": orjson.dumps(job_view(job), default=str).decode()}
