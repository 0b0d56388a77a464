"""The hot path of single-row prediction, served below FastAPI's routing.

``POST /v1/models/{id}/predict`` is the one request whose cost is dominated by framework
overhead (routing, dependency resolution, exception middleware) rather than by work.
This pure-ASGI layer answers it directly: read the body, decode it with orjson, run the
cached model, write the JSON.  Behaviour is identical to the FastAPI route in
``api/models.py`` (which still defines the OpenAPI contract): same validation through
``predict_payload``, same problem+json errors.  See docs/decisions/predict-fast-path.md.
"""

from __future__ import annotations

import logging
import re

import orjson

from ..errors import ProblemError, UnsupportedMedia, invalid, problem_response
from .models import predict_payload

log = logging.getLogger("orchard")
_PATH = re.compile(r"^/v1/models/([^/]+)/predict$")
_JSON_HEADERS = [(b"content-type", b"application/json")]


class PredictFastPath:
    def __init__(self, app, get_runtime, on_predict=None):
        self.app = app
        self.get_runtime = get_runtime
        self.on_predict = on_predict  # optional hook(model_id, n_rows, status) for metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        m = _PATH.match(scope["path"])
        if m is None:
            return await self.app(scope, receive, send)
        model_id = m.group(1)
        scope["orchard.route"] = "/v1/models/{model_id}/predict"  # the metrics' route template
        try:
            ctype = b""
            for k, v in scope["headers"]:
                if k == b"content-type":
                    ctype = v.split(b";")[0].strip().lower()
                    break
            if ctype not in (b"application/json", b""):
                raise UnsupportedMedia(f"content type {ctype.decode(errors='replace')!r} is not supported here; "
                                       "send application/json")
            body = b""
            more = True
            while more:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    return
                body += msg.get("body", b"")
                more = msg.get("more_body", False)
            if not body:
                raise invalid(["body"], "the request body is empty; send a JSON object")
            try:
                payload = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise invalid(["body"], f"the body is not valid JSON: {exc}") from None
            runtime = self.get_runtime()
            bundle = runtime.cache.get(model_id)
            out = predict_payload(bundle, payload, runtime.settings.max_predict_rows)
        except ProblemError as exc:
            if self.on_predict:
                self.on_predict(model_id, 0, exc.status)
            return await problem_response(exc.status, exc.title, exc.detail, exc.errors, exc.headers,
                                          exc.type_)(scope, receive, send)
        except Exception:  # noqa: BLE001 - same last resort as the app's handler
            log.exception("unhandled error predicting with %s", model_id)
            return await problem_response(500, "Internal Server Error",
                                          "an unexpected error occurred; see the server log")(scope, receive, send)
        data = orjson.dumps(out)
        if self.on_predict:
            n = len(out.get("predictions") or out.get("components") or out.get("log_density") or ())
            self.on_predict(model_id, n, 200)
        headers = _JSON_HEADERS + [(b"content-length", str(len(data)).encode())]
        obs = scope.get("orchard.obs")
        if obs is not None:  # observability middleware above: answer through its raw send (see observability.py)
            send, rid_header, state = obs
            headers.append(rid_header)
            state[0], state[1] = 200, len(data)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": data})
