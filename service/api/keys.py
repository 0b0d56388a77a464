"""API keys (admin): create (the key shown once), list, revoke; and the audit log."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response
from starlette.concurrency import run_in_threadpool

from ..errors import NotFound
from ..schemas.security import AuditList, KeyCreate, KeyCreated, KeyList
from ..services.keys import create_key, key_view
from ..storage.metadata import utcnow
from .body import JSONBodyRoute
from .common import Page, errors
from .deps import AdminRT

router = APIRouter(prefix="/v1", tags=["security"], route_class=JSONBodyRoute)


def _guard(r):
    return r.runtime.guard


@router.post("/keys", status_code=201, response_model=KeyCreated, operation_id="create_key",
             responses=errors(413, 422))
async def create_api_key(body: KeyCreate, response: Response, r: AdminRT):
    """Create an API key; the answer holds the key itself, which is never shown again."""
    row, token = await run_in_threadpool(create_key, r.meta.store, body.name, list(body.scopes),
                                         body.project or r.principal.project, body.expires_at)
    await run_in_threadpool(_guard(r).ring.changed_here)
    response.headers["Location"] = f"/v1/keys/{row['id']}"
    return {**key_view(row), "key": token}


@router.get("/keys", response_model=KeyList, operation_id="list_keys")
def list_api_keys(r: AdminRT, page: Page = Depends()):
    """Every key (of ``?project=`` if given), revoked ones included; never the keys themselves."""
    rows, total = r.meta.store.list_keys(page.limit, page.offset, project=r.project)
    return {"data": [key_view(k) for k in rows], "count": total}


@router.delete("/keys/{key_id}", status_code=204, operation_id="revoke_key", responses=errors(404))
def revoke_api_key(key_id: str, r: AdminRT):
    """Revoke a key: refused from the next request on, on every replica (kept in the list and the audit)."""
    if not r.meta.store.revoke_key(key_id, utcnow()):
        raise NotFound(f"API key {key_id!r} does not exist")
    _guard(r).ring.changed_here()
    return Response(status_code=204)


@router.get("/audit", response_model=AuditList, operation_id="list_audit", responses=errors(422))
def list_audit(r: AdminRT, page: Page = Depends(),
               key_id: Annotated[str | None, Query(max_length=40, description="Calls made with this key")] = None,
               action: Annotated[str | None, Query(max_length=100, description="An operation id: delete_model")] = None,
               status: Annotated[str | None, Query(pattern=r"^[1-5](\d\d|xx)$",
                                                   description="A status code (403) or class (4xx)")] = None,
               since: Annotated[dt.datetime | None, Query(description="At or after this time (RFC 3339)")] = None,
               until: Annotated[dt.datetime | None, Query(description="Before this time (RFC 3339)")] = None):
    """The audit log, newest first: who made which mutating call, on what, with which status."""
    since, until = (None if t is None else t if t.tzinfo else t.replace(tzinfo=dt.UTC) for t in (since, until))
    rows, total = _guard(r).audit.query(page.limit, page.offset, key_id=key_id, action=action, status=status,
                                        project=r.project, since=since, until=until)
    return {"data": rows, "count": total}
