"""Datasets: create (CSV or Parquet body, multipart file, JSON rows), list, read rows, delete, load columns for
training."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, Protocol

import numpy as np
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from ..errors import ArtifactIntegrityError, NotFound, UnsupportedMedia, found, invalid
from ..schemas.models import DatasetCreateJSON
from ..storage.artifacts import ArtifactError, ArtifactStore
from ..storage.metadata import MetadataStore, utcnow
from .inference import INLINE_BODY_BYTES, run_sized
from .json_pieces import release, validate_in_pieces
from .tables import Column, parse_json_table, parse_types_query
from .widths import check_width

if TYPE_CHECKING:
    from .projects import ProjectRuntime


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


def store_columns(meta: MetadataStore, art: ArtifactStore, columns: list[Column], name: str | None) -> dict:
    """Write columns to the artifact store, then the metadata row (the record appears only when complete)."""
    dataset_id = new_id("ds")
    size = art.write_dataset(dataset_id, {f"c{j}": c.values for j, c in enumerate(columns)}, _schema(columns))
    return _insert(meta, art, _record(dataset_id, columns, name, size))


def ingest_upload(meta: MetadataStore, art: ArtifactStore, spool, kind: str, forced: dict, name: str | None,
                  max_columns: int | None = None) -> dict:
    """Parse a CSV or Parquet body (``spool``, possibly still arriving) straight into a new dataset's column
    files, publish them, then insert the metadata row."""
    from . import ingest

    dataset_id = new_id("ds")
    staging = art.dataset_staging(dataset_id)
    try:
        parse = ingest.ingest_parquet if kind == "parquet" else ingest.ingest_csv
        columns = parse(spool, staging, forced, max_columns=max_columns)
        record = _record(dataset_id, columns, name, 0)
        record["size_bytes"] = int(art.publish_dataset(dataset_id, staging, _schema(columns)))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return _insert(meta, art, record)


def ingest_file(meta: MetadataStore, art: ArtifactStore, path: str, kind: str, forced: dict,
                name: str | None, max_columns: int | None = None) -> dict:
    from .ingest import spool_file

    return ingest_upload(meta, art, spool_file(path), kind, forced, name, max_columns)


async def upload_stream(meta: MetadataStore, art: ArtifactStore, chunks: AsyncIterator[bytes],
                        kind: str, forced: dict, name: str | None, max_columns: int | None = None) -> dict:
    """Spool a request body to a temporary file while a worker thread parses it into the dataset's files (the
    parser follows the spool as it grows): the body is never held in memory, and parsing overlaps its arrival."""
    from .ingest import BodySpool

    spool = BodySpool(art.tmp_dir / f"upload-{uuid.uuid4().hex}.data")
    task = asyncio.ensure_future(run_in_threadpool(ingest_upload, meta, art, spool, kind, forced, name,
                                                   max_columns))
    try:
        try:
            async for chunk in chunks:  # the size limit is counted by the API layer (api/body.BodyLimit)
                spool.write(chunk)
                if task.done():  # the parser stopped early (a bad header, a malformed row): the rest is not needed
                    break
            spool.finish()
        except BaseException as exc:
            spool.fail(exc)
            with contextlib.suppress(BaseException):
                await task
            raise
        return await task
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(spool.path)


CSV_TYPES = ("text/csv", "application/csv")  # not text/plain: a browser form could send it cross-site
PARQUET_TYPES = ("application/vnd.apache.parquet", "application/x-parquet", "application/parquet")


def file_kind(ctype: str, path: str | None = None, filename: str | None = None) -> str:
    """Parquet when the content type or file name says so or the file starts with Parquet's magic bytes."""
    if ctype in PARQUET_TYPES or (filename or "").lower().endswith((".parquet", ".pq")):
        return "parquet"
    if path is not None:
        with open(path, "rb") as fh:
            if fh.read(4) == b"PAR1":
                return "parquet"
    return "csv"


@dataclass(frozen=True)
class FilePart:
    """An uploaded file: ``file`` reads its bytes; its name and media type (as ``UploadBody.media_type``) as the
    client declared them."""

    file: BinaryIO
    filename: str | None
    media_type: str


@dataclass(frozen=True)
class FormFile:
    """The fields of a multipart upload: its ``file`` part (None when it has none) and its ``name`` field."""

    file: FilePart | None
    name: str | None


class UploadBody(Protocol):
    """The body of a dataset upload as the API layer hands it over (api/body.py ``DatasetUpload``): its media
    type (lower case, no parameters; "" when none was sent), and the body, read only when one of these is called.
    The size limit (ORCHARD_MAX_BODY_BYTES) is the API layer's."""

    media_type: str

    def chunks(self) -> AsyncIterator[bytes]:
        """The body, chunk by chunk as it arrives."""
        ...

    async def read(self) -> bytes:
        """The whole body."""
        ...

    def form(self) -> AbstractAsyncContextManager[FormFile]:
        """The body parsed as a multipart form (its files closed on exit)."""
        ...


async def upload(r: ProjectRuntime, body: UploadBody, name: str | None, types: str | None) -> dict:
    """``POST /v1/datasets``: a new dataset from a CSV or Parquet body, a multipart file, or JSON columns + rows,
    chosen by the body's content type (415 for any other); ``types`` forces column types."""
    ctype = body.media_type
    forced = parse_types_query(types)
    if ctype in CSV_TYPES or ctype in PARQUET_TYPES:
        return await upload_stream(r.meta, r.art, body.chunks(), file_kind(ctype),
                                   forced, name, r.settings.max_columns)
    if ctype == "multipart/form-data":
        return await _upload_multipart(r, body, forced, name)
    if ctype == "application/json":
        return await _upload_json(r, await body.read(), forced, name)
    raise UnsupportedMedia(
        f"content type {ctype or '(none)'!r} is not supported; send text/csv, application/vnd.apache.parquet, "
        "multipart/form-data with a 'file' part, or application/json"
    )


async def _upload_multipart(r: ProjectRuntime, body: UploadBody, forced: dict, name: str | None) -> dict:
    """The form's ``file`` part (CSV or Parquet, by its type, name or magic bytes), copied to a temporary file
    and ingested; the dataset is named by the query, else the form's ``name``, else the file name."""
    async with body.form() as form:
        part = form.file
        if part is None:
            raise invalid(["body", "file"], "the multipart body needs a 'file' part holding a CSV or Parquet file")
        name = name or form.name or part.filename
        tmp = os.path.join(r.art.tmp_dir, f"upload-{uuid.uuid4().hex}.data")
        try:
            with open(tmp, "wb") as fh:
                await run_in_threadpool(shutil.copyfileobj, part.file, fh)
            kind = file_kind(part.media_type, tmp, part.filename)
            return await run_in_threadpool(ingest_file, r.meta, r.art, tmp, kind, forced, name,
                                           r.settings.max_columns)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


async def _upload_json(r: ProjectRuntime, raw: bytes, forced: dict, name: str | None) -> dict:
    """A ``DatasetCreateJSON`` body (columns, rows, optional name and types; ``forced`` wins over its types),
    validated inline when small, else on a worker thread a piece at a time (json_pieces.py)."""
    body = await run_sized(len(raw), _json_body, raw)
    try:
        check_width(len(body.columns), r.settings.max_columns, ["body", "columns"])
        cols = await run_in_threadpool(parse_json_table, body.columns, body.rows, {**(body.types or {}), **forced})
        return await run_in_threadpool(store_columns, r.meta, r.art, cols, name or body.name)
    finally:
        if len(raw) > INLINE_BODY_BYTES:  # its rows freed on a worker thread, a slice at a time
            await run_in_threadpool(release, body)


def _json_body(raw: bytes) -> DatasetCreateJSON:
    if len(raw) > INLINE_BODY_BYTES:
        body = validate_in_pieces(raw, DatasetCreateJSON.model_validate)
        if body is not None:
            return body
    try:
        return DatasetCreateJSON.model_validate_json(raw)
    except ValidationError as exc:
        e = exc.errors()[0]
        msg = "unknown field" if e["type"] == "extra_forbidden" else e["msg"]
        raise invalid(["body", *e["loc"]], msg) from None


def _schema(columns: list[Column]) -> dict:
    return {"columns": [{"name": c.name, "type": c.type, "categories": c.categories,
                         **({"labels": c.labels} if c.labels else {})} for c in columns]}


def _record(dataset_id: str, columns: list[Column], name: str | None, size: int) -> dict:
    return {
        "id": dataset_id,
        "name": name or dataset_id,
        "n_rows": int(len(columns[0].values)),
        "n_columns": len(columns),
        "columns": [c.schema() for c in columns],
        "size_bytes": int(size),
        "created_at": utcnow(),
        "notes": list(getattr(columns, "notes", []) or []),
    }


def _insert(meta: MetadataStore, art: ArtifactStore, record: dict) -> dict:
    try:
        meta.insert_dataset(record)
    except BaseException:
        art.delete_dataset(record["id"])
        raise
    return record


def get_record(meta: MetadataStore, dataset_id: str) -> dict:
    """The dataset's record; 404 when it does not exist (or belongs to another project)."""
    return found(meta.get_dataset(dataset_id), "dataset", dataset_id)


def load_columns(art: ArtifactStore, dataset_id: str, names: Sequence[str] | None = None,
                 mmap: bool = True) -> list[Column]:
    schema = art.read_dataset_schema(dataset_id)
    out = []
    for j, c in enumerate(schema["columns"]):
        if names is not None and c["name"] not in names:
            continue
        out.append(Column(c["name"], c["type"], art.read_dataset_array(dataset_id, f"c{j}", mmap=mmap),
                          c.get("categories") or [], c.get("labels")))
    return out


def read_columns(meta: MetadataStore, art: ArtifactStore, dataset_id: str, names: Sequence[str] | None = None,
                 mmap: bool = True) -> list[Column]:
    """``load_columns`` of a dataset whose record the caller has found: when its files are missing, 404 if the
    dataset was deleted since (its record first, then its files), else ``ArtifactIntegrityError`` (files lost
    under an existing record). Never a bare ``ArtifactError`` (a 500 of no explanation)."""
    try:
        return load_columns(art, dataset_id, names, mmap)
    except ArtifactError as exc:
        if meta.get_dataset(dataset_id) is None:  # deleted while this request was on its way
            raise NotFound(f"dataset {dataset_id!r} does not exist") from None
        raise ArtifactIntegrityError(str(exc)) from None


EXPORT_ROWS = 1 << 16  # rows per Parquet row group / CSV write when a dataset is exported


class _Chunks:
    """A write-only file whose bytes are taken out after each write (the export streams them)."""

    def __init__(self):
        self.parts: list[bytes] = []
        self.closed = False

    def write(self, b) -> int:
        self.parts.append(bytes(b))
        return len(b)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        out, self.parts = b"".join(self.parts), []
        return out


def export_stream(meta: MetadataStore, art: ArtifactStore, record: dict, fmt: str, limit: int | None,
                  offset: int) -> Iterator[bytes]:
    """The dataset (or the rows ``offset:offset+limit``) as Parquet or CSV, in pieces of ``EXPORT_ROWS`` rows
    (one Parquet row group each): memory stays bounded whatever the dataset's size. The columns are opened
    (memory-mapped) here, before the response starts, so that a dataset deleted meanwhile is a 404, not a
    response cut short."""
    return _export_pieces(read_columns(meta, art, record["id"]), record, fmt, limit, offset)


def _export_pieces(cols: list[Column], record: dict, fmt: str, limit: int | None, offset: int) -> Iterator[bytes]:
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    stop = record["n_rows"] if limit is None else min(offset + limit, record["n_rows"])
    start = min(offset, stop)
    text = fmt == "csv"
    integral = [c.type == "numeric" and c.integral() for c in cols]
    sink, writer = _Chunks(), None
    for a in range(start, max(stop, start + 1), EXPORT_ROWS):
        b = min(a + EXPORT_ROWS, stop)
        part = [Column(c.name, c.type, c.values[a:b], c.categories, c.labels) for c in cols]
        table = pa.table({c.name: c.to_arrow(text=text, integral=k) for c, k in zip(part, integral, strict=True)})
        if writer is None:
            writer = (pq.ParquetWriter(sink, table.schema) if fmt == "parquet" else
                      pacsv.CSVWriter(sink, table.schema, write_options=pacsv.WriteOptions(quoting_style="needed")))
        writer.write_table(table)
        yield sink.take()
    writer.close()
    yield sink.take()


def rows_page(meta: MetadataStore, art: ArtifactStore, record: dict, limit: int, offset: int) -> dict:
    cols = read_columns(meta, art, record["id"])
    sl = slice(offset, min(offset + limit, record["n_rows"]))
    per_col = [c.python_values(sl) for c in cols]
    rows = [list(r) for r in zip(*per_col, strict=True)] if per_col and per_col[0] else []
    return {"columns": [c.name for c in cols], "rows": rows, "offset": offset, "limit": limit,
            "total": record["n_rows"]}


def delete(meta: MetadataStore, art: ArtifactStore, dataset_id: str) -> None:
    if not meta.delete_dataset(dataset_id):
        raise NotFound(f"dataset {dataset_id!r} does not exist")
    art.delete_dataset(dataset_id)


def column_arrays(columns: list[Column]) -> dict[str, np.ndarray]:
    return {c.name: c.as_model_input() for c in columns}
