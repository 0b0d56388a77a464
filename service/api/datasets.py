"""Dataset endpoints: upload (CSV or Parquet body, multipart file, JSON rows), list, get, rows, delete."""

from __future__ import annotations

import os
import shutil
import uuid

import orjson
from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from ..errors import UnsupportedMedia, invalid
from ..schemas.models import Dataset, DatasetCreateJSON, DatasetList, RowsPage
from ..services import datasets as ds
from ..services.tables import parse_json_table, parse_types_query
from ..services.widths import check_width
from .common import Page, errors
from .deps import ReadRT, TrainRT

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])

_UPLOAD_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "text/csv": {"schema": {"type": "string"}, "example": "x,y,label\n1.0,2.0,a\n"},
            "application/vnd.apache.parquet": {"schema": {"type": "string", "format": "binary"}},
            "multipart/form-data": {"schema": {
                "type": "object", "required": ["file"],
                "properties": {"file": {"type": "string", "format": "binary"}, "name": {"type": "string"}},
            }},
            "application/json": {"schema": {"$ref": "#/components/schemas/DatasetCreateJSON"}},
        },
    }
}


CSV_TYPES = ("text/csv", "application/csv")  # not text/plain: a browser form could send it cross-site
PARQUET_TYPES = ("application/vnd.apache.parquet", "application/x-parquet", "application/parquet")


def _kind(ctype: str, path: str | None = None, filename: str | None = None) -> str:
    """Parquet when the content type or file name says so or the file starts with Parquet's magic bytes."""
    if ctype in PARQUET_TYPES or (filename or "").lower().endswith((".parquet", ".pq")):
        return "parquet"
    if path is not None:
        with open(path, "rb") as fh:
            if fh.read(4) == b"PAR1":
                return "parquet"
    return "csv"


@router.post("", status_code=201, response_model=Dataset, operation_id="upload_dataset",
             openapi_extra=_UPLOAD_DOC, responses=errors(413, 415, 422))
async def upload_dataset(request: Request, response: Response, r: TrainRT,
                         name: str | None = Query(None, max_length=255, description="Dataset name"),
                         types: str | None = Query(None, description="Forced column types: col:categorical,...")):
    """Create a dataset from a CSV or Parquet body, a multipart CSV or Parquet file, or JSON columns + rows."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    forced = parse_types_query(types)
    if ctype in CSV_TYPES or ctype in PARQUET_TYPES:
        record = await ds.upload_stream(r.meta, r.art, request.stream(), r.settings.max_body_bytes,
                                        _kind(ctype), forced, name, r.settings.max_columns)
    elif ctype == "multipart/form-data":
        form = await request.form()
        try:
            part = form.get("file")
            if part is None or isinstance(part, str):
                raise invalid(["body", "file"], "the multipart body needs a 'file' part holding a CSV or Parquet file")
            name = name or (form.get("name") if isinstance(form.get("name"), str) else None) or part.filename
            part_type = (part.content_type or "").split(";")[0].strip().lower()
            tmp = os.path.join(r.art.tmp_dir, f"upload-{uuid.uuid4().hex}.data")
            try:
                with open(tmp, "wb") as fh:
                    await run_in_threadpool(shutil.copyfileobj, part.file, fh)
                kind = _kind(part_type, tmp, part.filename)
                record = await run_in_threadpool(ds.ingest_file, r.meta, r.art, tmp, kind, forced, name,
                                                 r.settings.max_columns)
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
        check_width(len(body.columns), r.settings.max_columns, ["body", "columns"])
        name = name or body.name
        merged = {**(body.types or {}), **forced}
        cols = await run_in_threadpool(parse_json_table, body.columns, body.rows, merged)
        record = await run_in_threadpool(ds.store_columns, r.meta, r.art, cols, name)
    else:
        raise UnsupportedMedia(
            f"content type {ctype or '(none)'!r} is not supported; send text/csv, application/vnd.apache.parquet, "
            "multipart/form-data with a 'file' part, or application/json"
        )
    response.headers["Location"] = f"/v1/datasets/{record['id']}"
    return record


@router.get("", response_model=DatasetList, operation_id="list_datasets")
def list_datasets(r: ReadRT, page: Page = Depends()):
    rows, total = r.meta.list_datasets(page.limit, page.offset)
    return {"data": rows, "count": total}


@router.get("/{dataset_id}", response_model=Dataset, operation_id="get_dataset", responses=errors(404))
def get_dataset(dataset_id: str, r: ReadRT):
    return ds.get_record(r.meta, dataset_id)


_EXPORT_TYPES = {"parquet": "application/vnd.apache.parquet", "csv": "text/csv; charset=utf-8"}


@router.get("/{dataset_id}/rows", response_model=RowsPage, operation_id="get_dataset_rows",
            responses={**errors(404), 200: {"content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/RowsPage"}},
                "application/vnd.apache.parquet": {"schema": {"type": "string", "format": "binary"}},
                "text/csv": {"schema": {"type": "string"}}}}})
def get_dataset_rows(request: Request, dataset_id: str, r: ReadRT, page: Page = Depends(),
                     format: str = Query("json", pattern="^(json|parquet|csv)$",
                                         description="json: a page of rows; parquet or csv: a file of every row "
                                                     "(or of limit rows from offset when limit is given)")):
    record = ds.get_record(r.meta, dataset_id)
    if format != "json":
        limit = page.limit if "limit" in request.query_params else None
        return StreamingResponse(ds.export_stream(r.art, record, format, limit, page.offset),
                                 media_type=_EXPORT_TYPES[format],
                                 headers={"Content-Disposition": f'attachment; filename="{dataset_id}.{format}"'})
    return Response(orjson.dumps(ds.rows_page(r.art, record, page.limit, page.offset)),
                    media_type="application/json")


@router.delete("/{dataset_id}", status_code=204, operation_id="delete_dataset", responses=errors(404))
def delete_dataset(dataset_id: str, r: TrainRT):
    ds.delete(r.meta, r.art, dataset_id)
    return Response(status_code=204)
