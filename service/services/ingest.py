"""Streaming ingestion of CSV and Parquet files with Apache Arrow, straight into the stored column files.

The request body is appended to a temporary file (``BodySpool``) that the parser follows while it arrives.
CSV: cut into pieces of ``BLOCK_SIZE`` bytes at line breaks outside quotes; the first piece (with the header)
settles the column types; the next ones are parsed by ``pyarrow.csv`` with those types, ``pyarrow.cpu_count()``
pieces at once (each converted for storage where it was parsed, ``Writer.prepare``), while this thread appends
the previous ones, in order (``Writer.commit``).  Parquet:
``ParquetFile.iter_batches`` once the body is complete (its footer comes last).  No Python work per cell, and
memory bounded by a few pieces whatever the file size (docs/decisions/data-ingestion.md).

Imported on first use only (Arrow starts threads; the training workers' forkserver must stay single-threaded).
"""

from __future__ import annotations

import io
import math
import mmap
import os
import re
import shutil
import tempfile
import threading
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from ..errors import invalid
from .column_files import Writer
from .tables import MISSING_TOKENS, Table
from .widths import check_width, csv_header_width_bytes

BLOCK_SIZE = 1 << 22  # bytes of CSV per Arrow parsing block
PARQUET_BATCH_ROWS = 1 << 16
USE_THREADS = True  # Arrow's thread pool (sized by pyarrow.cpu_count(); OMP_NUM_THREADS=1 makes it one thread)


# ----------------------------------------------------------------------------------------------
# The request body, spooled to a file that the parser reads while it grows
# ----------------------------------------------------------------------------------------------
class BodySpool:
    """A temporary file written by the request handler (``write``, then ``finish`` or ``fail``) and read, as it
    grows, by any number of ``reader()`` streams in other threads (a reader waits for more bytes or the end)."""

    def __init__(self, path: str | os.PathLike, *, complete: bool = False):
        """A new, empty spool file; with ``complete``, the existing file at ``path`` as a finished spool."""
        self.path = str(path)
        self._cond = threading.Condition()
        self.error: BaseException | None = None
        self._wake = math.inf  # the size at which ``write`` wakes the readers
        self.done = complete
        self.size = os.path.getsize(self.path) if complete else 0
        self._fh = None if complete else open(self.path, "wb", buffering=0)  # noqa: SIM115 - closed by _close

    def write(self, chunk: bytes) -> None:
        self._fh.write(chunk)
        with self._cond:
            self.size += len(chunk)
            if self.size >= self._wake:  # a reader waits for this many bytes
                self._wake = math.inf
                self._cond.notify_all()

    def finish(self) -> None:
        self._close(None)

    def fail(self, exc: BaseException) -> None:
        self._close(exc)

    def _close(self, exc: BaseException | None) -> None:
        if self._fh is not None and not self._fh.closed:
            self._fh.close()
        with self._cond:
            self.done, self.error = True, exc
            self._cond.notify_all()

    def wait(self, pos: int, want: int = 1) -> int:
        """Bytes available past ``pos`` once there are ``want`` of them or the body is complete (0 at the end);
        raises when the upload failed.  ``write`` wakes the readers only once the smallest of their wants is
        there: a reader waiting for a whole piece is not woken (and handed the GIL) for every chunk."""
        end = pos + max(want, 1)
        with self._cond:
            while self.size < end and not self.done:
                self._wake = min(self._wake, end)
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
    return BodySpool(path, complete=True)


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
    # text columns keep the missing tokens as text (matching them in every text cell costs about a tenth of the
    # parse); column_files.Writer maps them to missing on the distinct values (``text_missing``)
    convert = pacsv.ConvertOptions(
        null_values=list(MISSING_TOKENS), strings_can_be_null=False, quoted_strings_can_be_null=True,
        true_values=["true", "True", "TRUE"], false_values=["false", "False", "FALSE"],
        column_types=column_types, check_utf8=False,  # checked on each text column's distinct values instead
    )
    return read, parse, convert


def _fresh(staging: Path) -> None:
    for p in staging.iterdir():
        p.unlink()


def _quotes(view: memoryview) -> int:
    return int(np.count_nonzero(np.frombuffer(view, np.uint8) == 0x22))


def _safe_cut(buf, n: int, start: int = 0) -> int:
    """The end of the last complete line of ``buf[start:n]`` outside quotes (an even number of '"' between
    ``start`` and it), or -1; ``buf``: bytes, a bytearray or a memory map."""
    i = buf.rfind(b"\n", start, n)
    if i < 0:
        return -1
    if buf.find(b'"', start, i) < 0:
        return i + 1
    view = memoryview(buf)
    try:
        quotes = _quotes(view[start:i])
        while quotes % 2:
            j = buf.rfind(b"\n", start, i)
            if j < 0:
                return -1
            quotes -= _quotes(view[j:i])
            i = j
    finally:
        view.release()
    return i + 1


def _cut(buf, n: int, start: int) -> tuple[int, bool]:
    """``_safe_cut`` and whether ``buf[start:cut]`` holds a quote; without quotes (the common case) the piece is
    scanned once."""
    i = buf.rfind(b"\n", start, n)
    if i >= 0 and buf.find(b'"', start, i) < 0:
        return i + 1, False
    cut = _safe_cut(buf, n, start)
    return cut, cut >= 0 and buf.find(b'"', start, cut) >= 0


def _available(spool: BodySpool, pos: int, want: int) -> int:
    """Bytes of the body past ``pos``, once there are at least ``want`` of them or the body is complete."""
    return max(spool.wait(pos, want), 0)


def _pieces(spool: BodySpool, size: int) -> Iterator[tuple[memoryview, bool]]:
    """The body in pieces of about ``size`` bytes, each ending at a line break outside quoted values (a quoted
    value may hold line breaks), as the body arrives: views of the spool file mapped into memory (no copy; the
    pages are those the body was written to), each with whether it holds a quote at all."""
    fd = os.open(spool.path, os.O_RDONLY)
    try:
        pos, want = 0, size
        while True:
            avail = _available(spool, pos, want)
            if avail <= 0:
                return
            n = min(avail, want)
            base = pos - pos % mmap.ALLOCATIONGRANULARITY
            m = mmap.mmap(fd, pos + n - base, prot=mmap.PROT_READ, offset=base)
            a = pos - base
            last = avail < want  # the rest of the body
            cut, has_quote = (a + n, m.find(b'"', a, a + n) >= 0) if last else _cut(m, a + n, a)
            if cut < 0:  # one quoted value longer than a piece: map more
                want *= 2
                continue
            yield memoryview(m)[a:cut], has_quote
            if last:
                return
            pos, want = pos + cut - a, size
    finally:
        os.close(fd)


def _read_piece(piece, has_quote: bool, names: list[str] | None, column_types: dict) -> pa.Table:
    read, parse, convert = _csv_options(column_types)
    read.use_threads, read.block_size = False, len(piece) + 1  # one block; the pieces are parsed in parallel
    parse.newlines_in_values = has_quote  # a line break inside a value needs quotes: cheaper without
    if names is not None:
        read.column_names = names
    return pacsv.read_csv(pa.BufferReader(piece), read_options=read, parse_options=parse, convert_options=convert)


def _prepared(writer: Writer, piece, has_quote: bool, names: list[str], column_types: dict) -> list:
    """A piece parsed and its batches converted and summarised (``Writer.prepare``), in a worker thread."""
    return [writer.prepare(b) for b in _read_piece(piece, has_quote, names, column_types).to_batches()]


def _workers() -> int:
    return max(1, pa.cpu_count()) if USE_THREADS else 1


def ingest_csv(spool: BodySpool, staging: Path, forced_types: Mapping[str, str] | None = None, *,
               max_columns: int | None = None) -> Table:
    """Parse the CSV in ``spool`` (while it arrives) into column files in ``staging``; 422 on any defect.

    The body is cut into pieces of ``BLOCK_SIZE`` bytes at line breaks outside quotes; the first piece (with
    the header) settles the column types, the next ones are parsed and converted with those types on
    ``pyarrow.cpu_count()`` threads while this thread appends the previous ones, in order.  A piece that does not fit a
    type (a decimal after integers, text after numbers) stops the read, and the body is read again with a
    wider type for that column.  A header wider than ``max_columns`` is a 422 before anything is parsed.
    """
    forced = dict(forced_types or {})
    column_types: dict = {c: pa.string() for c in forced}
    names: list[str] = []
    for _ in range(1000):
        try:
            return _ingest_csv_once(spool, staging, forced, column_types, names, max_columns)
        except pa.ArrowInvalid as exc:
            wider = _widen(exc, spool, names, column_types, forced)
        except UnicodeDecodeError:
            raise invalid(["body"], "the CSV is not valid UTF-8; re-encode the file as UTF-8") from None
        column_types.update(wider)
        _fresh(staging)
    raise invalid(["body"], "the CSV's column types could not be settled")  # pragma: no cover


def _ingest_csv_once(spool, staging, forced, column_types, names_out: list, max_columns: int | None) -> Table:
    pieces = _pieces(spool, BLOCK_SIZE)
    first, has_quote = next(pieces, (b"", False))
    if max_columns is not None:
        check_width(csv_header_width_bytes(first, max_columns), max_columns, ["body", "header"], at_least=True)
    table = _read_piece(first, has_quote, None, column_types)
    names = names_out[:] = table.column_names
    writer = Writer(table.schema, staging, forced, ["body"], MISSING_TOKENS)  # checks the header (check_header)
    types = dict(zip(names, table.schema.types, strict=True))
    for batch in table.to_batches():
        writer.add(batch)
    del table
    workers = _workers()
    with ThreadPoolExecutor(workers, thread_name_prefix="orchard-csv") as pool:
        pending: deque = deque()
        try:
            for piece, has_quote in pieces:
                pending.append(pool.submit(_prepared, writer, piece, has_quote, names, types))
                while len(pending) > workers:
                    for prepared in pending.popleft().result():
                        writer.commit(prepared)
            while pending:
                for prepared in pending.popleft().result():
                    writer.commit(prepared)
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


def ingest_parquet(spool: BodySpool, staging: Path, forced_types: Mapping[str, str] | None = None, *,
                   max_columns: int | None = None) -> Table:
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
    if max_columns is not None:
        check_width(len(schema.names), max_columns, ["body"])
    try:
        writer = Writer(schema, staging, dict(forced_types or {}), ["body"])  # checks the header
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
           "BLOCK_SIZE"]
