"""Dataset endpoints: upload (CSV or Parquet body, multipart file, JSON rows), list, get, rows, delete."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import StreamingResponse

from ..schemas.models import Dataset, DatasetList, RowsPage
from ..services import datasets as ds
from .common import Page, errors
from .deps import ReadRT, TrainRT, UploadDep

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


@router.post("", status_code=201, response_model=Dataset, operation_id="upload_dataset",
             openapi_extra=_UPLOAD_DOC, responses=errors(413, 415, 422))
async def upload_dataset(response: Response, r: TrainRT, body: UploadDep,
                         name: str | None = Query(None, max_length=255, description="Dataset name"),
                         types: str | None = Query(None, description="Forced column types: col:categorical,...")):
    """Create a dataset from a CSV or Parquet body, a multipart CSV or Parquet file, or JSON columns + rows."""
    record = await ds.upload(r, body, name, types)
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
        return StreamingResponse(ds.export_stream(r.meta, r.art, record, format, limit, page.offset),
                                 media_type=_EXPORT_TYPES[format],
                                 headers={"Content-Disposition": f'attachment; filename="{dataset_id}.{format}"'})
    return Response(orjson.dumps(ds.rows_page(r.meta, r.art, record, page.limit, page.offset)),
                    media_type="application/json")


@router.delete("/{dataset_id}", status_code=204, operation_id="delete_dataset", responses=errors(404))
def delete_dataset(dataset_id: str, r: TrainRT):
    ds.delete(r.meta, r.art, dataset_id)
    return Response(status_code=204)
