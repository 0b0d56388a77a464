"""Column files written batch by batch: Arrow record batches -> one ``.npy`` file per column, typed.

``Writer`` checks the header once (``check_header``), then takes record batches (from CSV pieces or Parquet
row groups, service.services.ingest) and hands each column's Arrow array to its sink: numbers, booleans and
timestamps are converted with Arrow kernels and appended; text is appended as dictionary codes, and at the end
the batch dictionaries are merged into one sorted vocabulary, the codes remapped in place, and the vocabulary
(distinct values only) decides the type: yes/no -> boolean, ISO 8601 -> datetime, forced types
(docs/decisions/data-ingestion.md). Each sink keeps its column's summary as the batches pass (counts, extremes,
mean and variance merged batch by batch), so no column is read back to describe it.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.preprocessing.table import to_datetime64

from ..errors import invalid
from ..storage.files import sync_path
from .tables import (
    FALSE_TOKENS,
    ISO_DATETIME,
    PANDAS_INDEX_NAMES,
    TRUE_TOKENS,
    Column,
    Table,
    check_forced,
    check_header,
    iso_text,
)

_HEADER_BYTES = 128  # .npy header, rewritten with the final row count
_REMAP_ROWS = 1 << 20  # rows per step when codes are remapped or converted at the end
_FLUSH_BYTES = 32 << 20  # column bytes appended between background flushes to disk


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

    def flush(self) -> None:
        self._fh.flush()

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
# Summaries kept while the batches pass (Column.summary's figures, without reading the column back)
# ----------------------------------------------------------------------------------------------
class _NumericStats:
    """Missing count, min, max, mean and population std of float64 batches (NaN = missing); batch moments are
    merged with Chan et al.'s pairwise update, so the figures equal NumPy's on the whole column to rounding."""

    def __init__(self):
        self.n = self.n_missing = 0
        self.min = self.max = math.nan
        self.mean = self.m2 = 0.0

    def add(self, v: np.ndarray) -> tuple[float, float]:
        """Adds a batch; returns its (min, max) over present values (NaN, NaN when none)."""
        part = self.moments(v)
        self.merge(part)
        return part[2], part[3]

    @staticmethod
    def moments(v: np.ndarray) -> tuple:
        """A batch's (missing count, present count, min, max, mean, m2): any thread, merged in order by ``merge``."""
        miss = np.isnan(v)
        k = int(np.count_nonzero(miss))
        w = v[~miss] if k else v
        if not len(w):
            return k, 0, math.nan, math.nan, 0.0, 0.0
        lo, hi = float(w.min()), float(w.max())
        if math.isinf(lo) or math.isinf(hi):  # refused by the sink
            return k, 0, lo, hi, 0.0, 0.0
        mean = float(w.mean())
        d = w - mean
        m2 = float(np.square(d, out=d).sum())  # not np.dot: BLAS threads would spin for a small vector
        return k, len(w), lo, hi, mean, m2

    def merge(self, part: tuple) -> None:
        k, nb, lo, hi, mean, m2 = part
        self.n_missing += k
        if not nb:
            return
        n = self.n
        if n == 0:
            self.min, self.max, self.mean, self.m2 = lo, hi, mean, m2
        else:
            delta, tot = mean - self.mean, n + nb
            self.mean += delta * nb / tot
            self.m2 += m2 + delta * delta * n * nb / tot
            self.min, self.max = min(self.min, lo), max(self.max, hi)
        self.n += nb
        return lo, hi

    def summary(self) -> dict:
        if not self.n:
            return {"min": None, "max": None, "mean": None, "std": None}
        return {"min": self.min, "max": self.max, "mean": self.mean, "std": math.sqrt(max(self.m2, 0.0) / self.n)}


class _BooleanStats:
    def __init__(self):
        self.true = self.false = self.n_missing = 0

    def add(self, v: np.ndarray) -> int:
        """Adds a float64 batch (1, 0, NaN); returns how many of its present values are neither 0 nor 1."""
        part = self.moments(v)
        self.merge(part)
        return len(v) - sum(part)

    @staticmethod
    def moments(v: np.ndarray) -> tuple[int, int, int]:
        return int(np.count_nonzero(v == 1)), int(np.count_nonzero(v == 0)), int(np.count_nonzero(np.isnan(v)))

    def merge(self, part: tuple[int, int, int]) -> None:
        t, f, k = part
        self.true, self.false, self.n_missing = self.true + t, self.false + f, self.n_missing + k

    def summary(self, labels: list[str] | None = None) -> dict:
        out = {"true": self.true, "false": self.false}
        if labels:
            out["labels"] = list(labels)
        return out


class _DatetimeStats:
    def __init__(self):
        self.n_missing = 0
        self.min = self.max = None

    def add(self, v: np.ndarray) -> None:
        self.merge(self.moments(v))

    @staticmethod
    def moments(v: np.ndarray) -> tuple:
        miss = np.isnat(v)
        k = int(np.count_nonzero(miss))
        w = v[~miss] if k else v
        return (k, w.min(), w.max()) if len(w) else (k, None, None)

    def merge(self, part: tuple) -> None:
        k, lo, hi = part
        self.n_missing += k
        if lo is not None:
            self.min = lo if self.min is None else min(self.min, lo)
            self.max = hi if self.max is None else max(self.max, hi)

    def summary(self) -> dict:
        if self.min is None:
            return {"min": None, "max": None}
        return {"min": iso_text(self.min), "max": iso_text(self.max)}


def _described(name: str, typ: str, n_missing: int, summary: dict) -> dict:
    return {"name": name, "type": typ, "n_missing": int(n_missing), "summary": summary}


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
    """``prepare`` converts a batch's array and summarises it (any thread, several batches at once, no state
    touched); ``commit`` appends the result and merges its summary (in order, one thread)."""

    def __init__(self, name: str, path: Path, loc):
        self.name, self.path, self.loc = name, path, loc

    def add(self, arr: pa.Array) -> None:
        self.commit(self.prepare(arr))

    def finish(self) -> Column:
        raise NotImplementedError


class _NumericSink(_Sink):
    type = "numeric"

    def __init__(self, name, path, loc):
        super().__init__(name, path, loc)
        self.out = _NpyFile(path, np.float64)
        self.stats = _NumericStats()

    def prepare(self, arr: pa.Array) -> tuple:
        v = _float64(arr)
        part = _NumericStats.moments(v)
        if math.isinf(part[2]) or math.isinf(part[3]):
            raise invalid([*self.loc, self.name], f"column {self.name!r}: a numeric value is infinite; use a finite "
                          "number or leave it empty")
        return v, part

    def commit(self, prepared: tuple) -> None:
        v, part = prepared
        self.stats.merge(part)
        self.out.append(v)

    def finish(self) -> Column:
        self.out.close()
        return Column(self.name, self.type, _load(self.path),
                      described=_described(self.name, self.type, self.stats.n_missing, self.stats.summary()))


class _BooleanSink(_NumericSink):
    type = "boolean"

    def __init__(self, name, path, loc):
        super().__init__(name, path, loc)
        self.stats = _BooleanStats()

    def prepare(self, arr: pa.Array) -> tuple:
        v = _float64(arr)
        part = _BooleanStats.moments(v)
        if len(v) - sum(part) and not pa.types.is_boolean(arr.type):
            raise invalid(["types", self.name], f"column {self.name!r} was declared boolean but holds numbers other "
                          "than 0 and 1")
        return v, part


class _DatetimeSink(_Sink):
    def __init__(self, name, path, loc):
        super().__init__(name, path, loc)
        self.out = _NpyFile(path, "datetime64[us]")
        self.stats = _DatetimeStats()

    def prepare(self, arr: pa.Array) -> tuple:
        t = arr.type
        if pa.types.is_timestamp(t) and t.tz is not None:
            arr = pc.cast(arr, pa.timestamp("us", tz="UTC")).cast(pa.timestamp("us"))  # UTC wall time
        v = pc.cast(arr, pa.timestamp("us")).cast(pa.int64()).fill_null(np.iinfo(np.int64).min)  # NaT
        v = v.to_numpy(zero_copy_only=False).view("datetime64[us]")
        return v, _DatetimeStats.moments(v)

    def commit(self, prepared: tuple) -> None:
        v, part = prepared
        self.stats.merge(part)
        self.out.append(v)

    def finish(self) -> Column:
        self.out.close()
        return Column(self.name, "datetime", _load(self.path),
                      described=_described(self.name, "datetime", self.stats.n_missing, self.stats.summary()))


class _TextSink(_Sink):
    """Dictionary codes per batch; at the end one sorted vocabulary decides the type and the stored values.

    ``missing``: text values that stand for a missing value (a CSV's missing tokens, which the parser leaves as
    text in text columns: cheaper than matching them in every cell); they get code -1 at the end."""

    def __init__(self, name, path, loc, forced: str | None, missing: Iterable[str] = ()):
        super().__init__(name, path, loc)
        self.forced = forced
        self.missing = pa.array(list(missing), pa.string())
        self.out = _NpyFile(path, np.int32)
        self.dicts: list[pa.Array] = []
        self.rows: list[int] = []
        self.counts: list[np.ndarray] = []  # per batch: rows per dictionary entry, then the missing rows

    def prepare(self, arr: pa.Array) -> tuple:
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
        n = len(dictionary)  # the code of a missing value until the end (then -1): the last slot of each table
        codes = pc.cast(arr.indices, pa.int32()).fill_null(n).to_numpy(zero_copy_only=False)
        return codes, dictionary, np.bincount(codes, minlength=n + 1)

    def commit(self, prepared: tuple) -> None:
        codes, dictionary, counts = prepared
        self.out.append(codes)
        self.dicts.append(dictionary)
        self.rows.append(len(codes))
        self.counts.append(counts)

    def finish(self) -> Column:
        self.out.close()
        merged = pa.concat_arrays(self.dicts) if self.dicts else pa.array([], pa.string())
        uniq = pc.unique(merged).drop_null()
        if len(self.missing):
            uniq = uniq.filter(pc.invert(pc.is_in(uniq, value_set=self.missing)))
        vocab = uniq.take(pc.array_sort_indices(uniq))
        del self.dicts
        # the batch dictionaries point into the sorted vocabulary: remap each batch's codes, and count the rows of
        # each vocabulary entry (the last slot: missing)
        glob = pc.index_in(merged, value_set=vocab).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
        counts = np.zeros(len(vocab) + 1, dtype=np.int64)
        luts, pos = [], 0
        for c in self.counts:
            lut = np.append(glob[pos:pos + len(c) - 1], np.int32(-1))  # the batch's missing code -> -1
            np.add.at(counts, lut, c)
            luts.append(None if c[-1] == 0 and np.array_equal(lut[:-1], np.arange(len(c) - 1)) else lut)
            pos += len(c) - 1
        _remap(self.path, self.rows, luts)
        del self.counts
        return self._typed(vocab.to_pylist(), vocab, counts)

    def _typed(self, vocab: list[str], vocab_arr: pa.Array, counts: np.ndarray) -> Column:
        name, forced = self.name, self.forced
        words = set(vocab)
        if forced == "categorical":
            return self._categorical(vocab, counts)
        if forced == "numeric":
            try:
                lut = _float64(pc.cast(vocab_arr, pa.float64()))
            except (pa.ArrowInvalid, ValueError):
                raise invalid(["types", name], f"column {name!r} was declared numeric but holds non-numeric "
                              "text") from None
            if np.isinf(lut).any():
                raise invalid([*self.loc, name], f"column {name!r}: a numeric value is infinite; use a finite "
                              "number or leave it empty")
            return self._mapped("numeric", lut, np.float64, _NumericStats())
        if forced == "boolean" or (forced is None and words and words <= set(TRUE_TOKENS + FALSE_TOKENS)):
            if forced and words <= {"0", "1"}:
                return self._mapped("boolean", np.array([float(s) for s in vocab]), np.float64, _BooleanStats())
            if not words <= set(TRUE_TOKENS + FALSE_TOKENS):
                raise invalid(["types", name], f"column {name!r} was declared boolean but holds values other than "
                              "true/false/yes/no (or 0/1)")
            trues = [s for s in vocab if s in TRUE_TOKENS]
            falses = [s for s in vocab if s in FALSE_TOKENS]
            labels = None
            if len(trues) == 1 and len(falses) == 1 and not {s.lower() for s in vocab} & {"true", "false"}:
                labels = [falses[0], trues[0]]  # a yes/no column: labels come back as spelled
            return self._mapped("boolean", np.array([1.0 if s in TRUE_TOKENS else 0.0 for s in vocab]), np.float64,
                                _BooleanStats(), labels)
        if forced == "datetime" or (forced is None and vocab and _all_iso(vocab_arr)):
            return self._mapped("datetime", _datetimes(name, vocab_arr), "datetime64[us]", _DatetimeStats())
        return self._categorical(vocab, counts)

    def _categorical(self, vocab: list[str], counts: np.ndarray) -> Column:
        """Column.summary's figures for a categorical column, from the row counts of its categories."""
        present = counts[:-1]
        order = np.argsort(-present, kind="stable")[:5]
        summary = {"n_categories": len(vocab),
                   "top": [{"value": vocab[i], "count": int(present[i])} for i in order if present[i] > 0]}
        return Column(self.name, "categorical", _load(self.path), vocab,
                      described=_described(self.name, "categorical", counts[-1], summary))

    def _mapped(self, typ: str, lut: np.ndarray, dtype, stats, labels: list[str] | None = None) -> Column:
        """Replace the codes file by ``lut[codes]`` (missing: NaN / NaT), step by step, summarised on the way."""
        missing = np.array([np.datetime64("NaT", "us") if typ == "datetime" else np.nan], dtype=dtype)
        lut = np.concatenate([np.asarray(lut, dtype=dtype), missing])
        codes = np.load(self.path, mmap_mode="r")
        tmp = self.path.with_suffix(".typed")
        out = _NpyFile(tmp, dtype)
        for a in range(0, len(codes), _REMAP_ROWS):
            values = lut[codes[a:a + _REMAP_ROWS]]
            stats.add(values)
            out.append(values)
        out.close()
        del codes
        os.replace(tmp, self.path)
        summary = stats.summary(labels) if typ == "boolean" else stats.summary()
        return Column(self.name, typ, _load(self.path), labels=labels,
                      described=_described(self.name, typ, stats.n_missing, summary))


def _remap(path: Path, rows: list[int], luts: list[np.ndarray | None]) -> None:
    """``codes = lut[codes]`` in the int32 column file ``path``, batch by batch (``rows[i]`` rows use ``luts[i]``;
    None: already the final codes), read and written in steps of at most ``_REMAP_ROWS`` rows (no memory map:
    no synchronous flush)."""
    with open(path, "r+b", buffering=0) as fh:
        row = 0
        for n_rows, lut in zip(rows, luts, strict=True):
            if lut is None:
                row += n_rows
                continue
            for a in range(row, row + n_rows, _REMAP_ROWS):
                b = min(a + _REMAP_ROWS, row + n_rows)
                buf = np.empty(b - a, dtype=np.int32)
                fh.seek(_HEADER_BYTES + 4 * a)
                fh.readinto(memoryview(buf).cast("B"))
                fh.seek(_HEADER_BYTES + 4 * a)
                fh.write(memoryview(lut[buf]).cast("B"))
            row += n_rows


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


def _flush_to_disk(paths: list[Path]) -> None:
    """Writes the column files' pages to disk while the upload goes on (a thread of its own, the GIL released), so
    the fsync that publishes the dataset finds little left to write; files already removed are skipped."""
    for path in paths:
        sync_path(path, data_only=True, best_effort=True)


def _load(path: Path) -> np.ndarray:
    return np.load(path, mmap_mode="r", allow_pickle=False)


def _sink(name: str, t: pa.DataType, forced: str | None, path: Path, loc, text_missing: Iterable[str]) -> _Sink:
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
        return _TextSink(name, path, loc, forced, text_missing)
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
    """Record batches -> one column file per column in ``staging``; ``finish`` returns the typed columns.

    ``text_missing``: text values of text columns that stand for a missing value (a CSV's missing tokens)."""

    def __init__(self, schema: pa.Schema, staging: Path, forced: Mapping[str, str], loc,
                 text_missing: Iterable[str] = ()):
        names = [str(n) for n in schema.names]
        self.unnamed_first = bool(names) and not names[0].strip()
        self.index_candidate = bool(names) and names[0].strip() in PANDAS_INDEX_NAMES
        checked = check_header(["\0index", *names[1:]] if self.unnamed_first else names, [*loc, "header"])
        if self.unnamed_first:
            checked[0] = ""
        check_forced(forced, checked, ["query", "types"])
        self.staging, self.loc, self.n_rows = staging, loc, 0
        self.sinks = [_sink(n, f.type, forced.get(n), staging / f"s{j}.npy", loc, text_missing)
                      for j, (n, f) in enumerate(zip(checked, schema, strict=True))]
        self.is_index = self.index_candidate and pa.types.is_integer(schema.field(0).type)
        self._dirty = 0  # bytes appended since the last background flush
        self._flusher: ThreadPoolExecutor | None = None
        self._flushing: Future | None = None

    def add(self, batch: pa.RecordBatch) -> None:
        self.commit(self.prepare(batch))

    def prepare(self, batch: pa.RecordBatch) -> tuple:
        """A batch converted and summarised column by column, ready for ``commit``: thread-safe (the sinks' state
        is not touched), so the batches of several pieces are prepared at once, where they were parsed; the
        first defect, in column order, raises here."""
        index = None
        if self.index_candidate and pa.types.is_integer(batch.column(0).type):
            first = batch.column(0)
            index = None if first.null_count else first.to_numpy(zero_copy_only=False)
        return batch.num_rows, index, [sink.prepare(arr) for sink, arr in zip(self.sinks, batch.columns, strict=True)]

    def commit(self, prepared: tuple) -> None:
        """Appends a prepared batch; the batches are committed in the order of the table."""
        n, index, parts = prepared
        if self.is_index:  # a pandas index holds 0..n-1
            self.is_index = index is not None and np.array_equal(index, np.arange(self.n_rows, self.n_rows + n))
        for sink, part in zip(self.sinks, parts, strict=True):
            sink.commit(part)
        self.n_rows += n
        self._dirty += n * 8 * len(self.sinks)
        if self._dirty >= _FLUSH_BYTES and (self._flushing is None or self._flushing.done()):
            self._dirty = 0
            if self._flusher is None:
                self._flusher = ThreadPoolExecutor(1, thread_name_prefix="orchard-flush")
            for sink in self.sinks:
                sink.out.flush()
            self._flushing = self._flusher.submit(_flush_to_disk, [sink.path for sink in self.sinks])

    def _stop_flushing(self) -> None:
        """No more background flushes; one under way goes on (publishing fsyncs the files anyway)."""
        if self._flusher is not None:
            self._flusher.shutdown(wait=False)
            self._flusher = None

    def finish(self) -> Table:
        self._stop_flushing()
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
            col.values = _load(final)  # described by its sink: the record's summaries
            out.append(col)
        for p in self.staging.glob("s*.npy"):
            p.unlink()
        return out


__all__ = ["Writer"]
