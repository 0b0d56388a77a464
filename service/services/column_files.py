"""Column files written batch by batch: Arrow record batches -> one ``.npy`` file per column, typed.

``Writer`` checks the header once (``check_header``), then takes record batches (from CSV pieces or Parquet
row groups, service.services.ingest) and hands each column's Arrow array to its sink: numbers, booleans and
timestamps are converted with Arrow kernels and appended; text is appended as dictionary codes, and at the end
the batch dictionaries are merged into one sorted vocabulary, the codes remapped in place, and the vocabulary
(distinct values only) decides the type: yes/no -> boolean, ISO 8601 -> datetime, forced types
(docs/decisions/data-ingestion.md).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.preprocessing.table import to_datetime64

from ..errors import invalid
from .tables import (
    FALSE_TOKENS,
    ISO_DATETIME,
    PANDAS_INDEX_NAMES,
    TRUE_TOKENS,
    Column,
    Table,
    check_forced,
    check_header,
)

_HEADER_BYTES = 128  # .npy header, rewritten with the final row count
_REMAP_ROWS = 1 << 20  # rows per step when codes are remapped or converted at the end


# ----------------------------------------------------------------------------------------------
# .npy column files written in pieces
# ----------------------------------------------------------------------------------------------
def _npy_header(dtype, n: int) -> bytes:
    descr = np.lib.format.dtype_to_descr(np.dtype(dtype))
    d = f"{{'descr': {descr!r}, 'fortran_order': False, 'shape': ({n},), }}"
    text = d.ljust(_HEADER_BYTES - 10 - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode("latin1")


class _NpyFile:
    def __init__(self, path: Path, dtype):
        self.path, self.dtype, self.n = path, np.dtype(dtype), 0
        self._fh = open(path, "wb")  # noqa: SIM115 - closed by close()
        self._fh.write(_npy_header(self.dtype, 0))

    def append(self, values: np.ndarray) -> None:
        values = np.ascontiguousarray(values, dtype=self.dtype)
        self._fh.write(values.view(np.uint8) if values.dtype.kind == "M" else values.data)
        self.n += len(values)

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.seek(0)
            self._fh.write(_npy_header(self.dtype, self.n))
            self._fh.close()


# ----------------------------------------------------------------------------------------------
# Column sinks: one per column, fed one Arrow array per batch
# ----------------------------------------------------------------------------------------------
def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _numeric_like(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_null(t)


def _float64(arr: pa.Array) -> np.ndarray:
    return pc.cast(arr, pa.float64()).to_numpy(zero_copy_only=False)  # NaN for nulls


class _Sink:
    def __init__(self, name: str, path: Path, loc):
        self.name, self.path, self.loc = name, path, loc

    def finish(self) -> Column:
        raise NotImplementedError


class _NumericSink(_Sink):
    type = "numeric"

    def __init__(self, name, path, loc):
        super().__init__(name, path, loc)
        self.out = _NpyFile(path, np.float64)

    def add(self, arr: pa.Array) -> None:
        v = _float64(arr)
        if np.isinf(v).any():
            raise invalid([*self.loc, self.name], f"column {self.name!r}: a numeric value is infinite; use a finite "
                          "number or leave it empty")
        self.out.append(v)

    def finish(self) -> Column:
        self.out.close()
        return Column(self.name, self.type, _load(self.path))


class _BooleanSink(_NumericSink):
    type = "boolean"

    def add(self, arr: pa.Array) -> None:
        v = _float64(arr)
        if not pa.types.is_boolean(arr.type) and not np.isin(v[~np.isnan(v)], (0.0, 1.0)).all():
            raise invalid(["types", self.name], f"column {self.name!r} was declared boolean but holds numbers other "
                          "than 0 and 1")
        self.out.append(v)


class _DatetimeSink(_Sink):
    def __init__(self, name, path, loc):
        super().__init__(name, path, loc)
        self.out = _NpyFile(path, "datetime64[us]")

    def add(self, arr: pa.Array) -> None:
        t = arr.type
        if pa.types.is_timestamp(t) and t.tz is not None:
            arr = pc.cast(arr, pa.timestamp("us", tz="UTC")).cast(pa.timestamp("us"))  # UTC wall time
        v = pc.cast(arr, pa.timestamp("us")).cast(pa.int64()).fill_null(np.iinfo(np.int64).min)  # NaT
        self.out.append(v.to_numpy(zero_copy_only=False).view("datetime64[us]"))

    def finish(self) -> Column:
        self.out.close()
        return Column(self.name, "datetime", _load(self.path))


class _TextSink(_Sink):
    """Dictionary codes per batch; at the end one sorted vocabulary decides the type and the stored values."""

    def __init__(self, name, path, loc, forced: str | None):
        super().__init__(name, path, loc)
        self.forced = forced
        self.out = _NpyFile(path, np.int32)
        self.dicts: list[pa.Array] = []
        self.rows: list[int] = []
        self.dict_lengths: list[int] = []

    def add(self, arr: pa.Array) -> None:
        if not pa.types.is_dictionary(arr.type):
            if not _is_text(arr.type):
                arr = pc.cast(arr, pa.string())
            arr = pc.dictionary_encode(arr)
        dictionary = arr.dictionary if arr.dictionary.type == pa.string() else pc.cast(arr.dictionary, pa.string())
        try:
            dictionary.validate(full=True)  # UTF-8, checked on the distinct values only
        except pa.ArrowInvalid:
            raise invalid([*self.loc, self.name], f"column {self.name!r} is not valid UTF-8 text; re-encode the "
                          "file as UTF-8") from None
        codes = pc.cast(arr.indices, pa.int32()).fill_null(-1).to_numpy(zero_copy_only=False)
        self.out.append(codes)
        self.dicts.append(dictionary)
        self.rows.append(len(arr))
        self.dict_lengths.append(len(dictionary))

    def finish(self) -> Column:
        self.out.close()
        merged = pa.concat_arrays(self.dicts) if self.dicts else pa.array([], pa.string())
        uniq = pc.unique(merged).drop_null()
        vocab = uniq.take(pc.array_sort_indices(uniq))
        del self.dicts
        # the batch dictionaries point into the sorted vocabulary: remap each batch's codes in place
        glob = pc.index_in(merged, value_set=vocab).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
        codes = np.load(self.path, mmap_mode="r+")
        row = pos = 0
        for n_rows, n_dict in zip(self.rows, self.dict_lengths, strict=True):
            lut = np.append(glob[pos:pos + n_dict], np.int32(-1))  # code -1 (missing) stays -1
            for a in range(row, row + n_rows, _REMAP_ROWS):
                b = min(a + _REMAP_ROWS, row + n_rows)
                codes[a:b] = lut[codes[a:b]]
            row, pos = row + n_rows, pos + n_dict
        codes.flush()
        del codes
        return self._typed(vocab.to_pylist(), vocab)

    def _typed(self, vocab: list[str], vocab_arr: pa.Array) -> Column:
        name, forced = self.name, self.forced
        words = set(vocab)
        if forced == "categorical":
            return Column(name, "categorical", _load(self.path), vocab)
        if forced == "numeric":
            try:
                lut = _float64(pc.cast(vocab_arr, pa.float64()))
            except (pa.ArrowInvalid, ValueError):
                raise invalid(["types", name], f"column {name!r} was declared numeric but holds non-numeric "
                              "text") from None
            if np.isinf(lut).any():
                raise invalid([*self.loc, name], f"column {name!r}: a numeric value is infinite; use a finite "
                              "number or leave it empty")
            return self._mapped("numeric", lut, np.float64)
        if forced == "boolean" or (forced is None and words and words <= set(TRUE_TOKENS + FALSE_TOKENS)):
            if forced and words <= {"0", "1"}:
                return self._mapped("boolean", np.array([float(s) for s in vocab]), np.float64)
            if not words <= set(TRUE_TOKENS + FALSE_TOKENS):
                raise invalid(["types", name], f"column {name!r} was declared boolean but holds values other than "
                              "true/false/yes/no (or 0/1)")
            trues = [s for s in vocab if s in TRUE_TOKENS]
            falses = [s for s in vocab if s in FALSE_TOKENS]
            labels = None
            if len(trues) == 1 and len(falses) == 1 and not {s.lower() for s in vocab} & {"true", "false"}:
                labels = [falses[0], trues[0]]  # a yes/no column: labels come back as spelled
            col = self._mapped("boolean", np.array([1.0 if s in TRUE_TOKENS else 0.0 for s in vocab]), np.float64)
            col.labels = labels
            return col
        if forced == "datetime" or (forced is None and vocab and _all_iso(vocab_arr)):
            return self._mapped("datetime", _datetimes(name, vocab_arr), "datetime64[us]")
        return Column(name, "categorical", _load(self.path), vocab)

    def _mapped(self, typ: str, lut: np.ndarray, dtype) -> Column:
        """Replace the codes file by ``lut[codes]`` (missing: NaN / NaT), step by step."""
        missing = np.array([np.datetime64("NaT", "us") if typ == "datetime" else np.nan], dtype=dtype)
        lut = np.concatenate([np.asarray(lut, dtype=dtype), missing])
        codes = np.load(self.path, mmap_mode="r")
        tmp = self.path.with_suffix(".typed")
        out = _NpyFile(tmp, dtype)
        for a in range(0, len(codes), _REMAP_ROWS):
            out.append(lut[codes[a:a + _REMAP_ROWS]])
        out.close()
        del codes
        os.replace(tmp, self.path)
        return Column(self.name, typ, _load(self.path))


def _all_iso(vocab: pa.Array) -> bool:
    return bool(pc.all(pc.match_substring_regex(vocab, ISO_DATETIME)).as_py())


def _datetimes(name: str, vocab: pa.Array) -> np.ndarray:
    """datetime64[us] of each vocabulary entry (Arrow's ISO 8601 parser; Python's for mixed zones)."""
    for target in (pa.timestamp("us"), pa.timestamp("us", tz="UTC")):
        try:
            v = pc.cast(vocab, target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        if v.type.tz is not None:
            v = v.cast(pa.timestamp("us"))
        return v.cast(pa.int64()).to_numpy(zero_copy_only=False).view("datetime64[us]")
    try:
        return to_datetime64(np.asarray(vocab.to_pylist(), dtype=object))
    except ValueError as exc:
        raise invalid(["types", name], f"column {name!r} was declared datetime but {exc}") from None


def _load(path: Path) -> np.ndarray:
    return np.load(path, mmap_mode="r", allow_pickle=False)


def _sink(name: str, t: pa.DataType, forced: str | None, path: Path, loc) -> _Sink:
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        raise invalid([*loc, name], f"column {name!r} is not valid UTF-8 text; re-encode the file as UTF-8")
    temporal = pa.types.is_timestamp(t) or pa.types.is_date(t)
    boolean = pa.types.is_boolean(t)
    if not (_is_text(t) or _numeric_like(t) or temporal or boolean):
        raise invalid([*loc, name], f"column {name!r} has the type {t}, which is not supported (numbers, text, "
                      "booleans, dates and timestamps are)")
    if _is_text(t) or forced == "categorical":
        return _TextSink(name, path, loc, forced)
    if forced == "numeric" or (forced is None and _numeric_like(t)):
        if temporal:
            raise invalid(["types", name], f"column {name!r} was declared numeric but holds {t} values")
        return _NumericSink(name, path, loc)
    if forced == "boolean" or (forced is None and boolean):
        if temporal:
            raise invalid(["types", name], f"column {name!r} was declared boolean but holds {t} values")
        return _BooleanSink(name, path, loc)
    if not temporal:
        raise invalid(["types", name], f"column {name!r} was declared datetime but holds {t} values")
    return _DatetimeSink(name, path, loc)


# ----------------------------------------------------------------------------------------------
# Batches -> column files
# ----------------------------------------------------------------------------------------------
class Writer:
    """Record batches -> one column file per column in ``staging``; ``finish`` returns the typed columns."""

    def __init__(self, schema: pa.Schema, staging: Path, forced: Mapping[str, str], loc):
        names = [str(n) for n in schema.names]
        self.unnamed_first = bool(names) and not names[0].strip()
        self.index_candidate = bool(names) and names[0].strip() in PANDAS_INDEX_NAMES
        checked = check_header(["\0index", *names[1:]] if self.unnamed_first else names, [*loc, "header"])
        if self.unnamed_first:
            checked[0] = ""
        check_forced(forced, checked, ["query", "types"])
        self.staging, self.loc, self.n_rows = staging, loc, 0
        self.sinks = [_sink(n, f.type, forced.get(n), staging / f"s{j}.npy", loc)
                      for j, (n, f) in enumerate(zip(checked, schema, strict=True))]
        self.is_index = self.index_candidate and pa.types.is_integer(schema.field(0).type)

    def add(self, batch: pa.RecordBatch) -> None:
        if self.is_index:  # a pandas index holds 0..n-1
            first = batch.column(0)
            self.is_index = not first.null_count and np.array_equal(
                first.to_numpy(zero_copy_only=False), np.arange(self.n_rows, self.n_rows + len(first)))
        for sink, arr in zip(self.sinks, batch.columns, strict=True):
            sink.add(arr)
        self.n_rows += batch.num_rows

    def finish(self) -> Table:
        sinks, notes = self.sinks, []
        if self.n_rows == 0:
            raise invalid(self.loc, "the table has a header but no data rows")
        if self.is_index:
            notes.append(f"the first column (unnamed, holding 0..{self.n_rows - 1}) is a pandas index and was "
                         "dropped")
            sinks[0].out.close()
            sinks = sinks[1:]
            if not sinks:
                raise invalid(self.loc, "the table has no columns besides a pandas index")
        elif self.unnamed_first:
            raise invalid([*self.loc, "header"], "column 1 has an empty name")
        out = Table(notes=notes)
        for k, sink in enumerate(sinks):
            col = sink.finish()
            final = self.staging / f"c{k}.npy"
            os.replace(sink.path, final)
            col.values = np.load(final, allow_pickle=False)  # read once, in memory, one column at a time: the
            col.described = col.schema()  # record's summaries, without the file's pages mapped into the process
            col.values = _load(final)
            out.append(col)
        for p in self.staging.glob("s*.npy"):
            p.unlink()
        return out


__all__ = ["Writer"]
