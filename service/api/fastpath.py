"""The front door of single-row prediction: ``POST /v1/models/{id}/predict`` answered before FastAPI.

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

from ..errors import ProblemError, TooLarge, UnsupportedMedia, invalid, problem_response
from ..observability import new_request_id, request_id_var, valid_request_id
from ..services.inference import INLINE_BODY_BYTES
from .common import decode_json as orjson_loads
from .models import _decode_and_predict, predict_payload

log = logging.getLogger("orchard")
ROUTE = "/v1/models/{model_id}/predict"  # the metrics' route template
_JSON = b"application/json"


def predict_model_id(path: str) -> str | None:
    """The model id of a predict path, or None: ``/v1/models/<id>/predict`` with a non-empty id free of '/'."""
    if path.startswith("/v1/models/") and path.endswith("/predict"):
        model_id = path[11:-8]
        if model_id and "/" not in model_id:
            return model_id
    return None


class PredictFrontDoor:
    def __init__(self, get_runtime, observability, on_predict, body_limit: int):
        self.get_runtime = get_runtime
        self.runtime = None  # set by the app's lifespan
        self.record = observability.record  # metrics + access log of one request
        self.on_predict = on_predict  # optional hook(model_id, n_rows, status): rows predicted
        self.limit = body_limit

    async def __call__(self, scope, receive, send, model_id: str):
        start = perf_counter_ns()
        rid = ctype = declared = None
        for k, v in scope["headers"]:  # one pass over the headers for the three this path reads
            if k == b"x-request-id":
                if rid is None:
                    rid = v
            elif k == b"content-type":
                if ctype is None:
                    ctype = v
            elif k == b"content-length":
                if declared is None:
                    declared = v
        rid = rid.decode() if rid is not None and valid_request_id(rid) else new_request_id()
        token = request_id_var.set(rid)
        rid_header = (b"x-request-id", rid.encode())
        status, nbytes = 500, 0
        try:
            try:
                # the body: type, declared and streamed size, JSON (one coroutine: no await of a helper's)
                if ctype is not None and ctype != _JSON:
                    media = ctype.split(b";", 1)[0].strip().lower()
                    if media != _JSON and media:
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
                if not body:
                    raise invalid(["body"], "the request body is empty; send a JSON object")
                runtime = self.runtime or self.get_runtime()
                bundle = runtime.cache.peek(model_id)
                if bundle is None:  # cold: loaded on a worker thread, never on the event loop
                    bundle = await run_in_threadpool(runtime.cache.get, model_id)
                if len(body) <= INLINE_BODY_BYTES:
                    out = predict_payload(bundle, orjson_loads(body), runtime.settings.max_predict_rows)
                else:  # a large body: decoded and predicted on a worker thread
                    out = await run_in_threadpool(_decode_and_predict, bundle, body, runtime.settings.max_predict_rows)
            except ProblemError as exc:
                if self.on_predict:
                    self.on_predict(model_id, 0, exc.status)
                status, nbytes = await _send_problem(scope, receive, send, exc, rid_header)
                return
            except Exception:  # noqa: BLE001 - the same last resort as the app's handler
                log.exception("unhandled error predicting with %s", model_id)
                status, nbytes = await _send_problem(
                    scope, receive, send, ProblemError("an unexpected error occurred; see the server log", status=500,
                                       title="Internal Server Error"), rid_header)
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
            self.record(scope, ROUTE, status, perf_counter_ns() - start, nbytes, rid_header[1])
            request_id_var.reset(token)


async def _send_problem(scope, receive, send, exc: ProblemError, rid_header) -> tuple[int, int]:
    """Answer ``exc`` as the app's handler would (problem+json, its headers) plus the request id."""
    resp = problem_response(exc.status, exc.title, exc.detail, exc.errors, exc.headers, exc.type_)
    resp.raw_headers.append(rid_header)
    await resp(scope, receive, send)
    return exc.status, len(resp.body)
