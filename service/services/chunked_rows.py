"""Large predict bodies decoded into a matrix in bounded steps, so the GIL changes hands between them.

A 100,000-row body is ~16 MB of JSON: ``orjson.loads`` of it, ``np.array`` of the nested lists and freeing those
lists each hold the GIL for tens of milliseconds, and the event loop (``/health/live``, the next single-row
predict) waits that long, although the work runs on a worker thread. Here the ``rows`` (or ``instances``) array
is split at top-level element boundaries into pieces of about ``PIECE_BYTES``; each piece is decoded, turned into
a float block and dropped before the next, and the blocks are joined once. Between pieces the interpreter
switches threads as usual (``sys.getswitchinterval()``, 5 ms).

Safety: a piece is cut right after a ``]`` (rows) or ``}`` (instances) followed by ``,``, and must decode on its
own as the elements of a JSON array. A cut inside a string leaves that piece with an unterminated string, a cut
inside a nested element leaves it with unbalanced brackets: both fail to decode. Every piece decoding thus
proves every cut was at a top-level boundary, and the pieces' elements are exactly the array's. Anything else
(a shape the pattern does not know, a piece that does not decode, a value that is not a plain number, a short
row) returns None, and the caller decodes the whole body as usual, with its usual errors.
"""

from __future__ import annotations

import re

import numpy as np
import orjson

_PLAIN = (np.dtype(np.float64), np.dtype(np.int64))  # blocks of plain JSON numbers (wider ints: the usual path)
PIECE_BYTES = 64 * 1024  # ~0.3 ms of decoding: the GIL is held for about that long at a time
_WS = rb"[ \t\n\r]*"  # JSON whitespace
_FLAG = rb'"(?:return_proba|return_std)"' + _WS + rb":" + _WS + rb"(?:true|false)"
# the body up to the opening bracket of its array: flags, then "rows" or "instances"
_HEAD = re.compile(_WS + rb"\{" + _WS + rb"(?:" + _FLAG + _WS + rb"," + _WS + rb")*\"(rows|instances)\"" + _WS + rb":"
                   + _WS + rb"\[")
# the body after the closing bracket of its array: flags, then the end of the object
_TAIL = re.compile(_WS + rb"(?:," + _WS + _FLAG + _WS + rb")*\}" + _WS + rb"\Z")


def split(raw: bytes) -> tuple[str, dict, list[memoryview]] | None:
    """(field, the other fields, the array's pieces) of a ``{"rows"|"instances": [...], flags}`` body, or None."""
    head = _HEAD.match(raw)
    if head is None:
        return None
    close = raw.rfind(b"]")
    if close < head.end() or _TAIL.match(raw, close + 1) is None:
        return None
    try:  # the object without its array: the flags, checked by the same decoder as a whole body
        rest = orjson.loads(raw[:head.end()] + raw[close:])
    except orjson.JSONDecodeError:
        return None
    field = head.group(1).decode()
    rest.pop(field, None)
    sep = b"]," if field == "rows" else b"},"
    view = memoryview(raw)
    pieces, start, end = [], head.end(), close
    while start < end:
        cut = raw.find(sep, min(start + PIECE_BYTES, end), end)
        if cut < 0:
            pieces.append(view[start:end])
            break
        pieces.append(view[start:cut + 1])
        start = cut + 2
    return field, rest, pieces


def matrix(pieces: list[memoryview], field: str, names: list[str], max_rows: int) -> np.ndarray | None:
    """The float matrix of the pieces' rows, or None when a piece does not decode or holds anything but plain
    numbers of the right width (the caller then takes the ordinary path, whose errors name the field).

    Raises ``TooMany`` past ``max_rows`` rows."""
    blocks, n, width = [], 0, len(names)
    for piece in pieces:
        try:
            elements = orjson.loads(b"[" + piece + b"]")
        except orjson.JSONDecodeError:
            return None
        if field == "instances":
            keys = set(names)
            if not all(type(inst) is dict and inst.keys() <= keys for inst in elements):
                return None
            elements = [[inst.get(name) for name in names] for inst in elements]
        try:
            block = np.array(elements)
        except (TypeError, ValueError):
            return None
        del elements  # freed here, a piece at a time
        if block.ndim != 2 or block.shape[1] != width or block.dtype not in _PLAIN:
            return None
        n += block.shape[0]
        if n > max_rows:
            raise TooMany(n)
        blocks.append(block)
    if not blocks:
        return None
    return blocks[0] if len(blocks) == 1 else np.concatenate(blocks)


def flat_numbers(raw: bytes, start: int, end: int) -> np.ndarray | None:
    """The numbers of the flat JSON array ``raw[start:end]`` (``[5.1, 3, ...]``, whitespace around it allowed),
    decoded a piece at a time, as one float64 array; None when it is not such an array with at least one float
    among plain numbers (a piece that does not decode, a nested array, a boolean or other value in a piece of its
    own, only integers): the caller then decodes it whole, with its usual checks.

    Safety as for ``split``: a piece is cut at a ``,`` and must decode on its own as the elements of a JSON array
    (non-empty), so every cut was at a top-level comma and the pieces' elements are exactly the array's."""
    while start < end and raw[start] in b" \t\n\r":
        start += 1
    while end > start and raw[end - 1] in b" \t\n\r":
        end -= 1
    if end - start < 2 or raw[start] != 0x5B or raw[end - 1] != 0x5D:  # '[' ... ']'
        return None
    view, blocks, floats = memoryview(raw), [], False
    s, e = start + 1, end - 1
    while s < e:
        cut = raw.find(b",", min(s + PIECE_BYTES, e), e)
        stop = e if cut < 0 else cut
        try:
            elements = orjson.loads(b"[" + view[s:stop] + b"]")
            block = np.array(elements)
        except (orjson.JSONDecodeError, TypeError, ValueError):
            return None
        del elements  # freed here, a piece at a time
        if block.ndim != 1 or not block.size or block.dtype not in _PLAIN or (cut >= 0 and cut + 1 >= e):
            return None
        floats = floats or block.dtype == _PLAIN[0]
        blocks.append(block)
        s = e if cut < 0 else cut + 1
    if not floats:  # only integers (or nothing): the whole array decides, as np.array of it would
        return None
    return np.concatenate(blocks) if len(blocks) > 1 else blocks[0]


def dumps_list(values: list) -> bytes:
    """``orjson.dumps(values)``, byte for byte, a slice at a time when the list is long."""
    if len(values) <= SLICE:
        return orjson.dumps(values)
    return b"[" + b",".join([orjson.dumps(values[i:i + SLICE])[1:-1] for i in range(0, len(values), SLICE)]) + b"]"


def dumps(out: dict) -> bytes:
    """``orjson.dumps(out)``, byte for byte, with long lists encoded a slice at a time (an answer of 100,000
    predictions takes tens of milliseconds to encode at once)."""
    if not any(type(v) is list and len(v) > SLICE for v in out.values()):
        return orjson.dumps(out)
    parts = [orjson.dumps(k) + b":" + (dumps_list(v) if type(v) is list else orjson.dumps(v)) for k, v in out.items()]
    return b"{" + b",".join(parts) + b"}"


SLICE = 4096  # list items encoded at a time


class TooMany(Exception):
    """More rows than ``ORCHARD_MAX_PREDICT_ROWS`` (at least ``args[0]``)."""
