"""Streaming ingestion of CSV and Parquet files with Apache Arrow, straight into the stored column files.

CSV: ``pyarrow.csv.open_csv`` parses the body in blocks of ``BLOCK_SIZE`` bytes, while it is still arriving
(``BodySpool``: the request handler appends, the parser follows).  Parquet: ``ParquetFile.iter_batches`` once
the body is complete (its footer comes last).  Each record batch is converted column by column with Arrow
compute kernels and appended to one ``.npy`` file per column in the dataset's staging directory: no Python
work per cell, and memory bounded by a few blocks whatever the file size.  Text columns are written as
dictionary codes per batch; at the end the batch dictionaries are merged into one sorted vocabulary, the codes
remapped, and the vocabulary decides the type (yes/no -> boolean, ISO 8601 -> datetime, forced types) on the
distinct values only (docs/decisions/data-ingestion.md).

Imported on first use only (Arrow starts threads; the training workers' forkserver must stay single-threaded).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import struct
import tempfile
import threading
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from core.preprocessing.table import to_datetime64

from ..errors import invalid
from .tables import (
    FALSE_TOKENS,
    ISO_DATETIME,
    MISSING_TOKENS,
    PANDAS_INDEX_NAMES,
    TRUE_TOKENS,
    Column,
    Table,
    check_forced,
    check_header,
)

BLOCK_SIZE = 1 << 22  # bytes of CSV per Arrow parsing block
PARQUET_BATCH_ROWS = 1 << 16
USE_THREADS = True  # Arrow's thread pool (sized by pyarrow.cpu_count(); OMP_NUM_THREADS=1 makes it one thread)
_HEADER_BYTES = 128  # .npy header, rewritten with the final row count
_REMAP_ROWS = 1 << 20  # rows per step when codes are remapped or converted at the end


# ----------------------------------------------------------------------------------------------
# The request body, spooled to a file that the parser reads while it grows
# ----------------------------------------------------------------------------------------------
class BodySpool:
    """A temporary file written by the request handler (``write``, then ``finish`` or ``fail``) and read, as it
    grows, by any number of ``reader()`` streams in other threads (a reader waits for more bytes or the end)."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        self._fh = open(self.path, "wb", buffering=0)  # noqa: SIM115 - closed by finish/fail
        self._cond = threading.Condition()
        self.size = 0
        self.done = False
        self.error: BaseException | None = None

    def write(self, chunk: bytes) -> None:
        self._fh.write(chunk)
        with self._cond:
            self.size += len(chunk)
            self._cond.notify_all()

    def finish(self) -> None:
        self._close(None)

    def fail(self, exc: BaseException) -> None:
        self._close(exc)

    def _close(self, exc: BaseException | None) -> None:
        if not self._fh.closed:
            self._fh.close()
        with self._cond:
            self.done, self.error = True, exc
            self._cond.notify_all()

    def wait(self, pos: int) -> int:
        """Bytes available past ``pos`` (0 at the end); raises when the upload failed."""
        with self._cond:
            while self.size <= pos and not self.done:
                self._cond.wait()
            if self.error is not None:
                raise _UploadAborted() from self.error
            return self.size - pos

    def reader(self) -> _SpoolReader:
        return _SpoolReader(self)


class _UploadAborted(Exception):
    """The body stopped arriving (too large, client gone): the parser stops; the handler reports why."""


class _SpoolReader(io.RawIOBase):
    def __init__(self, spool: BodySpool):
        super().__init__()
        self._spool = spool
        self._fd = os.open(spool.path, os.O_RDONLY)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        avail = self._spool.wait(self._pos)
        if avail <= 0:
            return 0
        n = os.preadv(self._fd, [memoryview(b)[: min(len(b), avail)]], self._pos)
        self._pos += n
        return n

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()


def spool_file(path: str | os.PathLike) -> BodySpool:
    """A finished spool over an existing file (multipart parts, tests)."""
    spool = BodySpool.__new__(BodySpool)
    spool.path, spool._cond, spool.error, spool.done = str(path), threading.Condition(), None, True
    spool.size = os.path.getsize(path)
    spool._fh = io.BytesIO()
    spool._fh.close()
    return spool


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
class _Retry(Exception):
    def __init__(self, column: int, wider: pa.DataType):
        self.column, self.wider = column, wider


def check_columns(names: Sequence[str], loc) -> list[str]:
    """The one check of a table's header, once it is known (before any row is read): names, duplicates."""
    return check_header(names, loc)


class _Writer:
    """Record batches -> one column file per column in ``staging``; ``finish`` returns the typed columns."""

    def __init__(self, schema: pa.Schema, staging: Path, forced: Mapping[str, str], loc):
        names = [str(n) for n in schema.names]
        self.unnamed_first = bool(names) and not names[0].strip()
        self.index_candidate = bool(names) and names[0].strip() in PANDAS_INDEX_NAMES
        checked = check_columns(["\0index", *names[1:]] if self.unnamed_first else names, [*loc, "header"])
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


# ----------------------------------------------------------------------------------------------
# CSV and Parquet
# ----------------------------------------------------------------------------------------------
_WIDER = {"null": pa.float64(), "int64": pa.float64(), "date32[day]": pa.timestamp("us")}
_CONV_ERR = re.compile(r"In CSV column #(\d+): (?:Row #\d+: )?CSV conversion error to ([^:]+):")


def _csv_options(column_types: dict, bad_rows: list | None = None):
    """Arrow's CSV options; with ``bad_rows`` (the error path only: a Python callback per bad row) the first
    row of the wrong width is recorded for the error message."""
    def on_bad_row(row):
        bad_rows.append(row)
        return "error"

    read = pacsv.ReadOptions(block_size=BLOCK_SIZE, use_threads=USE_THREADS)
    parse = pacsv.ParseOptions(newlines_in_values=True,
                               **({"invalid_row_handler": on_bad_row} if bad_rows is not None else {}))
    convert = pacsv.ConvertOptions(
        null_values=list(MISSING_TOKENS), strings_can_be_null=True, quoted_strings_can_be_null=True,
        true_values=["true", "True", "TRUE"], false_values=["false", "False", "FALSE"],
        column_types=column_types, check_utf8=False,  # checked on each text column's distinct values instead
    )
    return read, parse, convert


def _fresh(staging: Path) -> None:
    for p in staging.iterdir():
        p.unlink()


def _safe_cut(buf: bytearray, n: int) -> int:
    """The end of the last complete line of ``buf[:n]`` outside quotes (an even number of '"' before it), or -1."""
    i = buf.rfind(b"\n", 0, n)
    if i < 0:
        return -1
    quotes = buf.count(b'"', 0, i)
    while quotes % 2:
        j = buf.rfind(b"\n", 0, i)
        if j < 0:
            return -1
        quotes -= buf.count(b'"', j, i)
        i = j
    return i + 1


def _pieces(spool: BodySpool, size: int) -> Iterator[tuple[memoryview, bool]]:
    """The body in pieces of about ``size`` bytes, each ending at a line break outside quoted values (a quoted
    value may hold line breaks), read as the body arrives, each into a buffer of its own (no further copy);
    with each piece, whether it holds a quote at all."""
    with spool.reader() as src:
        carry = b""
        while True:
            buf = bytearray(size + len(carry))
            buf[: len(carry)] = carry
            view, n = memoryview(buf), len(carry)
            while n < len(buf):
                k = src.readinto(view[n:])
                if not k:
                    break
                n += k
            cut = n if n < len(buf) else _safe_cut(buf, n)  # the end of the body, or a safe line break
            if cut < 0:  # one quoted value longer than a piece: read more
                carry, size = bytes(view[:n]), size * 2
                continue
            if cut:
                yield view[:cut], buf.find(b'"', 0, cut) >= 0
            if n < len(buf):
                return
            carry = bytes(view[cut:n])


def _read_piece(piece, has_quote: bool, names: list[str] | None, column_types: dict) -> pa.Table:
    read, parse, convert = _csv_options(column_types)
    read.use_threads, read.block_size = False, len(piece) + 1  # one block; the pieces are parsed in parallel
    parse.newlines_in_values = has_quote  # a line break inside a value needs quotes: cheaper without
    if names is not None:
        read.column_names = names
    return pacsv.read_csv(pa.BufferReader(piece), read_options=read, parse_options=parse, convert_options=convert)


def _workers() -> int:
    return max(1, pa.cpu_count()) if USE_THREADS else 1


def ingest_csv(spool: BodySpool, staging: Path, forced_types: Mapping[str, str] | None = None) -> Table:
    """Parse the CSV in ``spool`` (while it arrives) into column files in ``staging``; 422 on any defect.

    The body is cut into pieces of ``BLOCK_SIZE`` bytes at line breaks outside quotes; the first piece (with
    the header) settles the column types, the next ones are parsed with those types on ``pyarrow.cpu_count()``
    threads while this thread converts and writes the previous ones, in order.  A piece that does not fit a
    type (a decimal after integers, text after numbers) stops the read, and the body is read again with a
    wider type for that column.
    """
    forced = dict(forced_types or {})
    column_types: dict = {c: pa.string() for c in forced}
    names: list[str] = []
    for _ in range(1000):
        try:
            return _ingest_csv_once(spool, staging, forced, column_types, names)
        except pa.ArrowInvalid as exc:
            wider = _widen(exc, spool, names, column_types, forced)
        except UnicodeDecodeError:
            raise invalid(["body"], "the CSV is not valid UTF-8; re-encode the file as UTF-8") from None
        column_types.update(wider)
        _fresh(staging)
    raise invalid(["body"], "the CSV's column types could not be settled")  # pragma: no cover


def _ingest_csv_once(spool, staging, forced, column_types, names_out: list) -> Table:
    pieces = _pieces(spool, BLOCK_SIZE)
    first, has_quote = next(pieces, (b"", False))
    table = _read_piece(first, has_quote, None, column_types)
    names = names_out[:] = table.column_names
    writer = _Writer(table.schema, staging, forced, ["body"])  # the header is known: checked once, here
    types = dict(zip(names, table.schema.types, strict=True))
    for batch in table.to_batches():
        writer.add(batch)
    del table
    workers = _workers()
    with ThreadPoolExecutor(workers, thread_name_prefix="orchard-csv") as pool:
        pending: deque = deque()
        try:
            for piece, has_quote in pieces:
                pending.append(pool.submit(_read_piece, piece, has_quote, names, types))
                while len(pending) > workers:
                    for batch in pending.popleft().result().to_batches():
                        writer.add(batch)
            while pending:
                for batch in pending.popleft().result().to_batches():
                    writer.add(batch)
        finally:
            for f in pending:
                f.cancel()
    return writer.finish()


def _widen(exc: pa.ArrowInvalid, spool: BodySpool, names: list[str], column_types: dict, forced) -> dict:
    """The wider type of the column that did not fit, or a 422 describing the defect."""
    msg = str(exc)
    if msg.startswith("CSV parse error") and "columns" in msg:  # find the row, for the message
        bad_rows: list = []
        read, parse, convert = _csv_options(column_types, bad_rows)
        read.use_threads = False
        try:
            with spool.reader() as src:
                pacsv.read_csv(src, read_options=read, parse_options=parse, convert_options=convert)
        except pa.ArrowInvalid:
            pass
        if bad_rows:
            row = bad_rows[0]
            where = f"line {row.number}" if row.number is not None else "a row"
            raise invalid(["body"], f"{where} has {row.actual_columns} fields, but the header has "
                          f"{row.expected_columns}: {row.text[:80]!r}") from None
    m = _CONV_ERR.search(msg)
    if m is None or not names:
        if "Empty CSV" in msg:
            raise invalid(["body"], "the CSV is empty; it needs a header row and at least one data row") from None
        raise invalid(["body"], f"malformed CSV: {msg}") from None
    col = names[int(m.group(1))]
    if col in forced:
        raise invalid(["body", col], f"column {col!r}: {msg}") from None
    current = column_types.get(col)
    return {col: pa.string() if current is not None else _WIDER.get(m.group(2).strip(), pa.string())}


def ingest_parquet(spool: BodySpool, staging: Path, forced_types: Mapping[str, str] | None = None) -> Table:
    """Read the Parquet file in ``spool`` (once complete: its footer comes last) batch by batch."""
    import pyarrow.parquet as pq

    while spool.wait(spool.size) > 0 or not spool.done:  # raises if the upload failed
        pass
    try:
        pf = pq.ParquetFile(spool.path)
        batches = pf.iter_batches(batch_size=PARQUET_BATCH_ROWS, use_threads=USE_THREADS)
        schema = pf.schema_arrow
    except (pa.ArrowException, OSError) as exc:
        raise invalid(["body"], f"the body is not a readable Parquet file: {exc}") from None
    try:
        writer = _Writer(schema, staging, dict(forced_types or {}), ["body"])  # the header is known: checked once
        for batch in batches:
            writer.add(batch)
        return writer.finish()
    except (pa.ArrowException, OSError) as exc:
        raise invalid(["body"], f"the Parquet file could not be read: {exc}") from None


def _in_memory(parse, path, forced_types) -> Table:
    staging = Path(tempfile.mkdtemp(prefix="orchard-parse-"))
    try:
        table = parse(spool_file(path), staging, forced_types)
        for c in table:
            c.values = np.array(c.values)  # off the files, which are removed
        return table
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def parse_csv_file(path, forced_types: Mapping[str, str] | None = None) -> Table:
    """Parse a CSV file (header row required) into typed columns in memory; 422 on any defect."""
    return _in_memory(ingest_csv, path, forced_types)


def parse_parquet_file(path, forced_types: Mapping[str, str] | None = None) -> Table:
    """Parse a Parquet file into typed columns in memory; 422 when it is not Parquet or holds unsupported types."""
    return _in_memory(ingest_parquet, path, forced_types)


__all__ = ["BodySpool", "spool_file", "ingest_csv", "ingest_parquet", "parse_csv_file", "parse_parquet_file",
           "check_columns", "BLOCK_SIZE"]
