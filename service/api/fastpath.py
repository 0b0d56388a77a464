"""The front door of inference: ``POST /v1/models/{id}/predict`` and ``POST /v2/models/{name}/infer`` answered
before FastAPI, over the data plane (services/dataplane.py), with one error path and one record per request.

This is the one request whose cost is dominated by framework overhead (Starlette's middleware stack, routing,
dependency resolution, exception middleware) rather than by work. ``OrchardApp.__call__`` hands it to
``PredictFrontDoor``, which does in one coroutine what the stack would have done: the request id, the guards,
the content type, the body (api/body.py, the limit of every route), the model and its answer (the data plane),
problem+json (or V2 ``{"error"}``) errors, and the request's metrics and access-log line (``RequestRecorder``).
The FastAPI routes in api/models.py and api/v2.py define the OpenAPI contract over the same data plane.
See docs/decisions/predict-fast-path.md.

Guards: callables ``guard(scope) -> None | ProblemError | Response`` given at construction, run in order before
the body is read. None lets the request through; a ``ProblemError`` is answered in the protocol's error shape
(problem+json on /v1, ``{"error"}`` on /v2), a Starlette ``Response`` is sent as it is; either way with the
request id and recorded like any other answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from time import perf_counter_ns

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from core.validation import DataError

from ..errors import ProblemError, invalid, problem_response, v2_error_response
from ..observability import new_request_id, request_id_var, valid_request_id
from ..services import oip
from ..services.inference import INLINE_BODY_BYTES
from .body import Body, check_declared, check_media, read_body, streamed_too_large

log = logging.getLogger("orchard")
ROUTE = "/v1/models/{model_id}/predict"  # the metrics' route templates
ROUTE_V2 = "/v2/models/{model_name}/infer"
_JSON = b"application/json"
_OCTETS = b"application/octet-stream"

_LENGTHS_MAX = 4096
_LENGTHS = tuple(b"%d" % n for n in range(_LENGTHS_MAX))  # Content-Length values of small answers, made once

Guard = Callable[[dict], "ProblemError | Response | None"]


def predict_model_id(path: str) -> str | None:
    """The model id of a predict path, or None: ``/v1/models/<id>/predict`` with a non-empty id free of '/'."""
    if path.startswith("/v1/models/") and path.endswith("/predict"):
        model_id = path[11:-8]
        if model_id and "/" not in model_id:
            return model_id
    return None


def infer_model_name(path: str) -> str | None:
    """The model name of a V2 infer path (``/v2/models/<name>/infer``, no version), or None."""
    if path.startswith("/v2/models/") and path.endswith("/infer"):
        name = path[11:-6]
        if name and "/" not in name:
            return name
    return None


class PredictFrontDoor:
    """``await front_door(scope, receive, send, name, v2)`` for a path recognised by ``predict_model_id`` (v1)
    or ``infer_model_name`` (v2). ``get_plane()`` gives the running app's ``DataPlane`` (``plane`` caches it
    while the app runs); ``recorder``: the app's ``RequestRecorder``; ``on_rows(protocol, model_id, n, status)``:
    optional, the rows each request predicted. ``authorize(scope, plane)``: the plane as the request's API key
    sees it (its project), or a ``ProblemError`` (401/403/429); the app sets it from ``security.Guard``."""

    authorize = staticmethod(lambda scope, plane: plane)  # open: every model

    def __init__(self, get_plane, recorder, body_limit: int, *, guards: Sequence[Guard] = (), on_rows=None):
        self.get_plane = get_plane
        self.plane = None  # set by the app's lifespan
        self.record = recorder.record  # metrics + access log of one request
        self.limit = body_limit
        # a Content-Length value shorter than the limit's digits cannot exceed it (int() reads at most one digit
        # per character): only a longer one is parsed (check_declared)
        self.limit_digits = len(str(body_limit))
        self.guards = tuple(guards)
        self.on_rows = on_rows

    async def __call__(self, scope, receive, send, name: str, v2: bool = False):
        start = perf_counter_ns()
        rid = ctype = declared = hlen = None
        for k, v in scope["headers"]:  # one pass over the headers for the ones this path reads
            if k == b"x-request-id":
                if rid is None:
                    rid = v
            elif k == b"content-type":
                if ctype is None:
                    ctype = v
            elif k == b"content-length":
                if declared is None:
                    declared = v
            elif k == b"inference-header-content-length":
                if hlen is None:
                    hlen = v.decode(errors="replace")
        rid = rid.decode() if rid is not None and valid_request_id(rid) else new_request_id()
        token = request_id_var.set(rid)
        rid_header = (b"x-request-id", rid.encode())
        status, nbytes = 500, 0
        try:
            try:
                for guard in self.guards:
                    refusal = guard(scope)
                    if refusal is not None:
                        if isinstance(refusal, ProblemError):
                            raise refusal
                        refusal.raw_headers.append(rid_header)
                        await refusal(scope, receive, send)
                        status, nbytes = refusal.status_code, len(refusal.body)
                        return
                plane = self.authorize(scope, self.plane or self.get_plane())  # key (401/403/429), its project
                if ctype is not None and ctype != _JSON and hlen is None:  # 415 unless JSON (or binary tensors)
                    check_media(_media_type(ctype), v2=v2)
                if declared is not None and len(declared) >= self.limit_digits:
                    check_declared(declared, self.limit)
                msg = await receive()
                if msg["type"] == "http.request" and not msg.get("more_body", False):  # the whole body at once
                    body = msg.get("body", b"")
                    if len(body) > self.limit:
                        raise streamed_too_large(self.limit)
                else:  # a large body is joined off the loop
                    body = await read_body(receive, self.limit, join=False, first=msg)
                    if body is None:
                        status = 499  # the client went away before sending its body
                        return
                if v2:
                    bundle = plane.cache.peek(name)  # a cached model by id (peek_named's first look, inline)
                    if bundle is None:
                        bundle = plane.peek_named(name)  # or by a name resolved before
                        if bundle is None:  # cold, or a name to resolve: looked up and loaded on a worker thread
                            bundle = await plane.amodel_named(name)
                    if len(body) <= INLINE_BODY_BYTES:
                        data, json_len, n = plane.infer(bundle, name, body if type(body) is bytes else body.join(),
                                                        hlen)
                    else:
                        data, json_len, n = await run_in_threadpool(_infer_joined, plane, bundle, name, body, hlen)
                else:
                    if not body:
                        raise invalid(["body"], "the request body is empty; send a JSON object")
                    bundle = plane.cache.peek(name)
                    if bundle is None:  # cold: loaded on a worker thread, never on the event loop
                        bundle = await plane.amodel(name)
                    if len(body) <= INLINE_BODY_BYTES:
                        data, n = plane.predict(bundle, body if type(body) is bytes else body.join())
                    else:  # joined, decoded, predicted and encoded on a worker thread
                        data, n = await run_in_threadpool(_predict_joined, plane, bundle, body)
                    json_len = None
            except Exception as exc:  # noqa: BLE001 - problems answered as such, anything else as the app's 500
                status, nbytes = await self._refuse(scope, receive, send, exc, rid_header, name, v2)
                return
            if self.on_rows is not None:
                self.on_rows("v2" if v2 else "v1", bundle.model_id, n, 200)
            sent = len(data)
            size = _LENGTHS[sent] if sent < _LENGTHS_MAX else b"%d" % sent
            if json_len is None:
                headers = [(b"content-type", _JSON), (b"content-length", size), rid_header]
            else:
                headers = [(b"content-type", _OCTETS), (b"content-length", size), rid_header,
                           (b"inference-header-content-length", b"%d" % json_len)]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": data})
            status, nbytes = 200, sent
        finally:
            self.record(scope, ROUTE_V2 if v2 else ROUTE, status, perf_counter_ns() - start, nbytes, rid_header[1])
            request_id_var.reset(token)

    async def _refuse(self, scope, receive, send, exc: Exception, rid_header, name: str, v2: bool):
        """Answer an error of either protocol: a problem as itself (an estimator's DataError: the client's data),
        anything else as the app's last-resort 500. Returns (status, bytes sent)."""
        if isinstance(exc, DataError) and v2:
            exc = oip.V2Error(f"the model cannot use these values: {exc}")
        if not isinstance(exc, ProblemError):
            log.error("unhandled error in inference with %s", name, exc_info=exc)
            exc = ProblemError("an unexpected error occurred; see the server log", status=500,
                               title="Internal Server Error")
        if self.on_rows is not None:
            self.on_rows("v2" if v2 else "v1", name, 0, exc.status)
        if v2:
            resp = v2_error_response(400 if exc.status == 422 else exc.status, exc.detail, exc.headers)
        else:
            resp = problem_response(exc.status, exc.title, exc.detail, exc.errors, exc.headers, exc.type_)
        resp.raw_headers.append(rid_header)
        await resp(scope, receive, send)
        return exc.status, len(resp.body)


def _bytes(body: bytes | Body) -> bytes:
    return body if type(body) is bytes else body.join()


def _predict_joined(plane, bundle, body: bytes | Body):
    """``plane.predict`` on a worker thread, the body's chunks joined there."""
    return plane.predict(bundle, _bytes(body))


def _infer_joined(plane, bundle, name: str, body: bytes | Body, hlen: str | None):
    """``plane.infer`` on a worker thread, the body's chunks joined there."""
    return plane.infer(bundle, name, _bytes(body), hlen)


def _media_type(ctype: bytes) -> str:
    """A Content-Type header's media type (as body.media_type, on the raw header)."""
    return ctype.split(b";", 1)[0].strip().lower().decode(errors="replace")
