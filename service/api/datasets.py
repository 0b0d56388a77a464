"""Dataset endpoints: upload (CSV body, multipart CSV, JSON rows), list, get, rows, delete."""

from __future__ import annotations

import os
import shutil
import uuid

import orjson
from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from ..errors import TooLarge, UnsupportedMedia, invalid
from ..runtime import rt
from ..schemas.models import Dataset, DatasetCreateJSON, DatasetList, RowsPage
from ..services import datasets as ds
from ..services.tables import parse_csv_file, parse_json_table, parse_types_query
from .common import Page, errors

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])

_UPLOAD_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "text/csv": {"schema": {"type": "string"}, "example": "x,y,label\n1.0,2.0,a\n"},
            "multipart/form-data": {"schema": {
                "type": "object", "required": ["file"],
                "properties": {"file": {"type": "string", "format": "binary"}, "name": {"type": "string"}},
            }},
            "application/json": {"schema": {"$ref": "#/components/schemas/DatasetCreateJSON"}},
        },
    }
}


async def _stream_to_file(request: Request, path: str, limit: int) -> int:
    total = 0
    with open(path, "wb") as fh:
        async for chunk in request.stream():
            total += len(chunk)
            if total > limit:
                raise TooLarge(f"the body exceeds the limit of {limit} bytes (ORCHARD_MAX_BODY_BYTES)")
            fh.write(chunk)
    return total


@router.post("", status_code=201, response_model=Dataset, operation_id="upload_dataset",
             openapi_extra=_UPLOAD_DOC, responses=errors(413, 415, 422))
async def upload_dataset(request: Request, response: Response,
                         name: str | None = Query(None, max_length=255, description="Dataset name"),
                         types: str | None = Query(None, description="Forced column types: col:categorical,...")):
    """Create a dataset from a CSV body, a multipart CSV file, or JSON columns + rows."""
    r = rt(request)
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    forced = parse_types_query(types)
    if ctype in ("text/csv", "application/csv", "text/plain"):
        tmp = os.path.join(r.art.tmp_dir, f"upload-{uuid.uuid4().hex}.csv")
        try:
            await _stream_to_file(request, tmp, r.settings.max_body_bytes)
            cols = await run_in_threadpool(parse_csv_file, tmp, forced)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    elif ctype == "multipart/form-data":
        form = await request.form()
        try:
            part = form.get("file")
            if part is None or isinstance(part, str):
                raise invalid(["body", "file"], "the multipart body needs a 'file' part holding the CSV")
            name = name or (form.get("name") if isinstance(form.get("name"), str) else None) or part.filename
            tmp = os.path.join(r.art.tmp_dir, f"upload-{uuid.uuid4().hex}.csv")
            try:
                with open(tmp, "wb") as fh:
                    await run_in_threadpool(shutil.copyfileobj, part.file, fh)
                cols = await run_in_threadpool(parse_csv_file, tmp, forced)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        finally:
            await form.close()
    elif ctype == "application/json":
        raw = await request.body()
        try:
            body = DatasetCreateJSON.model_validate_json(raw)
        except ValidationError as exc:
            e = exc.errors()[0]
            loc = ["body", *e["loc"]]
            msg = "unknown field" if e["type"] == "extra_forbidden" else e["msg"]
            raise invalid(loc, msg) from None
        name = name or body.name
        merged = {**(body.types or {}), **forced}
        cols = await run_in_threadpool(parse_json_table, body.columns, body.rows, merged)
    else:
        raise UnsupportedMedia(
            f"content type {ctype or '(none)'!r} is not supported; send text/csv, multipart/form-data "
            "with a 'file' part, or application/json"
        )
    record = await run_in_threadpool(ds.store_columns, r.meta, r.art, cols, name)
    response.headers["Location"] = f"/v1/datasets/{record['id']}"
    return record


@router.get("", response_model=DatasetList, operation_id="list_datasets")
def list_datasets(request: Request, page: Page = Depends()):
    rows, total = rt(request).meta.list_datasets(page.limit, page.offset)
    return {"data": rows, "count": total}


@router.get("/{dataset_id}", response_model=Dataset, operation_id="get_dataset", responses=errors(404))
def get_dataset(request: Request, dataset_id: str):
    return ds.get_record(rt(request).meta, dataset_id)


@router.get("/{dataset_id}/rows", response_model=RowsPage, operation_id="get_dataset_rows",
            responses=errors(404))
def get_dataset_rows(request: Request, dataset_id: str, page: Page = Depends()):
    r = rt(request)
    record = ds.get_record(r.meta, dataset_id)
    return Response(orjson.dumps(ds.rows_page(r.art, record, page.limit, page.offset)),
                    media_type="application/json")


@router.delete("/{dataset_id}", status_code=204, operation_id="delete_dataset", responses=errors(404))
def delete_dataset(request: Request, dataset_id: str):
    r = rt(request)
    ds.delete(r.meta, r.art, dataset_id)
    return Response(status_code=204)
