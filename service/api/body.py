"""Request bodies and their size limit (``ORCHARD_MAX_BODY_BYTES``): the one place that reads them.

``read_body`` reads a whole body under the limit (declared ``Content-Length`` and streamed size alike) and joins
its chunks once; the predict front door (api/fastpath.py) calls it. ``BodyLimit`` is the middleware that applies
the same limit, with the same checks and messages, to every other route, whose bodies Starlette reads through
the helpers below: ``json_body`` (a hand-decoded JSON body), ``infer_header_length`` and ``whole_body`` (V2
inference), ``DatasetUpload`` (a dataset upload, handed to services/datasets.py as a framework-free
``UploadBody``). ``check_media`` is the one content-type check of JSON bodies, the front door's included.
``JSONBodyRoute`` (the routers' route class) decodes and validates a pydantic body above ``INLINE_BODY_BYTES`` on
a worker thread, a piece at a time, instead of FastAPI doing it on the event loop.
"""

from __future__ import annotations

import email.message
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import orjson
from fastapi import HTTPException, params
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.requests import Request

from ..errors import TooLarge, UnsupportedMedia, invalid, problem_response, v2_error_response
from ..services.datasets import FilePart, FormFile
from ..services.inference import INLINE_BODY_BYTES
from ..services.json_pieces import release, validate_in_pieces


def check_declared(declared: bytes | None, limit: int) -> None:
    """413 (``TooLarge``) when a ``Content-Length`` header value announces more than ``limit`` bytes."""
    if declared is None:
        return
    try:
        n = int(declared)
    except ValueError:
        return  # not a number: the server's HTTP parser refused it already, or the streamed size decides
    if n > limit:
        raise TooLarge(f"the body ({n} bytes) exceeds the limit of {limit} bytes (ORCHARD_MAX_BODY_BYTES)")


def streamed_too_large(limit: int) -> TooLarge:
    return TooLarge(f"the body exceeds the limit of {limit} bytes (ORCHARD_MAX_BODY_BYTES)")


async def read_body(receive, limit: int, *, join: bool = True, first: dict | None = None) -> bytes | Body | None:
    """The whole body (chunks joined once: never ``body += chunk``, quadratic), or None when the client went
    away before sending it. Raises ``TooLarge`` past ``limit`` bytes (the declared length is the caller's
    ``check_declared``, done before anything is read). ``join=False``: a body that came in several chunks is
    returned as a ``Body`` to join later, e.g. on a worker thread (joining megabytes takes milliseconds).
    ``first``: the first message, when the caller received it already."""
    msg = await receive() if first is None else first
    if msg["type"] == "http.disconnect":
        return None
    body = msg.get("body", b"")
    if msg.get("more_body", False):
        chunks, size = [body], len(body)
        while msg.get("more_body", False):
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return None
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise streamed_too_large(limit)
            chunks.append(chunk)
        return b"".join(chunks) if join else Body(chunks, size)
    if len(body) > limit:
        raise streamed_too_large(limit)
    return body


class Body:
    """A body received in chunks, not joined yet: ``len()`` is its size, ``join()`` its bytes."""

    __slots__ = ("chunks", "size")

    def __init__(self, chunks: list[bytes], size: int):
        self.chunks, self.size = chunks, size

    def __len__(self) -> int:
        return self.size

    def join(self) -> bytes:
        return b"".join(self.chunks)


class BodyLimit:
    """Pure ASGI middleware: 413 for bodies over the limit (declared or streamed) on every routed request."""

    def __init__(self, app, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.limit
        for k, v in scope.get("headers", ()):
            if k == b"content-length":
                try:
                    check_declared(v, limit)
                except TooLarge as exc:
                    path = scope.get("path", "")
                    if path == "/v2" or path.startswith("/v2/"):
                        resp = v2_error_response(413, exc.detail)
                    else:
                        resp = problem_response(413, exc.title, exc.detail)
                    return await resp(scope, receive, send)
                break
        seen = 0

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise streamed_too_large(limit)
            return message

        return await self.app(scope, limited_receive, send)


# -- content types ---------------------------------------------------------------------------------------------
def media_type(value: str | None) -> str:
    """A Content-Type header's media type: lower case, parameters dropped; "" when there is none."""
    return (value or "").split(";")[0].strip().lower()


def check_media(media: str, *, v2: bool = False) -> None:
    """415 (``UnsupportedMedia``) unless ``media`` is JSON or none. ``v2``: the Open Inference Protocol's wording,
    which names its other body (binary tensor data, checked by the caller from its header-length header)."""
    if media != "application/json" and media:
        if v2:
            raise UnsupportedMedia(f"content type {media!r} is not supported: send application/json, or binary "
                                   "tensor data with an Inference-Header-Content-Length header")
        raise UnsupportedMedia(f"content type {media!r} is not supported here; send application/json")


# -- the bodies of routes ------------------------------------------------------------------------------------
async def json_body(request: Request) -> bytes:
    """The body of a JSON request, undecoded (415 for another content type, 422 when empty)."""
    check_media(media_type(request.headers.get("content-type")))
    raw = await request.body()
    if not raw:
        raise invalid(["body"], "the request body is empty; send a JSON object")
    return raw


def infer_header_length(request: Request) -> str | None:
    """The Inference-Header-Content-Length of a V2 infer request (binary tensor data follows its JSON header),
    or None for a JSON body; 415 for any other body. Reads nothing of the body."""
    hlen = request.headers.get("inference-header-content-length")
    if hlen is None:
        check_media(media_type(request.headers.get("content-type")), v2=True)
    return hlen


async def whole_body(request: Request) -> bytes:
    """The whole body (``BodyLimit`` holds it to the limit)."""
    return await request.body()


class DatasetUpload:
    """The body of ``POST /v1/datasets`` as ``services.datasets.UploadBody``: its media type, and the body read
    the way the service asks (streamed, whole, or as a multipart form). Nothing is read until it asks."""

    def __init__(self, request: Request):
        self.request = request
        self.media_type = media_type(request.headers.get("content-type"))

    def chunks(self) -> AsyncIterator[bytes]:
        return self.request.stream()

    async def read(self) -> bytes:
        return await self.request.body()

    @asynccontextmanager
    async def form(self) -> AsyncIterator[FormFile]:
        form = await self.request.form()
        try:
            part, name = form.get("file"), form.get("name")
            yield FormFile(FilePart(part.file, part.filename, media_type(part.content_type))
                           if isinstance(part, UploadFile) else None,
                           name if isinstance(name, str) else None)
        finally:
            await form.close()


# -- pydantic bodies -------------------------------------------------------------------------------------------
class JSONBodyRoute(APIRoute):
    """A route whose pydantic body, above ``INLINE_BODY_BYTES``, is decoded and validated on a worker thread.

    FastAPI decodes a JSON body (``json.loads``) and validates it against the route's body model on the event
    loop: hundreds of milliseconds for a 16 MB body. Here a large one is read as FastAPI would, then decoded and
    validated by the route's own body field on a worker thread, a piece at a time (services/json_pieces.py, so
    the loop gets the GIL back between pieces), and handed to FastAPI as the request's decoded JSON: a validated
    model, which FastAPI's validation passes through as it is. A body the pieces do not cover is decoded and
    validated whole on the thread; an invalid one is handed over decoded, and FastAPI validates it again where it
    always does (after the dependencies: a key without the scope still gets its 403 first), for the same errors.
    Small bodies take FastAPI's path untouched (no thread hop). The OpenAPI document is FastAPI's own."""

    def get_route_handler(self):
        handler = super().get_route_handler()
        field = self.body_field
        if field is None or self._embed_body_fields or isinstance(field.field_info, params.Form):
            return handler

        async def app(request: Request):
            raw = await request.body()  # read once: FastAPI reads it from the request again
            if len(raw) <= INLINE_BODY_BYTES or not _is_json(request.headers.get("content-type")):
                return await handler(request)  # small: FastAPI's own path, no content-type parsing here
            request._json = await run_in_threadpool(decode_validated, raw, field)
            try:
                return await handler(request)
            finally:  # freed on the thread, a slice at a time, rather than wherever its last reference goes
                await run_in_threadpool(release, request.__dict__.pop("_json", None))

        return app


def _is_json(value: str | None) -> bool:
    """FastAPI's test of a content type whose body it decodes as JSON (``application/json``, ``*/*+json``)."""
    if not value:
        return False
    message = email.message.Message()
    message["content-type"] = value
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def decode_validated(raw: bytes, field):
    """The body as FastAPI's validation of ``field`` makes it (blocking: a worker thread's), or, when it is
    invalid, as ``json.loads`` decodes it; FastAPI's own errors when it is not JSON."""

    def validate(value):
        model, errors = field.validate(value, {}, loc=("body",))
        if errors:
            raise ValueError("invalid")
        return model

    model = validate_in_pieces(raw, validate)
    if model is not None:
        return model
    try:  # orjson decodes what it accepts as json.loads does, three times faster; json.loads the rest (NaN...)
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = None
    try:
        value = json.loads(raw) if value is None else value
    except json.JSONDecodeError as e:  # as FastAPI words it (fastapi/routing.py)
        raise RequestValidationError([{"type": "json_invalid", "loc": ("body", e.pos), "msg": "JSON decode error",
                                       "input": {}, "ctx": {"error": e.msg}}], body=e.doc) from e
    except Exception as e:  # e.g. not UTF-8
        raise HTTPException(status_code=400, detail="There was an error parsing the body") from e
    model, errors = field.validate(value, {}, loc=("body",))
    return value if errors else model
