"""Large JSON request bodies decoded and validated a piece at a time, so the GIL changes hands between pieces.

On a worker thread, ``json.loads`` of a 16 MB body and the pydantic validation of its 100,000 rows are single C
calls: each holds the GIL (and so the event loop) for hundreds of milliseconds. Here the body's ``rows`` (or
``instances``) array is cut into pieces of about ``PIECE_BYTES`` at element boundaries; each piece is decoded, put
into the rest of the body (the "skeleton", decoded once) and validated by the caller's validator as a whole body
holding only that piece's elements; the validated lists are joined into the first piece's model.

Safety of the cuts (as in chunked_rows.py): a piece must decode on its own as the elements of a JSON array, which
proves it starts and ends at top-level element boundaries; the array's closing bracket is the one after which the
last piece decodes. The array follows a ``"rows":`` key outside any string (an unescaped quote closes a string, and
the skeleton, which holds every byte before the array, must decode). The elements' validation per piece equals
the whole list's when the list field has no constraint but ``min_length`` <= 1 and no validator runs over it or a
model around it (checked; otherwise None). Anything else (another shape, a piece that does not decode or
validate, an alias on the path) returns None: the caller then decodes and validates the whole body as usual, with
its usual errors.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import annotated_types
import orjson
from pydantic import BaseModel

PIECE_BYTES = 64 * 1024  # ~0.5 ms of decoding and validation: the GIL is held for about that long at a time
_WS = rb"[ \t\n\r]*"
_HEAD = re.compile(rb'"(rows|instances)"' + _WS + rb":" + _WS + rb"\[")
_SEP = re.compile(rb"[\]}]" + _WS + rb"," + _WS + rb"(?=[\[{])")  # between two array or object elements
_CLOSE = re.compile(rb"\](?=" + _WS + rb'(?:,' + _WS + rb'"|\}|\]|\Z))')  # a bracket that may close the array
_MARK = "\x00orchard:pieces\x00"
_MAX_CLOSE_TRIES = 64


def _find_head(raw: bytes) -> re.Match | None:
    starts = [i for i in (raw.find(b'"rows"'), raw.find(b'"instances"')) if i >= 0]
    return _HEAD.match(raw, min(starts)) if starts else None


def split(raw: bytes) -> tuple[Any, list, list[list]] | None:
    """(the body without its large array, the path of keys to it, the decoded pieces), or None."""
    head = _find_head(raw)
    if head is None:
        return None
    n, start, pieces, close = len(raw), head.end(), [], None
    while close is None:
        sep = _SEP.search(raw, min(start + PIECE_BYTES, n))
        end = sep.start() + 1 if sep else n
        try:
            pieces.append(orjson.loads(b"[" + raw[start:end] + b"]"))
            if sep is None:
                return None  # decoded to the end of the body without closing the array
            start = sep.end()
            continue
        except orjson.JSONDecodeError:
            pass
        for i, m in enumerate(_CLOSE.finditer(raw, start, end)):  # the segment holds the array's end
            if i == _MAX_CLOSE_TRIES:
                return None
            try:
                last = orjson.loads(b"[" + raw[start:m.start()] + b"]")
            except orjson.JSONDecodeError:
                continue
            pieces.append(last)
            close = m.start()
            break
        else:
            return None
    try:
        skeleton = orjson.loads(raw[:head.end() - 1] + orjson.dumps(_MARK) + raw[close + 1:])
    except orjson.JSONDecodeError:
        return None
    paths = list(_marks(skeleton, []))
    if len(paths) != 1:
        return None
    pieces = [p for p in pieces if p]
    return (skeleton, paths[0], pieces) if pieces else None


def _marks(obj, path):
    if type(obj) is dict:
        for k, v in obj.items():
            if v == _MARK:
                yield [*path, k]
            elif type(v) in (dict, list):
                yield from _marks(v, [*path, k])
    elif type(obj) is list:
        for v in obj:
            if v == _MARK or type(v) in (dict, list):
                yield [*path, None]  # the array inside a list: not handled (None on the path)


def _with(skeleton: dict, path: list, elements: list) -> dict:
    """The skeleton with ``elements`` in place of its mark (dicts copied along the path only)."""
    top = dict(skeleton)
    node = top
    for k in path[:-1]:
        node[k] = dict(node[k])
        node = node[k]
    node[path[-1]] = elements
    return top


def _list_of(model: Any, path: list) -> list | None:
    """The validated list at ``path`` in ``model``, or None unless every step is a plain field (no alias, no
    validator) of a model without model validators, and the list's only constraint is ``min_length`` <= 1."""
    node = model
    for depth, k in enumerate(path):
        if k is None or not isinstance(node, BaseModel):
            return None
        cls = type(node)
        info = cls.model_fields.get(k)
        decorators = cls.__pydantic_decorators__
        if (info is None or info.alias not in (None, k) or info.validation_alias not in (None, k)
                or decorators.model_validators
                or any(k in d.info.fields or "*" in d.info.fields for d in decorators.field_validators.values())):
            return None
        if depth == len(path) - 1 and not all(isinstance(c, annotated_types.MinLen) and c.min_length <= 1
                                     for c in info.metadata):
            return None
        node = getattr(node, k)
    return node if type(node) is list else None


def validate_in_pieces(raw: bytes, validate: Callable[[Any], Any]) -> Any | None:
    """The model ``validate`` makes of the body ``raw``, built a piece at a time; None when the body is not
    one this handles or a piece fails (the caller then validates the whole body, for its errors).
    ``validate(value)`` returns the validated model or raises ``ValueError`` (None here)."""
    parts = split(raw)
    if parts is None:
        return None
    skeleton, path, pieces = parts
    if type(skeleton) is not dict:
        return None
    model, joined = None, None
    for i, elements in enumerate(pieces):
        pieces[i] = None  # dropped as it is used
        try:
            m = validate(_with(skeleton, path, elements))
        except ValueError:  # pydantic's ValidationError is one
            return None
        del elements
        if model is None:
            model, joined = m, _list_of(m, path)
            if joined is None:
                return None
        else:
            more = _list_of(m, path)
            if more is None:
                return None
            joined.extend(more)
    return model


RELEASE_ITEMS = 2048  # list items freed at a time (~1 ms for rows of a few numbers)


def release(obj: Any) -> None:
    """Empty the long lists of a decoded or validated body (models, dicts and lists, walked) a slice at a time,
    so that freeing it never holds the GIL for long: the last reference to 100,000 rows, dropped at once, frees
    a million objects in one go (tens of milliseconds), on whichever thread drops it. Blocking: a worker
    thread's, once the body is no longer used."""
    stack, budget = [obj], 10_000
    while stack and budget:
        budget -= 1
        o = stack.pop()
        if isinstance(o, BaseModel):
            stack.extend(o.__dict__.values())
        elif type(o) is dict:
            stack.extend(o.values())
        elif type(o) is list and len(o) > RELEASE_ITEMS:
            while o:
                del o[-RELEASE_ITEMS:]

