"""Parsing tables (CSV and Parquet files, JSON rows) into typed columns, on Apache Arrow.

Column types: ``numeric`` (float64, NaN = missing), ``boolean`` (float64 0/1, NaN = missing; ``labels`` keeps
the spelling of a yes/no column so that labels come back as uploaded), ``categorical`` (int32 codes into
sorted string categories, -1 = missing) and ``datetime`` (datetime64[us], UTC, NaT = missing).

CSV files are parsed by ``pyarrow.csv`` (blocks of ``BLOCK_SIZE`` bytes on Arrow's thread pool); Parquet by
``pyarrow.parquet``.  Both give an Arrow table whose columns are converted one at a time into the arrays above
(docs/decisions/data-ingestion.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from core.preprocessing.table import to_datetime64

from ..errors import invalid

TYPES = ("numeric", "categorical", "boolean", "datetime")
MISSING_TOKENS = ("", "NA", "N/A", "NaN", "nan", "NAN", "null", "NULL", "Null", "None", "none", "na", "n/a", "?")
TRUE_TOKENS = ("true", "True", "TRUE", "yes", "Yes", "YES")
FALSE_TOKENS = ("false", "False", "FALSE", "no", "No", "NO")
BLOCK_SIZE = 1 << 22  # bytes of CSV per Arrow parsing block
ISO_DATETIME = r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$"
_ISO_RE = re.compile(ISO_DATETIME)
PANDAS_INDEX_NAMES = ("", "__index_level_0__")


@dataclass
class Column:
    name: str
    type: str
    values: np.ndarray  # float64 (numeric/boolean), int32 codes (categorical), datetime64[us] (datetime)
    categories: list[str] = field(default_factory=list)
    labels: list[str] | None = None  # boolean only: the [false, true] spellings of a yes/no column

    @property
    def missing(self) -> np.ndarray:
        if self.type == "categorical":
            return self.values < 0
        if self.type == "datetime":
            return np.isnat(self.values)
        return np.isnan(self.values)

    def schema(self) -> dict:
        return {"name": self.name, "type": self.type, "n_missing": int(self.missing.sum()), "summary": self.summary()}

    def summary(self) -> dict:
        miss = self.missing
        if self.type == "numeric":
            v = self.values[~miss]
            if not len(v):
                return {"min": None, "max": None, "mean": None, "std": None}
            return {"min": float(v.min()), "max": float(v.max()), "mean": float(v.mean()), "std": float(v.std())}
        if self.type == "boolean":
            v = self.values[~miss]
            out = {"true": int((v == 1).sum()), "false": int((v == 0).sum())}
            if self.labels:
                out["labels"] = list(self.labels)
            return out
        if self.type == "datetime":
            v = self.values[~miss]
            if not len(v):
                return {"min": None, "max": None}
            return {"min": _iso(v.min()), "max": _iso(v.max())}
        counts = np.bincount(self.values[~miss], minlength=len(self.categories))
        order = np.argsort(-counts, kind="stable")[:5]
        return {
            "n_categories": len(self.categories),
            "top": [{"value": self.categories[i], "count": int(counts[i])} for i in order if counts[i] > 0],
        }

    def as_model_input(self) -> np.ndarray:
        """The form core.preprocessing expects: floats, datetime64, or object str/None for categorical."""
        if self.type == "datetime":
            return np.asarray(self.values, dtype="datetime64[us]")
        if self.type != "categorical":
            return np.asarray(self.values, dtype=np.float64)
        cats = np.empty(len(self.categories) + 1, dtype=object)
        cats[:-1] = self.categories
        cats[-1] = None
        return cats[np.asarray(self.values)]  # code -1 -> None

    def python_values(self, idx: slice | np.ndarray) -> list:
        vals = self.values[idx]
        if self.type == "numeric":
            return [None if math.isnan(v) else (int(v) if v.is_integer() and abs(v) < 2**53 else float(v))
                    for v in vals.tolist()]
        if self.type == "boolean":
            if self.labels:
                return [None if math.isnan(v) else self.labels[int(v)] for v in vals.tolist()]
            return [None if math.isnan(v) else bool(v) for v in vals.tolist()]
        if self.type == "datetime":
            return [None if np.isnat(v) else _iso(v) for v in vals]
        return [None if c < 0 else self.categories[c] for c in vals.tolist()]

    def to_arrow(self, *, text: bool = False) -> pa.Array:
        """The column as an Arrow array (``text``: datetimes as ISO strings, for CSV)."""
        miss = self.missing
        if self.type == "numeric":
            v = self.values
            present = v[~miss]
            if present.size and np.all(np.mod(present, 1) == 0) and np.all(np.abs(present) < 2**53):
                return pa.array(np.where(miss, 0, v).astype(np.int64), mask=miss)
            return pa.array(v, mask=miss)
        if self.type == "boolean":
            if self.labels:
                lab = np.asarray(self.labels, dtype=object)
                return pa.array(lab[np.where(miss, 0, self.values).astype(np.intp)], type=pa.string(), mask=miss)
            return pa.array(self.values == 1, mask=miss)
        if self.type == "datetime":
            if text:
                return pa.array(self.python_values(slice(None)), type=pa.string())
            return pa.array(self.values, type=pa.timestamp("us"))
        codes = np.where(miss, 0, self.values).astype(np.int32)
        return pa.DictionaryArray.from_arrays(pa.array(codes, mask=miss), pa.array(self.categories, pa.string()))


def _iso(v) -> str:
    s = np.datetime_as_string(np.datetime64(v, "us"), unit="s")
    return s[:10] if s.endswith("T00:00:00") else s


class Table(list):
    """The parsed columns, plus ``notes`` about what ingestion did (e.g. a dropped pandas index)."""

    def __init__(self, columns=(), notes=()):
        super().__init__(columns)
        self.notes: list[str] = list(notes)


# ----------------------------------------------------------------------------------------------
# type forcing
# ----------------------------------------------------------------------------------------------
def parse_types_query(text: str | None, columns: Sequence[str] | None = None) -> dict[str, str]:
    """``col:categorical,other:numeric`` -> dict; 422 naming the bad entry."""
    if not text:
        return {}
    out = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if ":" not in part:
            raise invalid(["query", "types"], f"entry {part!r} must look like column:type")
        col, typ = part.rsplit(":", 1)
        if typ not in TYPES:
            raise invalid(["query", "types"], f"type {typ!r} of column {col!r} must be one of {', '.join(TYPES)}")
        out[col] = typ
    return out


def check_forced(types: Mapping[str, str], header: Sequence[str], loc) -> None:
    for col, typ in types.items():
        if typ not in TYPES:
            raise invalid([*loc, col], f"type must be one of {', '.join(TYPES)}, got {typ!r}")
        if col not in header:
            raise invalid([*loc, col], f"column {col!r} is not in the data (columns: {', '.join(header)})")


def check_header(header: Sequence[str], loc) -> list[str]:
    names = [str(h).strip() for h in header]
    if not names:
        raise invalid(loc, "the table has no columns")
    seen = set()
    for i, n in enumerate(names):
        if not n:
            raise invalid(loc, f"column {i + 1} has an empty name")
        if n in seen:
            raise invalid(loc, f"duplicate column name {n!r}")
        seen.add(n)
    return names


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
            if not set(vocab) <= set(TRUE_TOKENS + FALSE_TOKENS):
                raise invalid(["types", name], f"column {name!r} was declared boolean but holds values other than "
                              "true/false/yes/no")
            return _boolean_from_text(name, arr, vocab)
        raise invalid(["types", name], f"column {name!r} was declared boolean but holds {t} values")
    if forced == "datetime" or (forced is None and temporal):
        if temporal or _is_text(t):
            return _datetime_from_arrow(name, arr, loc)
        raise invalid(["types", name], f"column {name!r} was declared datetime but holds {t} values")
    raise invalid(["body", name], f"column {name!r} has the type {t}, which is not supported (numbers, text, "
                  "booleans, dates and timestamps are)")


def columns_from_arrow(table: pa.Table, forced_types: Mapping[str, str] | None = None,
                       loc: Sequence = ("body",)) -> Table:
    """Typed columns of an Arrow table; a pandas index column (unnamed, 0..n-1) is dropped with a note."""
    loc = list(loc)
    forced_types = dict(forced_types or {})
    names = [str(n) for n in table.column_names]
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
    return columns_from_arrow(read_csv_arrow(path, forced_types), forced_types)


def parse_parquet_file(path, forced_types: Mapping[str, str] | None = None) -> Table:
    """Parse a Parquet file into typed columns; 422 when it is not Parquet or holds unsupported types."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise invalid(["body"], f"the body is not a readable Parquet file: {exc}") from None
    return columns_from_arrow(table, forced_types)


def to_arrow_table(columns: Sequence[Column], *, text: bool = False) -> pa.Table:
    return pa.table({c.name: c.to_arrow(text=text) for c in columns})


# ----------------------------------------------------------------------------------------------
# JSON rows
# ----------------------------------------------------------------------------------------------
def _json_cell_type(v) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "numeric"
    if isinstance(v, str):
        return "text"
    return "invalid"


def parse_json_table(columns: Sequence[str], rows: Sequence[Sequence], forced_types: Mapping[str, str] | None,
                     loc: Sequence = ("body",)) -> Table:
    """Typed columns from JSON ``columns`` + ``rows`` (numbers, strings, booleans, null)."""
    loc = list(loc)
    names = check_header(columns, [*loc, "columns"])
    forced_types = dict(forced_types or {})
    check_forced(forced_types, names, [*loc, "types"])
    width = len(names)
    if not rows:
        raise invalid([*loc, "rows"], "the table has no rows")
    for i, r in enumerate(rows):
        if not isinstance(r, (list, tuple)):
            raise invalid([*loc, "rows", i], "each row must be a list of values")
        if len(r) != width:
            raise invalid([*loc, "rows", i], f"row {i} has {len(r)} values, but there are {width} columns")
    out = Table()
    for j, name in enumerate(names):
        vals = [r[j] for r in rows]
        kinds = {_json_cell_type(v) for v in vals} - {None}
        if "invalid" in kinds:
            i = next(i for i, v in enumerate(vals) if _json_cell_type(v) == "invalid")
            raise invalid([*loc, "rows", i, name], f"column {name!r} holds a value that is not a number, string, "
                          f"boolean or null: {vals[i]!r}")
        forced = forced_types.get(name)
        typ = forced or ("numeric" if kinds <= {"numeric"} else "boolean" if kinds == {"boolean"} else "categorical")
        if not kinds and not forced:
            typ = "numeric"
        if typ == "categorical" and not forced and kinds == {"text"} and all(
                v is None or _ISO_RE.match(v) for v in vals):
            typ = "datetime"
        out.append(_json_column(name, typ, vals, [*loc, "rows"]))
    return out


def _json_column(name, typ, vals, loc) -> Column:
    n = len(vals)
    if typ == "numeric":
        arr = np.full(n, np.nan)
        for i, v in enumerate(vals):
            if v is None:
                continue
            if isinstance(v, bool):
                v = float(v)
            if isinstance(v, str):
                s = v.strip()
                if s in MISSING_TOKENS:
                    continue
                try:
                    v = float(s)
                except ValueError:
                    raise invalid([*loc, i, name], f"column {name!r} is numeric but row {i} holds text {v!r}") from None
            fv = float(v)
            if not math.isfinite(fv):
                raise invalid([*loc, i, name], f"column {name!r} row {i} is not a finite number")
            arr[i] = fv
        return Column(name, "numeric", arr)
    if typ == "boolean":
        arr = np.full(n, np.nan)
        for i, v in enumerate(vals):
            if v is None:
                continue
            if isinstance(v, bool) or v in (0, 1):
                arr[i] = float(v)
            elif isinstance(v, str) and v in TRUE_TOKENS + FALSE_TOKENS:
                arr[i] = 1.0 if v in TRUE_TOKENS else 0.0
            else:
                raise invalid([*loc, i, name], f"column {name!r} is boolean but row {i} holds {v!r}")
        return Column(name, "boolean", arr)
    if typ == "datetime":
        for i, v in enumerate(vals):
            if v is not None and not isinstance(v, str):
                raise invalid([*loc, i, name], f"column {name!r} is datetime but row {i} holds {v!r}; send ISO "
                              "8601 text such as 2024-05-01 or 2024-05-01T13:45:00Z")
        try:
            return Column(name, "datetime", to_datetime64(np.asarray(vals, dtype=object)))
        except ValueError as exc:
            raise invalid([*loc, name], f"column {name!r} is datetime but {exc}") from None
    strs = [None if v is None else _cat_str(v) for v in vals]
    cats = sorted({s for s in strs if s is not None})
    index = {c: k for k, c in enumerate(cats)}
    codes = np.fromiter((-1 if s is None else index[s] for s in strs), dtype=np.int32, count=n)
    return Column(name, "categorical", codes, cats)


def _cat_str(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


__all__ = ["Column", "Table", "TYPES", "parse_csv_file", "parse_parquet_file", "parse_json_table",
           "parse_types_query", "columns_from_arrow", "to_arrow_table"]
