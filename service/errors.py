"""Domain errors and their problem+json (RFC 9457) rendering."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from core.validation import DataError

PROBLEM = "application/problem+json"


class ProblemError(Exception):
    """An error with an HTTP status and a sentence a person can act on."""

    status = 400
    title = "Bad Request"
    type_ = "about:blank"

    def __init__(self, detail: str, *, errors: list[dict] | None = None, status: int | None = None,
                 title: str | None = None, headers: dict | None = None):
        super().__init__(detail)
        self.detail = detail
        self.errors = errors or []
        if status is not None:
            self.status = status
        if title is not None:
            self.title = title
        self.headers = headers or {}


class NotFound(ProblemError):
    status, title = 404, "Not Found"


class ArtifactIntegrityError(ProblemError):
    """A model's or dataset's stored files are missing or unreadable while its record exists."""

    status, title = 500, "Artifact Integrity Error"
    type_ = "urn:orchard:problem:artifact-integrity"


def found(record: dict | None, what: str, id_: str) -> dict:
    """``record``, or 404 naming ``what`` and its id when there is none (it does not exist, or belongs to another
    project)."""
    if record is None:
        raise NotFound(f"{what} {id_!r} does not exist")
    return record


class Conflict(ProblemError):
    status, title = 409, "Conflict"


class Invalid(ProblemError):
    status, title = 422, "Unprocessable Content"


class TooLarge(ProblemError):
    status, title = 413, "Content Too Large"


class UnsupportedMedia(ProblemError):
    status, title = 415, "Unsupported Media Type"


class Unavailable(ProblemError):
    status, title = 503, "Service Unavailable"


def invalid(loc: list, msg: str) -> Invalid:
    """A 422 naming one field: ``loc`` is its path (e.g. ["body", "params", "C"])."""
    where = ".".join(str(p) for p in loc if p != "body")
    return Invalid(f"{where}: {msg}" if where else msg, errors=[{"loc": list(loc), "msg": msg}])


def problem_response(status: int, title: str, detail: str, errors: list | None = None,
                     headers: dict | None = None, type_: str = "about:blank") -> Response:
    body: dict[str, Any] = {"type": type_, "title": title, "status": status, "detail": detail}
    if errors:
        body["errors"] = errors
    return Response(orjson.dumps(body), status_code=status, media_type=PROBLEM, headers=headers)


_TITLES = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
           405: "Method Not Allowed", 409: "Conflict", 413: "Content Too Large",
           415: "Unsupported Media Type", 422: "Unprocessable Content", 500: "Internal Server Error",
           503: "Service Unavailable"}


def _clean_loc(loc) -> list:
    return [p for p in loc]


def v2_error_response(status: int, detail: str, headers: dict | None = None) -> Response:
    """The Open Inference Protocol's error shape: ``{"error": "..."}``."""
    return Response(orjson.dumps({"error": detail}), status_code=status, media_type="application/json",
                    headers=headers)


def is_v2_path(path: str) -> bool:
    return path == "/v2" or path.startswith("/v2/")


def error_response(path: str, exc: ProblemError) -> Response:
    """``exc`` answered as a handler would: V2's ``{"error"}`` under /v2 (422 as 400), problem+json elsewhere."""
    if is_v2_path(path):
        return v2_error_response(400 if exc.status == 422 else exc.status, exc.detail, exc.headers)
    return problem_response(exc.status, exc.title, exc.detail, exc.errors, exc.headers, exc.type_)


UNEXPECTED = "an unexpected error occurred; see the server log"


def unexpected_response(path: str) -> Response:
    """The last-resort 500 of either protocol."""
    if is_v2_path(path):
        return v2_error_response(500, UNEXPECTED)
    return problem_response(500, "Internal Server Error", UNEXPECTED)


def _is_v2(request: Request) -> bool:
    return is_v2_path(request.url.path)


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(ProblemError)
    async def _problem(request: Request, exc: ProblemError):
        if _is_v2(request):
            status = 400 if exc.status == 422 else exc.status
            return v2_error_response(status, exc.detail, exc.headers)
        return problem_response(exc.status, exc.title, exc.detail, exc.errors, exc.headers, exc.type_)

    @app.exception_handler(DataError)
    async def _data(request: Request, exc: DataError):
        # an estimator refusing its input (e.g. a value that overflows when standardised): the client's data
        detail = f"the model cannot use these values: {exc}"
        if _is_v2(request):
            return v2_error_response(400, detail)
        return problem_response(422, "Unprocessable Content", detail)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError):
        errors = []
        for e in exc.errors():
            loc = _clean_loc(e.get("loc", ()))
            msg = e.get("msg", "invalid value")
            if e.get("type") == "extra_forbidden":
                msg = "unknown field"
            errors.append({"loc": loc, "msg": msg})
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(p) for p in first["loc"] if p != "body") or "body"
        detail = f"{where}: {first['msg']}"
        if len(errors) > 1:
            detail += f" (and {len(errors) - 1} more problem(s))"
        if _is_v2(request):
            return v2_error_response(400, detail)
        return problem_response(422, "Unprocessable Content", detail, errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":  # e.g. not UTF-8
            return error_response(request.url.path, invalid(["body"], "the body is not valid JSON (UTF-8)"))
        title = _TITLES.get(exc.status_code, "Error")
        detail = exc.detail if isinstance(exc.detail, str) else title
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no route {request.method} {request.url.path}"
        if exc.status_code == 405:
            detail = f"method {request.method} is not allowed on {request.url.path}"
        if _is_v2(request):
            return v2_error_response(exc.status_code, detail, getattr(exc, "headers", None))
        return problem_response(exc.status_code, title, detail, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):  # pragma: no cover - last resort
        import logging

        logging.getLogger("orchard").exception("unhandled error on %s %s", request.method, request.url.path)
        return unexpected_response(request.url.path)
