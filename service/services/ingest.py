"""Reading CSV and Parquet files with Apache Arrow into typed columns (service.services.tables.Column).

CSV files are parsed by ``pyarrow.csv`` (blocks of ``BLOCK_SIZE`` bytes on Arrow's thread pool); Parquet by
``pyarrow.parquet``.  Both give an Arrow table whose columns are converted one at a time into the stored
arrays (docs/decisions/data-ingestion.md).  Imported on first use only (Arrow starts threads; the training
workers' forkserver must stay single-threaded).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from core.preprocessing.table import to_datetime64

from ..errors import invalid
from .tables import (
    _ISO_RE,
    FALSE_TOKENS,
    MISSING_TOKENS,
    PANDAS_INDEX_NAMES,
    TRUE_TOKENS,
    Column,
    Table,
    check_forced,
    check_header,
)

BLOCK_SIZE = 1 << 22  # bytes of CSV per Arrow parsing block


# ----------------------------------------------------------------------------------------------
# Arrow columns -> typed columns
# ----------------------------------------------------------------------------------------------
def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _infinite_check(name: str, v: np.ndarray, loc) -> None:
    if np.isinf(v).any():
        raise invalid([*loc, name], f"column {name!r}: a numeric value is infinite; use a finite number or leave "
                      "it empty")


def _numeric(name: str, arr: pa.ChunkedArray, loc) -> Column:
    v = pc.cast(arr, pa.float64()).to_numpy(zero_copy_only=False)  # NaN for nulls
    if not v.flags.writeable:
        v = v.copy()
    _infinite_check(name, v, loc)
    return Column(name, "numeric", v)


def _text_vocab(arr: pa.ChunkedArray) -> list[str]:
    uniq = pc.unique(arr).drop_null().to_pylist()
    return sorted(uniq)


def _categorical(name: str, arr: pa.ChunkedArray, vocab: list[str] | None = None) -> Column:
    if pa.types.is_dictionary(arr.type):
        arr = pc.cast(arr, pa.string())
    if not _is_text(arr.type):
        arr = pc.cast(arr, pa.string())
    vocab = _text_vocab(arr) if vocab is None else vocab
    codes = pc.index_in(arr, value_set=pa.array(vocab, pa.string())).fill_null(-1)
    return Column(name, "categorical", np.array(codes.to_numpy(zero_copy_only=False), dtype=np.int32), vocab)


def _boolean_from_text(name: str, arr: pa.ChunkedArray, vocab: list[str]) -> Column:
    trues = [s for s in vocab if s in TRUE_TOKENS]
    falses = [s for s in vocab if s in FALSE_TOKENS]
    is_true = pc.is_in(arr, value_set=pa.array(trues, pa.string()))
    v = np.array(pc.cast(is_true, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    v[np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)] = np.nan
    labels = None
    words = {s.lower() for s in vocab}
    if len(trues) == 1 and len(falses) == 1 and not words & {"true", "false"}:
        labels = [falses[0], trues[0]]  # a yes/no column: labels come back as spelled
    return Column(name, "boolean", v, labels=labels)


def _datetime_from_arrow(name: str, arr: pa.ChunkedArray, loc) -> Column:
    t = arr.type
    if pa.types.is_timestamp(t) and t.tz is not None:
        arr = pc.cast(arr, pa.timestamp("us", tz="UTC")).cast(pa.timestamp("us"))  # UTC wall time
    elif _is_text(t):
        for target in (pa.timestamp("us"), pa.timestamp("us", tz="UTC")):  # Arrow's ISO 8601 parser first
            try:
                v = pc.cast(arr, target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                continue
            return _datetime_from_arrow(name, v, loc)
        try:  # mixed zones and the like: Python's parser, value by value
            vals = to_datetime64(np.asarray(arr.to_pylist(), dtype=object))
        except ValueError as exc:
            raise invalid([*loc, name], f"column {name!r} was declared datetime but {exc}") from None
        return Column(name, "datetime", vals)
    v = pc.cast(arr, pa.timestamp("us")).to_numpy(zero_copy_only=False)
    return Column(name, "datetime", np.asarray(v, dtype="datetime64[us]"))


def _is_iso_vocab(vocab: list[str]) -> bool:
    return bool(vocab) and all(_ISO_RE.match(s) for s in vocab)


def _convert(name: str, arr: pa.ChunkedArray, forced: str | None, loc) -> Column:
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = pc.cast(arr, t.value_type)
        t = arr.type
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        raise invalid(["body", name], f"column {name!r} is not valid UTF-8 text; re-encode the file as UTF-8")
    numeric_like = (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
                    or pa.types.is_null(t))
    temporal = pa.types.is_timestamp(t) or pa.types.is_date(t)
    if forced == "categorical" or (forced is None and _is_text(t)):
        if forced is None:
            vocab = _text_vocab(arr)
            if vocab and set(vocab) <= set(TRUE_TOKENS + FALSE_TOKENS):
                return _boolean_from_text(name, arr, vocab)
            if _is_iso_vocab(vocab):
                return _datetime_from_arrow(name, arr, loc)
            return _categorical(name, arr, vocab)
        return _categorical(name, arr)
    if forced == "numeric" or (forced is None and numeric_like):
        if pa.types.is_boolean(t) or numeric_like:
            return _numeric(name, arr, loc)
        if _is_text(t):
            try:
                return _numeric(name, pc.cast(arr, pa.float64()), loc)
            except (pa.ArrowInvalid, ValueError):
                raise invalid(["types", name], f"column {name!r} was declared numeric but holds non-numeric "
                              "text") from None
        raise invalid(["types", name], f"column {name!r} was declared numeric but holds {t} values")
    if forced == "boolean" or (forced is None and pa.types.is_boolean(t)):
        if pa.types.is_boolean(t) or numeric_like:
            v = np.array(pc.cast(arr, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
            if not np.isin(v[~np.isnan(v)], (0.0, 1.0)).all():
                raise invalid(["types", name], f"column {name!r} was declared boolean but holds numbers other "
                              "than 0 and 1")
            return Column(name, "boolean", v)
        if _is_text(t):
            vocab = _text_vocab(arr)
            if set(vocab) <= {"0", "1"}:
                return _convert(name, pc.cast(arr, pa.float64()), "boolean", loc)
            if not set(vocab) <= set(TRUE_TOKENS + FALSE_TOKENS):
                raise invalid(["types", name], f"column {name!r} was declared boolean but holds values other than "
                              "true/false/yes/no (or 0/1)")
            return _boolean_from_text(name, arr, vocab)
        raise invalid(["types", name], f"column {name!r} was declared boolean but holds {t} values")
    if forced == "datetime" or (forced is None and temporal):
        if temporal or _is_text(t):
            return _datetime_from_arrow(name, arr, loc)
        raise invalid(["types", name], f"column {name!r} was declared datetime but holds {t} values")
    raise invalid(["body", name], f"column {name!r} has the type {t}, which is not supported (numbers, text, "
                  "booleans, dates and timestamps are)")


def columns_from_arrow(table: pa.Table | list, forced_types: Mapping[str, str] | None = None,
                       loc: Sequence = ("body",)) -> Table:
    """Typed columns of an Arrow table; a pandas index column (unnamed, 0..n-1) is dropped with a note.

    ``table`` may be given in a one-item list, which is emptied: then each Arrow column is freed as soon as
    it is converted (a caller's argument would keep the whole table alive until the end).
    """
    if isinstance(table, list):
        table = table.pop()
    loc = list(loc)
    forced_types = dict(forced_types or {})
    try:
        names = [str(n) for n in table.column_names]
    except UnicodeDecodeError:
        raise invalid([*loc, "header"], "the column names are not valid UTF-8; re-encode the file as UTF-8") from None
    notes = []
    if table.num_rows == 0:
        raise invalid(loc, "the table has a header but no data rows")
    if names and names[0].strip() in PANDAS_INDEX_NAMES and _is_range_index(table.column(0)):
        notes.append(f"the first column (unnamed, holding 0..{table.num_rows - 1}) is a pandas index and was "
                     "dropped")
        table = table.remove_column(0)
        names = names[1:]
        if not names:
            raise invalid(loc, "the table has no columns besides a pandas index")
    names = check_header(names, [*loc, "header"])
    check_forced(forced_types, names, ["query", "types"])
    arrays = list(table.columns)
    del table
    out = Table(notes=notes)
    for j, name in enumerate(names):
        arr, arrays[j] = arrays[j], None  # free each Arrow column once converted
        out.append(_convert(name, arr, forced_types.get(name), loc))
    return out


def _is_range_index(arr: pa.ChunkedArray) -> bool:
    if not pa.types.is_integer(arr.type) or arr.null_count:
        return False
    v = arr.to_numpy()
    return bool(np.array_equal(v, np.arange(len(v))))


# ----------------------------------------------------------------------------------------------
# CSV and Parquet files
# ----------------------------------------------------------------------------------------------
_WIDER = {"int64": pa.float64(), "date32[day]": pa.timestamp("us")}
_CONV_ERR = re.compile(r"In CSV column #(\d+): CSV conversion error to ([^:]+):")


def _csv_options(column_types: dict, bad_rows: list | None = None):
    """Arrow's CSV options; with ``bad_rows`` (the error path only: a Python callback per bad row) the first
    row of the wrong width is recorded for the error message."""
    def on_bad_row(row):
        bad_rows.append(row)
        return "error"

    read = pacsv.ReadOptions(block_size=BLOCK_SIZE, use_threads=True)
    parse = pacsv.ParseOptions(newlines_in_values=True,
                               **({"invalid_row_handler": on_bad_row} if bad_rows is not None else {}))
    convert = pacsv.ConvertOptions(
        null_values=list(MISSING_TOKENS), strings_can_be_null=True, quoted_strings_can_be_null=True,
        true_values=["true", "True", "TRUE"], false_values=["false", "False", "FALSE"],
        column_types=column_types, check_utf8=True,
    )
    return read, parse, convert


def read_csv_arrow(path, forced_types: Mapping[str, str] | None = None) -> pa.Table:
    """The CSV as an Arrow table; forced columns are read as text (converted by ``columns_from_arrow``).

    Arrow infers a column's type from the first block; a later block that does not fit (a decimal after
    integers, text after numbers) fails the read, and the column is read again with a wider type.
    """
    forced_types = dict(forced_types or {})
    column_types: dict = {c: pa.string() for c in forced_types}
    for _ in range(1000):
        read, parse, convert = _csv_options(column_types)
        try:
            return pacsv.read_csv(path, read_options=read, parse_options=parse, convert_options=convert)
        except pa.ArrowInvalid as exc:
            msg = str(exc)
            bad_rows: list = []
            if msg.startswith("CSV parse error") and "columns" in msg:  # find the row, for the message
                read, parse, convert = _csv_options(column_types, bad_rows)
                try:
                    pacsv.read_csv(path, read_options=read, parse_options=parse, convert_options=convert)
                except pa.ArrowInvalid:
                    pass
            if bad_rows:
                row = bad_rows[0]
                where = f"line {row.number}" if row.number is not None else "a row"
                raise invalid(["body"], f"{where} has {row.actual_columns} fields, but the header has "
                              f"{row.expected_columns}: {row.text[:80]!r}") from None
            m = _CONV_ERR.search(msg)
            if m is None:
                if "Empty CSV" in msg:
                    raise invalid(["body"], "the CSV is empty; it needs a header row and at least one data "
                                  "row") from None
                raise invalid(["body"], f"malformed CSV: {msg}") from None
            col = _header(path)[int(m.group(1))]
            if col in forced_types:
                raise invalid(["body", col], f"column {col!r}: {msg}") from None
            column_types[col] = _WIDER.get(m.group(2).strip(), pa.string())
        except UnicodeDecodeError:
            raise invalid(["body"], "the CSV is not valid UTF-8; re-encode the file as UTF-8") from None
    raise invalid(["body"], "the CSV's column types could not be settled")  # pragma: no cover


def _header(path) -> list[str]:
    reader = pacsv.open_csv(path, read_options=pacsv.ReadOptions(block_size=1 << 16),
                            convert_options=pacsv.ConvertOptions(column_types={}, strings_can_be_null=True))
    names = reader.schema.names
    reader.close()
    return names


def parse_csv_file(path, forced_types: Mapping[str, str] | None = None) -> Table:
    """Parse a CSV file (header row required) into typed columns; 422 on any defect."""
    return columns_from_arrow([read_csv_arrow(path, forced_types)], forced_types)


def parse_parquet_file(path, forced_types: Mapping[str, str] | None = None) -> Table:
    """Parse a Parquet file into typed columns; 422 when it is not Parquet or holds unsupported types."""
    import pyarrow.parquet as pq

    try:
        box = [pq.read_table(path)]
    except (pa.ArrowException, OSError) as exc:
        raise invalid(["body"], f"the body is not a readable Parquet file: {exc}") from None
    return columns_from_arrow(box, forced_types)


__all__ = ["columns_from_arrow", "read_csv_arrow", "parse_csv_file", "parse_parquet_file", "BLOCK_SIZE"]
