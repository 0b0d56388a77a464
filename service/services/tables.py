"""Parsing tables (CSV files, JSON rows) into typed columns.

Column types: ``numeric`` (float64, NaN = missing), ``boolean`` (float64 0/1, NaN =
missing) and ``categorical`` (int32 codes into sorted string categories, -1 = missing).

CSV is parsed in two streaming passes over a file on disk, in chunks of rows:
pass 1 infers each column's type (and categorical vocabularies), pass 2
converts each chunk with NumPy into the final arrays.  Peak memory is the
final arrays plus one chunk of text, whatever the file size.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import Invalid, invalid

TYPES = ("numeric", "categorical", "boolean")
MISSING_TOKENS = ("", "NA", "N/A", "NaN", "nan", "NAN", "null", "NULL", "Null", "None", "none", "na", "n/a", "?")
TRUE_TOKENS = ("true", "True", "TRUE", "yes", "Yes", "YES")
FALSE_TOKENS = ("false", "False", "FALSE", "no", "No", "NO")
CHUNK_ROWS = 20_000

csv.field_size_limit(16 * 1024 * 1024)


@dataclass
class Column:
    name: str
    type: str
    values: np.ndarray  # float64 (numeric/boolean) or int32 codes (categorical)
    categories: list[str] = field(default_factory=list)

    @property
    def missing(self) -> np.ndarray:
        if self.type == "categorical":
            return self.values < 0
        return np.isnan(self.values)

    def schema(self) -> dict:
        d = {"name": self.name, "type": self.type, "n_missing": int(self.missing.sum()), "summary": self.summary()}
        return d

    def summary(self) -> dict:
        miss = self.missing
        if self.type == "numeric":
            v = self.values[~miss]
            if not len(v):
                return {"min": None, "max": None, "mean": None, "std": None}
            return {"min": float(v.min()), "max": float(v.max()), "mean": float(v.mean()), "std": float(v.std())}
        if self.type == "boolean":
            v = self.values[~miss]
            return {"true": int((v == 1).sum()), "false": int((v == 0).sum())}
        counts = np.bincount(self.values[~miss], minlength=len(self.categories))
        order = np.argsort(-counts, kind="stable")[:5]
        return {
            "n_categories": len(self.categories),
            "top": [{"value": self.categories[i], "count": int(counts[i])} for i in order if counts[i] > 0],
        }

    def as_model_input(self) -> np.ndarray:
        """The form core.preprocessing expects: floats, or object str/None for categorical."""
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
            return [None if math.isnan(v) else bool(v) for v in vals.tolist()]
        return [None if c < 0 else self.categories[c] for c in vals.tolist()]


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
# chunk-level inference and conversion (text values)
# ----------------------------------------------------------------------------------------------
class _Inference:
    """One column's running type inference over chunks of strings, keeping converted chunks.

    A column is numeric while every present value parses as a float, boolean while every present
    value is a true/false token, categorical otherwise.  Converted chunks are kept for the types still
    possible (floats; 0/1; chunk-local category codes), so the file is parsed once.  A column that
    stops being numeric or boolean after some chunks is re-read in a second pass (``needs_reread``).
    """

    def __init__(self, forced: str | None):
        self.forced = forced
        self.can_numeric = forced in (None, "numeric")
        self.can_boolean = forced in (None, "boolean")
        self.categories: set[str] = set()
        self.num_chunks: list[np.ndarray] = []
        self.bool_chunks: list[np.ndarray] = []
        self.cat_chunks: list[tuple[np.ndarray, np.ndarray]] = []  # (local vocab, local codes)
        self.needs_reread = False

    def update(self, vals: np.ndarray, missing: np.ndarray) -> None:
        present = vals[~missing]
        n_chunks_before = len(self.num_chunks) + len(self.bool_chunks) + len(self.cat_chunks)
        if self.can_numeric:
            try:
                f = present.astype(np.float64)
            except ValueError:
                self.can_numeric = False
                self.num_chunks = []
            else:
                if np.isinf(f).any():
                    bad = present[np.isinf(f)][0]
                    raise Invalid(f"a numeric value is infinite ({bad!r}); use a finite number or leave it empty")
                out = np.full(len(vals), np.nan)
                out[~missing] = f
                self.num_chunks.append(out)
        if self.can_boolean:
            if np.isin(present, TRUE_TOKENS + FALSE_TOKENS).all():
                out = np.full(len(vals), np.nan)
                out[~missing] = np.isin(present, TRUE_TOKENS)
                self.bool_chunks.append(out)
            else:
                self.can_boolean = False
                self.bool_chunks = []
        if not self.can_numeric and not self.can_boolean:
            if n_chunks_before and not self.cat_chunks and self.forced is None:
                self.needs_reread = True  # earlier chunks were kept as numbers or booleans only
            if not self.needs_reread:
                vocab, codes = np.unique(present, return_inverse=True)
                local = np.full(len(vals), -1, dtype=np.int32)
                local[~missing] = codes
                self.cat_chunks.append((vocab, local))
            self.categories.update(np.unique(present).tolist() if self.needs_reread else vocab.tolist())

    def final_type(self, name: str) -> str:
        if self.forced == "numeric" and not self.can_numeric:
            raise invalid(["types", name], f"column {name!r} was declared numeric but holds non-numeric text")
        if self.forced == "boolean" and not self.can_boolean:
            raise invalid(["types", name], f"column {name!r} was declared boolean but holds values other than "
                          "true/false/yes/no")
        if self.forced:
            return self.forced
        if self.can_numeric:
            return "numeric"
        if self.can_boolean:
            return "boolean"
        return "categorical"

    def values(self, typ: str, cats: list[str]) -> np.ndarray:
        if typ == "numeric":
            return np.concatenate(self.num_chunks)
        if typ == "boolean":
            return np.concatenate(self.bool_chunks)
        index = np.array(cats, dtype=str)
        parts = []
        for vocab, local in self.cat_chunks:
            remap = np.searchsorted(index, vocab).astype(np.int32) if len(vocab) else np.zeros(0, np.int32)
            part = np.full(len(local), -1, dtype=np.int32)
            ok = local >= 0
            part[ok] = remap[local[ok]]
            parts.append(part)
        return np.concatenate(parts)


def _chunk_arrays(rows: list[list[str]], width: int) -> list[np.ndarray]:
    cols = list(zip(*rows, strict=True)) if rows else [() for _ in range(width)]
    return [np.array(c, dtype=str) for c in cols]


def _missing_mask(vals: np.ndarray) -> np.ndarray:
    stripped = np.char.strip(vals) if vals.size and vals.dtype.itemsize <= 64 else vals
    return np.isin(stripped, MISSING_TOKENS)


# ----------------------------------------------------------------------------------------------
# CSV
# ----------------------------------------------------------------------------------------------
def _csv_rows(path, width_holder: list) -> Iterator[tuple[int, list[str]]]:
    try:
        fh = open(path, encoding="utf-8-sig", newline="")
    except OSError as exc:  # pragma: no cover
        raise Invalid(f"cannot read the uploaded file: {exc}") from None
    with fh:
        reader = csv.reader(fh)
        try:
            for row in reader:
                yield reader.line_num, row
        except UnicodeDecodeError as exc:
            raise invalid(["body"], f"the CSV is not valid UTF-8 (byte offset {exc.start} of a block near line "
                          f"{reader.line_num + 1}); re-encode the file as UTF-8") from None
        except csv.Error as exc:
            raise invalid(["body"], f"malformed CSV near line {reader.line_num}: {exc}") from None


def _chunks(path, header_len: int) -> Iterator[list[list[str]]]:
    rows_iter = _csv_rows(path, [])
    next(rows_iter)  # header
    chunk: list[list[str]] = []
    for line, row in rows_iter:
        if not row:  # blank line
            continue
        if len(row) != header_len:
            raise invalid(["body"], f"row at line {line} has {len(row)} fields, but the header has {header_len}")
        chunk.append(row)
        if len(chunk) >= CHUNK_ROWS:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def parse_csv_file(path, forced_types: Mapping[str, str] | None = None) -> list[Column]:
    """Parse a CSV file (header row required) into typed columns; 422 on any defect.

    One pass in chunks of rows; only columns whose type changed part-way (numbers, then text) are
    read a second time.
    """
    forced_types = dict(forced_types or {})
    rows_iter = _csv_rows(path, [])
    try:
        _, header = next(rows_iter)
    except StopIteration:
        raise invalid(["body"], "the CSV is empty; it needs a header row and at least one data row") from None
    rows_iter.close()
    names = check_header(header, ["body", "header"])
    check_forced(forced_types, names, ["query", "types"])
    width = len(names)
    inf = [_Inference(forced_types.get(n)) for n in names]
    for j, n in enumerate(names):  # a forced categorical column never tries the other types
        if forced_types.get(n) == "categorical":
            inf[j].can_numeric = inf[j].can_boolean = False
    n_rows = 0
    for chunk in _chunks(path, width):
        n_rows += len(chunk)
        for j, vals in enumerate(_chunk_arrays(chunk, width)):
            try:
                inf[j].update(vals, _missing_mask(vals))
            except Invalid as exc:
                raise invalid(["body", names[j]], f"column {names[j]!r}: {exc.detail}") from None
    if n_rows == 0:
        raise invalid(["body"], "the CSV has a header but no data rows")
    types = [inf[j].final_type(n) for j, n in enumerate(names)]
    reread = [j for j in range(width) if types[j] == "categorical" and inf[j].needs_reread]
    if reread:
        for j in reread:
            inf[j].cat_chunks = []
            inf[j].categories = set()
        for chunk in _chunks(path, width):
            arrays = _chunk_arrays(chunk, width)
            for j in reread:
                vals = arrays[j]
                missing = _missing_mask(vals)
                vocab, codes = np.unique(vals[~missing], return_inverse=True)
                local = np.full(len(vals), -1, dtype=np.int32)
                local[~missing] = codes
                inf[j].cat_chunks.append((vocab, local))
                inf[j].categories.update(vocab.tolist())
    out = []
    for j, n in enumerate(names):
        cats = sorted(inf[j].categories) if types[j] == "categorical" else []
        out.append(Column(n, types[j], inf[j].values(types[j], cats), cats))
    return out


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
                     loc: Sequence = ("body",)) -> list[Column]:
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
    out = []
    for j, name in enumerate(names):
        vals = [r[j] for r in rows]
        kinds = {_json_cell_type(v) for v in vals} - {None}
        if "invalid" in kinds:
            bad = next(v for v in vals if _json_cell_type(v) == "invalid")
            raise invalid([*loc, "rows", name], f"column {name!r} holds a value that is not a number, string, "
                          f"boolean or null: {bad!r}")
        forced = forced_types.get(name)
        typ = forced or ("numeric" if kinds <= {"numeric"} else "boolean" if kinds == {"boolean"} else "categorical")
        if not kinds and not forced:
            typ = "numeric"
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
                    raise invalid([*loc, name], f"column {name!r} is numeric but row {i} holds text {v!r}") from None
            fv = float(v)
            if not math.isfinite(fv):
                raise invalid([*loc, name], f"column {name!r} row {i} is not a finite number")
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
                raise invalid([*loc, name], f"column {name!r} is boolean but row {i} holds {v!r}")
        return Column(name, "boolean", arr)
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


def csv_bytes_to_file(data: bytes, path) -> None:  # small helper for tests and inline uploads
    with open(path, "wb") as fh:
        fh.write(data)


__all__ = ["Column", "TYPES", "parse_csv_file", "parse_json_table", "parse_types_query", "io"]
