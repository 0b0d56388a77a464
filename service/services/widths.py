"""The column cap of uploads (``ORCHARD_MAX_COLUMNS``), checked from a file's header or schema alone, before the
table is parsed: a table a million columns wide is refused without spending the memory and time to read it.

``check_upload_width(path, kind, limit)`` is the one check for file uploads (CSV, Parquet, or "auto": Parquet
by its magic bytes, else CSV, as the multipart upload decides); ``check_width`` serves JSON uploads, whose
column names are known once the body is decoded.
"""

from __future__ import annotations

from ..errors import invalid

_CHUNK = 1 << 16


def check_width(n_columns: int, limit: int, loc: list, at_least: bool = False) -> None:
    if n_columns > limit:
        many = f"more than {limit}" if at_least else str(n_columns)
        raise invalid(loc, f"the table has {many} columns; the limit is {limit} (ORCHARD_MAX_COLUMNS)")


def csv_header_width(path, stop_after: int) -> int:
    """Fields of the CSV's first record (quotes respected), reading only as far as the header goes; counting
    stops (and returns a number above ``stop_after``) once past ``stop_after``."""
    fields, in_quotes = 1, False
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            if not in_quotes and b'"' not in chunk:  # the common case: counted in C
                end = chunk.find(b"\n")
                fields += chunk.count(b",", 0, None if end < 0 else end)
                if end >= 0 or fields > stop_after:
                    return fields
                continue
            for byte in chunk:
                if byte == 0x22:  # '"' (an escaped "" toggles twice)
                    in_quotes = not in_quotes
                elif not in_quotes:
                    if byte == 0x2C:  # ','
                        fields += 1
                        if fields > stop_after:
                            return fields
                    elif byte == 0x0A:  # '\n'
                        return fields
    return fields


def parquet_width(path) -> int | None:
    """Columns in the Parquet file's schema (its footer only), or None when it is not readable Parquet (the
    parser then says why)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return len(pq.read_schema(path).names)
    except (pa.ArrowException, OSError):
        return None


def check_upload_width(path, kind: str, limit: int) -> None:
    if kind == "auto":
        with open(path, "rb") as fh:
            kind = "parquet" if fh.read(4) == b"PAR1" else "csv"
    if kind == "parquet":
        n = parquet_width(path)
        if n is not None:
            check_width(n, limit, ["body"])
    else:
        check_width(csv_header_width(path, limit), limit, ["body", "header"], at_least=True)
