"""The front door of inference: ``POST /v1/models/{id}/predict`` and ``POST /v2/models/{name}/infer`` answered
before FastAPI, through one path (body, model, errors, metrics) with a protocol-specific decode and answer.

This is the one request whose cost is dominated by framework overhead (Starlette's middleware stack, routing,
dependency resolution, exception middleware) rather than by work. ``OrchardApp.__call__`` hands it to
``PredictFrontDoor``, which does everything the stack would have done for it in one coroutine: the request id,
the body limit (declared and streamed), the content type, orjson decoding, the cached model, the JSON answer,
problem+json errors, and the request's metrics and access-log line (``Observability.record``). Behaviour is
identical to the FastAPI route in ``api/models.py``, which still defines the OpenAPI contract and shares
``predict_payload``. See docs/decisions/predict-fast-path.md.
"""

from __future__ import annotations

import logging
from time import perf_counter_ns

import orjson
from starlette.concurrency import run_in_threadpool

from core.validation import DataError

from ..errors import ProblemError, TooLarge, UnsupportedMedia, invalid, problem_response, v2_error_response
from ..observability import new_request_id, request_id_var, valid_request_id
from ..services import oip
from ..services.inference import INLINE_BODY_BYTES, run_sized
from .common import decode_json as orjson_loads
from .models import _decode_and_predict, predict_payload

log = logging.getLogger("orchard")
ROUTE = "/v1/models/{model_id}/predict"  # the metrics' route templates
ROUTE_V2 = "/v2/models/{model_name}/infer"
_JSON = b"application/json"
_OCTETS = b"application/octet-stream"


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


def _v2_bundle(runtime, name: str):
    return runtime.cache.get(oip.resolve_model(runtime.meta, name)["id"])


def _open(scope, runtime):
    return runtime


class PredictFrontDoor:
    guard = staticmethod(_open)  # the app sets security.Guard.front_door: (scope, runtime) -> the key's runtime

    def __init__(self, get_runtime, observability, on_predict, body_limit: int, on_infer=None):
        self.get_runtime = get_runtime
        self.runtime = None  # set by the app's lifespan
        self.record = observability.record  # metrics + access log of one request
        self.on_predict = on_predict  # optional hook(model_id, n_rows, status): rows predicted (v1)
        self.on_infer = on_infer  # the same for /v2
        self.limit = body_limit

    async def __call__(self, scope, receive, send, model_id: str, v2: bool = False):
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
                runtime = self.guard(scope, self.runtime or self.get_runtime())  # key (401/403/429), its project
                # the body: type, declared and streamed size, JSON (one coroutine: no await of a helper's)
                if ctype is not None and ctype != _JSON and hlen is None:
                    media = ctype.split(b";", 1)[0].strip().lower()
                    if media != _JSON and media:
                        if v2:
                            raise UnsupportedMedia(f"content type {media.decode(errors='replace')!r} is not "
                                                   "supported: send application/json, or binary tensor data with "
                                                   "an Inference-Header-Content-Length header")
                        raise UnsupportedMedia(f"content type {media.decode(errors='replace')!r} is not supported "
                                               "here; send application/json")
                limit = self.limit
                if declared is not None:
                    try:
                        n = int(declared)
                    except ValueError:
                        n = 0
                    if n > limit:
                        raise TooLarge(f"the body ({n} bytes) exceeds the limit of {limit} bytes "
                                       "(ORCHARD_MAX_BODY_BYTES)")
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    status = 499  # the client went away before sending its body
                    return
                body = msg.get("body", b"")
                if msg.get("more_body", False):  # chunks joined once (never body += chunk: quadratic)
                    chunks, size = [body], len(body)
                    while msg.get("more_body", False):
                        msg = await receive()
                        if msg["type"] == "http.disconnect":
                            status = 499
                            return
                        chunk = msg.get("body", b"")
                        size += len(chunk)
                        if size > limit:
                            raise TooLarge(f"the body exceeds the limit of {limit} bytes (ORCHARD_MAX_BODY_BYTES)")
                        chunks.append(chunk)
                    body = b"".join(chunks)
                if len(body) > limit:
                    raise TooLarge(f"the body exceeds the limit of {limit} bytes (ORCHARD_MAX_BODY_BYTES)")
                if v2:
                    status = 0  # recorded by _infer
                    return await self._infer(scope, receive, send, runtime, model_id, body, hlen, rid_header,
                                             start)
                if not body:
                    raise invalid(["body"], "the request body is empty; send a JSON object")
                bundle = runtime.cache.peek(model_id)
                if bundle is None:  # cold: loaded on a worker thread, never on the event loop
                    bundle = await run_in_threadpool(runtime.cache.get, model_id)
                if len(body) <= INLINE_BODY_BYTES:
                    out = predict_payload(bundle, orjson_loads(body), runtime.settings.max_predict_rows)
                else:  # a large body: decoded and predicted on a worker thread
                    out = await run_in_threadpool(_decode_and_predict, bundle, body, runtime.settings.max_predict_rows)
            except Exception as exc:  # noqa: BLE001 - problems answered as such, anything else as the app's 500
                status, nbytes = await self._refuse(scope, receive, send, exc, rid_header, model_id, v2)
                return
            data = orjson.dumps(out)
            if self.on_predict:
                self.on_predict(model_id, len(out.get("predictions") or out.get("components")
                                              or out.get("log_density") or ()), 200)
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", _JSON), (b"content-length", b"%d" % len(data)), rid_header]})
            await send({"type": "http.response.body", "body": data})
            status, nbytes = 200, len(data)
        finally:
            if status:  # 0: the V2 answer recorded itself
                self.record(scope, ROUTE_V2 if v2 else ROUTE, status, perf_counter_ns() - start, nbytes, rid_header[1])
            request_id_var.reset(token)

    async def _refuse(self, scope, receive, send, exc: Exception, rid_header, model_id: str, v2: bool):
        """Answer an error of either protocol: a problem as itself (an estimator's DataError: the client's data),
        anything else as the app's last-resort 500. Returns (status, bytes sent)."""
        if isinstance(exc, DataError) and v2:
            exc = oip.V2Error(f"the model cannot use these values: {exc}")
        if not isinstance(exc, ProblemError):
            log.error("unhandled error in inference with %s", model_id, exc_info=exc)
            exc = ProblemError("an unexpected error occurred; see the server log", status=500,
                               title="Internal Server Error")
        hook = self.on_infer if v2 else self.on_predict
        if hook:
            hook(model_id, 0, exc.status)
        return await _send_problem(scope, receive, send, exc, rid_header, v2)

    async def _infer(self, scope, receive, send, runtime, name, body, hlen, rid_header, start):
        """``/v2/models/{name}/infer``: the protocol's decode and answer over the same body, model and errors."""
        status, nbytes = 500, 0
        try:
            try:
                bundle = runtime.cache.peek(name)  # an id already loaded: no lookup
                if bundle is None:
                    bundle = await run_in_threadpool(_v2_bundle, runtime, name)
                data, json_len, n = await run_sized(len(body), oip.infer, bundle, name, body, hlen,
                                                    runtime.settings.max_predict_rows)
            except Exception as exc:  # noqa: BLE001 - problems answered as such, anything else as the app's 500
                status, nbytes = await self._refuse(scope, receive, send, exc, rid_header, name, True)
                return
            if self.on_infer:
                self.on_infer(bundle.model_id, n, 200)
            headers = [(b"content-type", _JSON if json_len is None else _OCTETS),
                       (b"content-length", b"%d" % len(data)), rid_header]
            if json_len is not None:
                headers.append((b"inference-header-content-length", b"%d" % json_len))
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": data})
            status, nbytes = 200, len(data)
        finally:
            self.record(scope, ROUTE_V2, status, perf_counter_ns() - start, nbytes, rid_header[1])


async def _send_problem(scope, receive, send, exc: ProblemError, rid_header, v2: bool = False) -> tuple[int, int]:
    """Answer ``exc`` as the app's handler would (problem+json, or V2's ``{"error"}``) plus the request id."""
    if v2:
        resp = v2_error_response(400 if exc.status == 422 else exc.status, exc.detail, exc.headers)
    else:
        resp = problem_response(exc.status, exc.title, exc.detail, exc.errors, exc.headers, exc.type_)
    resp.raw_headers.append(rid_header)
    await resp(scope, receive, send)
    return exc.status, len(resp.body)
