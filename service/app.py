"""The FastAPI application: ``create_app(settings)``; nothing happens at import time."""

from __future__ import annotations

import gc
import logging
from contextlib import asynccontextmanager
from typing import ClassVar

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from . import __version__
from .api import algorithms, datasets, health, jobs, keys, models, selection, train, v2
from .api import metrics as metrics_api
from .api.body import BodyLimit
from .api.fastpath import PredictFrontDoor, infer_model_name, predict_model_id
from .browser_safety import SAFE_METHODS, BrowserGuard, BrowserGuardMiddleware, parse_list
from .errors import install_handlers
from .observability import Metrics, Observability, RequestRecorder
from .runtime import Runtime
from .security import Guard, SecurityGate, document_security
from .services.janitor import Janitor
from .services.jobs import Reconciler
from .settings import Settings

log = logging.getLogger("orchard")


_DOOR_PATHS_MAX = 4096
_MAY_FAIL_500 = {"predict", "evaluate_model", "v2_infer"}  # artifact integrity errors


def _describe_errors(schema: dict) -> None:
    """Every error response as the app really sends it: problem+json (v1, health) or {"error"} (v2).

    FastAPI documents request-validation failures as 422 HTTPValidationError; Orchard's handlers answer
    them as problem+json 422 (v1) and {"error"} 400 (v2), so the spec says that instead.
    """
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    v2 = {"application/json": {"schema": {"$ref": "#/components/schemas/V2Error"}}}
    for path, ops in schema.get("paths", {}).items():
        is_v2 = path == "/v2" or path.startswith("/v2/")
        for method, op in ops.items():
            responses = op.setdefault("responses", {})
            if op.get("operationId") in _MAY_FAIL_500:
                responses.setdefault("500", {"description": "The stored model artifact failed verification"})
            if "requestBody" in op:
                responses.setdefault("413", {"description": "Body too large"})
            # the browser guard's answers (service/security.py), on every operation
            responses.setdefault("400", {"description": "Host not allowed (ORCHARD_ALLOWED_HOSTS)"})
            if method.upper() not in SAFE_METHODS:
                responses.setdefault("403", {"description": "Cross-site request refused (Origin, Sec-Fetch-Site)"})
                responses.setdefault("415", {"description": "Unsupported content type (text/plain and form "
                                                            "bodies are refused)"})
            if is_v2 and "422" in responses:
                r422 = responses.pop("422")
                responses.setdefault("400", {"description": r422.get("description", "Invalid request")})
            for code, resp in responses.items():
                content = resp.get("content", {})
                if code[0] == "2" and "text/event-stream" in content:
                    content.pop("application/json", None)  # a stream, not a JSON document
                if code[0] in "45":
                    if resp.get("description") == "Validation Error":
                        resp["description"] = "Invalid request"
                    resp["content"] = v2 if is_v2 else problem
            op["responses"] = dict(sorted(responses.items()))
    comps = schema.get("components", {}).get("schemas", {})
    text = str(schema["paths"])
    for unused in ("HTTPValidationError", "ValidationError"):
        if f"/{unused}'" not in text:
            comps.pop(unused, None)


def _document_hand_parsed_bodies(app: FastAPI) -> None:
    """Add the schemas of bodies decoded by hand (dataset upload, predict, v2 infer) to the OpenAPI components."""
    from pydantic.json_schema import models_json_schema

    from .schemas.models import DatasetCreateJSON, PredictRequest
    from .schemas.v2 import InferenceRequest, InferenceResponse

    base = app.openapi

    def openapi() -> dict:
        if app.openapi_schema:
            return app.openapi_schema
        schema = base()
        document_security(schema)
        hand_parsed = (DatasetCreateJSON, PredictRequest, InferenceRequest)
        _, defs = models_json_schema([(m, "validation") for m in hand_parsed] + [(InferenceResponse, "serialization")],
                                     ref_template="#/components/schemas/{model}")
        comps = schema.setdefault("components", {}).setdefault("schemas", {})
        for name, sch in sorted(defs.get("$defs", {}).items()):
            comps.setdefault(name, sch)
        _describe_errors(schema)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi


class OrchardApp(FastAPI):
    """FastAPI with a front door: ``POST /v1/models/{id}/predict`` and ``POST /v2/models/{name}/infer`` go
    straight to ``PredictFrontDoor``
    (api/fastpath.py), skipping the middleware stack and routing; every other request takes the normal path."""

    predict_front_door: PredictFrontDoor | None = None
    cors = False  # with CORS on, predict takes the routed path, where CORSMiddleware adds its headers

    # predict paths seen -> (model id or name, V2): one dict lookup per request (a function of the path alone)
    _door_paths: ClassVar[dict[str, tuple[str, bool]]] = {}

    async def __call__(self, scope, receive, send):
        if (scope["type"] == "http" and scope["method"] == "POST" and self.predict_front_door is not None
                and not self.cors):
            path = scope["path"]
            door = self._door_paths.get(path)
            if door is None:
                model_id = predict_model_id(path)
                door = (model_id, False) if model_id is not None else None
                if door is None:
                    name = infer_model_name(path)
                    door = (name, True) if name is not None else None
                if door is not None:
                    if len(self._door_paths) >= _DOOR_PATHS_MAX:
                        self._door_paths.clear()
                    self._door_paths[path] = door
            if door is not None:
                return await self.predict_front_door(scope, receive, send, door[0], door[1])
        await super().__call__(scope, receive, send)


def create_app(settings: Settings | None = None, *, freeze_gc: bool = False) -> OrchardApp:
    settings = settings or Settings()
    guard = Guard(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        runtime = Runtime.open(settings)
        guard.open(runtime.meta)  # API keys, rate limits, audit (ORCHARD_ADMIN_KEY created here if absent)
        runtime.guard = guard
        janitor = Janitor(runtime.meta, runtime.art, settings.janitor_grace_s, settings.janitor_interval_s)
        janitor.start()  # first pass now: temp dirs of ended processes, orphan artifacts (never a live replica's)
        runtime.queue.start()
        # at start and periodically, in every replica: queued jobs the queue lost are enqueued again, running jobs
        # whose lease expired are retried or failed (services/jobs.py)
        reconciler = Reconciler(runtime.meta, settings, runtime.queue)
        reconciler.start()
        app.state.runtime = runtime
        app.predict_front_door.plane = runtime.plane  # one attribute read per predict, not app.state's lookup
        app.predict_front_door.authorize = guard.front_door_for(runtime)  # the runtime bound: no app.state lookup
        # Everything loaded so far (modules, NumPy/SciPy, routes) lives as long as the process: move it out of
        # the collector's reach, so that full collections triggered by request garbage do not walk it again
        # and again (measured: up to ~10% of a single-row predict's instructions; docs/decisions/observability.md)
        if freeze_gc:  # `orchard serve` only: tests build many apps in one process and must not keep them
            gc.collect()
            gc.freeze()
        log.info("orchard ready: data dir %s, %s", settings.data_dir,
                 f"queue {settings.queue_url}" if settings.queue_url else f"{settings.workers} worker process(es)")
        try:
            yield
        finally:
            app.predict_front_door.plane = None
            app.predict_front_door.authorize = authorize
            reconciler.shutdown()
            guard.close()
            janitor.stop()
            runtime.queue.shutdown()
            runtime.art.remove_own_tmp()
            runtime.meta.dispose()

    app = OrchardApp(
        title="Orchard",
        version=__version__,
        summary="Train, evaluate and serve classical machine-learning models over REST.",
        lifespan=lifespan,
        # FastAPI's built-in OpenTelemetry bridge looks up several environment variables on every
        # request (~40 us); Orchard exports its own Prometheus metrics instead.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    install_handlers(app)
    metrics = Metrics(lambda: app.state.runtime) if settings.metrics else None
    app.state.metrics = metrics
    app.state.on_rows = metrics.on_rows if metrics else None
    for r in (health.router, algorithms.router, datasets.router, train.router, selection.router, jobs.router,
              models.router, v2.router, metrics_api.router, keys.router):
        app.include_router(r)
    _document_hand_parsed_bodies(app)
    recorder = RequestRecorder(metrics, settings.access_log)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)  # limits apply to every route
    # keys (401, 429) before any body is read; the audit row of each mutating call before its answer leaves
    app.add_middleware(SecurityGate, guard=guard, router=app.router)
    cors_origins = parse_list(settings.cors_origins)
    if cors_origins:  # off unless configured (docs/decisions/browser-safety.md); outside the gate: a preflight
        app.cors = True  # carries no key
        app.add_middleware(CORSMiddleware, allow_origins=cors_origins, allow_methods=["*"],
                           allow_headers=["*"], expose_headers=["X-Request-ID", "Location", "Retry-After"],
                           max_age=600)
    browser = BrowserGuard(parse_list(settings.allowed_hosts), cors_origins)
    # the front door skips the middleware: its guard is the same browser check, then the key's view of the models
    app.predict_front_door = PredictFrontDoor(lambda: app.state.runtime.plane, recorder, settings.max_body_bytes,
                                              guards=(browser.check,), on_rows=metrics.on_rows if metrics else None)

    def authorize(scope, plane):  # until the lifespan binds the runtime (Guard.front_door_for)
        return guard.front_door(scope, app.state.runtime).plane

    app.predict_front_door.authorize = authorize
    app.add_middleware(BrowserGuardMiddleware, guard=browser)  # Host allow-list, cross-site refusals
    # outermost: the request id (always), metrics and access log (each switchable) see every request
    app.add_middleware(Observability, recorder=recorder)
    return app
