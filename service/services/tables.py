"""Parsing tables (CSV and Parquet files, JSON rows) into typed columns, on Apache Arrow.

Column types: ``numeric`` (float64, NaN = missing), ``boolean`` (float64 0/1, NaN = missing; ``labels`` keeps
the spelling of a yes/no column so that labels come back as uploaded), ``categorical`` (int32 codes into
sorted string categories, -1 = missing) and ``datetime`` (datetime64[us], UTC, NaT = missing).

CSV and Parquet files are read with Apache Arrow in ``service.services.ingest`` (imported on first use: the
training workers' forkserver imports this module and must stay free of Arrow's threads);
docs/decisions/data-ingestion.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from core.preprocessing.table import to_datetime64

from ..errors import invalid

TYPES = ("numeric", "categorical", "boolean", "datetime")
MISSING_TOKENS = ("", "NA", "N/A", "NaN", "nan", "NAN", "null", "NULL", "Null", "None", "none", "na", "n/a", "?")
TRUE_TOKENS = ("true", "True", "TRUE", "yes", "Yes", "YES")
FALSE_TOKENS = ("false", "False", "FALSE", "no", "No", "NO")
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
    described: dict | None = None  # schema() computed in advance (ingestion: by the column's sink, batch by batch)

    @property
    def missing(self) -> np.ndarray:
        if self.type == "categorical":
            return self.values < 0
        if self.type == "datetime":
            return np.isnat(self.values)
        return np.isnan(self.values)

    def schema(self) -> dict:
        if self.described is not None:
            return dict(self.described)
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
            return {"min": iso_text(v.min()), "max": iso_text(v.max())}
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
            return [None if np.isnat(v) else iso_text(v) for v in vals]
        return [None if c < 0 else self.categories[c] for c in vals.tolist()]

    def integral(self) -> bool:
        """Whether every present value of a numeric column is a whole number (exported as integers)."""
        v = self.values[~self.missing]
        return bool(v.size) and bool(np.all(np.mod(v, 1) == 0)) and bool(np.all(np.abs(v) < 2**53))

    def to_arrow(self, *, text: bool = False, integral: bool | None = None):
        """The column as an Arrow array (``text``: datetimes as ISO strings, for CSV; ``integral``: numbers as
        integers, decided on the whole column by the caller when it exports in pieces)."""
        import pyarrow as pa

        miss = self.missing
        if self.type == "numeric":
            v = self.values
            if integral is None:
                integral = self.integral()
            if integral:
                return pa.array(np.where(miss, 0, v).astype(np.int64), mask=miss)
            return pa.array(v, mask=miss)
        if self.type == "boolean":
            if self.labels:
                lab = np.asarray(self.labels, dtype=object)
                return pa.array(lab[np.where(miss, 0, self.values).astype(np.intp)], type=pa.string(), mask=miss)
            return pa.array(self.values == 1, mask=miss)
        if self.type == "datetime":
            v = np.asarray(self.values, dtype="datetime64[us]")
            if text:  # ISO 8601: the date alone at midnight, else to the second (as python_values)
                s = np.datetime_as_string(v, unit="s")
                midnight = v.astype(np.int64) % 86_400_000_000 == 0
                return pa.array(np.where(midnight, s.astype("U10"), s), type=pa.string(), mask=miss)
            return pa.array(v, type=pa.timestamp("us"), mask=miss)
        codes = np.where(miss, 0, self.values).astype(np.int32)
        return pa.DictionaryArray.from_arrays(pa.array(codes, mask=miss), pa.array(self.categories, pa.string()))


def iso_text(v) -> str:
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
    """The one check of a table's column names, for CSV, Parquet and JSON alike, made as soon as the header
    is known and before any row is stored: empty and duplicate names (the place for any limit on columns)."""
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


__all__ = ["Column", "Table", "TYPES", "parse_json_table", "parse_types_query"]
