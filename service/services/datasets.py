"""Datasets: create (CSV / JSON), list, read rows, delete, load columns for training."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import numpy as np

from ..errors import NotFound
from ..storage.artifacts import ArtifactStore
from ..storage.metadata import MetadataStore, utcnow
from .tables import Column, to_arrow_table


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


def store_columns(meta: MetadataStore, art: ArtifactStore, columns: list[Column], name: str | None) -> dict:
    """Write columns to the artifact store, then the metadata row (the record appears only when complete)."""
    dataset_id = new_id("ds")
    arrays = {f"c{j}": c.values for j, c in enumerate(columns)}
    schema = {"columns": [{"name": c.name, "type": c.type, "categories": c.categories,
                           **({"labels": c.labels} if c.labels else {})} for c in columns]}
    size = art.write_dataset(dataset_id, arrays, schema)
    record = {
        "id": dataset_id,
        "name": name or dataset_id,
        "n_rows": int(len(columns[0].values)),
        "n_columns": len(columns),
        "columns": [c.schema() for c in columns],
        "size_bytes": int(size),
        "created_at": utcnow(),
        "notes": list(getattr(columns, "notes", []) or []),
    }
    try:
        meta.insert_dataset(record)
    except BaseException:
        art.delete_dataset(dataset_id)
        raise
    return record


def get_record(meta: MetadataStore, dataset_id: str) -> dict:
    rec = meta.get_dataset(dataset_id)
    if rec is None:
        raise NotFound(f"dataset {dataset_id!r} does not exist")
    return rec


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


def export_table(art: ArtifactStore, record: dict, fmt: str, limit: int | None, offset: int) -> bytes:
    """The dataset (or the rows ``offset:offset+limit``) as Parquet or CSV bytes."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    cols = load_columns(art, record["id"])
    stop = record["n_rows"] if limit is None else min(offset + limit, record["n_rows"])
    sl = slice(offset, max(offset, stop))
    part = [Column(c.name, c.type, c.values[sl], c.categories, c.labels) for c in cols]
    table = to_arrow_table(part, text=fmt == "csv")
    sink = pa.BufferOutputStream()
    if fmt == "parquet":
        pq.write_table(table, sink)
    else:
        pacsv.write_csv(table, sink, pacsv.WriteOptions(quoting_style="needed"))
    return sink.getvalue().to_pybytes()


def rows_page(art: ArtifactStore, record: dict, limit: int, offset: int) -> dict:
    cols = load_columns(art, record["id"])
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
