"""The column cap of uploads (``ORCHARD_MAX_COLUMNS``), checked from a file's header or schema alone, before the
table is parsed: a table a million columns wide is refused without spending the memory and time to read it.

The ingestion (services/ingest.py) checks a CSV's first piece (``csv_header_width_bytes``) and a Parquet file's
schema before parsing; ``check_width`` also serves JSON uploads and inline tables, whose column names are known
once the body is decoded.
"""

from __future__ import annotations

from ..errors import invalid

_CHUNK = 1 << 16


def check_width(n_columns: int, limit: int, loc: list, at_least: bool = False) -> None:
    if n_columns > limit:
        many = f"more than {limit}" if at_least else str(n_columns)
        raise invalid(loc, f"the table has {many} columns; the limit is {limit} (ORCHARD_MAX_COLUMNS)")


def _header_fields(chunks, stop_after: int) -> int:
    """Fields of the CSV's first record (quotes respected) in a stream of byte chunks, reading only as far as
    the header goes; counting stops (and returns a number above ``stop_after``) once past ``stop_after``."""
    fields, in_quotes = 1, False
    for chunk in chunks:
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


def csv_header_width(path, stop_after: int) -> int:
    """Fields of the header of the CSV file at ``path`` (see ``_header_fields``)."""
    with open(path, "rb") as fh:
        return _header_fields(iter(lambda: fh.read(_CHUNK), b""), stop_after)


def csv_header_width_bytes(buf, stop_after: int) -> int:
    """Fields of the header of a CSV held in ``buf`` (bytes or a memoryview: the first piece of an upload)."""
    view = memoryview(buf)
    return _header_fields((bytes(view[i:i + _CHUNK]) for i in range(0, len(view), _CHUNK)), stop_after)
