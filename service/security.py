"""Authentication, rate limits and the audit log at the edge of the app (docs/security.md).

``Guard`` holds one app's key ring, rate limiter and audit writer (opened by the lifespan). ``SecurityGate`` is
the pure ASGI layer in front of the routes: it authenticates every request but the open paths before its body
is read (401, 429), puts the principal in ``scope["state"]``, and writes one audit row per mutating call, before
the answer leaves (so a client that saw the answer finds the row). Scopes (403) and projects (404) are the
routes' typed dependencies (``api/deps.py``). The predict front door, which skips this layer, calls
``Guard.front_door`` instead.
"""

from __future__ import annotations

import logging
from hashlib import sha256
from time import time

from fastapi.routing import iter_route_contexts
from starlette.concurrency import run_in_threadpool
from starlette.routing import Match

from .errors import ProblemError, problem_response, v2_error_response
from .observability import request_id_var
from .services.audit import AuditLog
from .services.key_sync import make_sync
from .services.keys import ANONYMOUS, Forbidden, KeyRing, Principal, TooManyRequests, ensure_admin_key
from .services.projects import ProjectRuntime
from .services.ratelimit import make_limiter, retry_after

log = logging.getLogger("orchard.auth")

OPEN_PATHS = frozenset({"/health/live", "/health/ready", "/v2/health/live", "/v2/health/ready", "/docs",
                        "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# POST operations that change nothing stored (the `predict` scope): not audited
READ_ONLY_ACTIONS = frozenset({"predict", "evaluate_model", "explain_model", "partial_dependence", "v2_infer",
                               "infer_version"})
_TARGETS = ("key_id", "dataset_id", "model_id", "job_id", "model_name")


class Guard:
    def __init__(self, settings):
        self.settings = settings
        self.ring: KeyRing | None = None
        self.limiter = None
        self.audit: AuditLog | None = None
        self._views: dict[str, ProjectRuntime] = {}

    def open(self, meta) -> None:
        if self.settings.admin_key is not None:
            ensure_admin_key(meta, self.settings.admin_key.get_secret_value())
        self.ring = KeyRing(meta, self.settings.auth)
        self.ring.sync = make_sync(self.settings, self.ring.reload)
        self.limiter = make_limiter(self.settings)
        self.audit = AuditLog(meta)

    def close(self) -> None:
        if self.ring is not None:
            self.ring.sync.close()

    def is_open(self, path: str) -> bool:
        return path in OPEN_PATHS or path.startswith("/health/") or (
            path == "/metrics" and self.settings.metrics_public)

    def check(self, scope) -> Principal:
        """The principal of a request (401 without a valid key when keys are required, 429 over the rate)."""
        ring = self.ring
        sync = ring.sync
        if sync.changed():
            ring.reload()
        if not ring.enforced:
            return ANONYMOUS
        authorization = p = None
        for k, v in scope["headers"]:
            if k == b"authorization":
                authorization = v
                if v[:7] == b"Bearer " and sync.live:  # the usual case inline (it is on every predict)
                    p = ring.by_hash.get(sha256(v[7:]).digest())
                    if p is not None and (p.revoked or (p.expires_at is not None and time() >= p.expires_at)):
                        p = None
                break
        if p is None:  # anything else, and every refusal with its reason
            p = ring.authenticate(authorization)
        if self.limiter is not None:
            wait = self.limiter.take(p.key_id)
            if wait:
                exc = TooManyRequests(f"API key {p.key_id} exceeded its rate limit of "
                                      f"{self.settings.rate_limit_per_s:g} requests per second "
                                      "(ORCHARD_RATE_LIMIT_PER_S); retry after the Retry-After seconds",
                                      headers={"Retry-After": retry_after(wait)})
                exc.principal = p  # who was refused, for the audit row
                raise exc
        return p

    def front_door_for(self, runtime):
        """``authorize(scope, plane)`` for the predict front door of ``runtime``: the plane as the request's key
        sees it (``front_door``), in one call and two attribute reads while keys are not enforced."""
        plane, ring = runtime.plane, self.ring
        sync, front_door = ring.sync, self.front_door

        def authorize(scope, _plane):
            if sync.changed():
                ring.reload()
            if not ring.enforced:  # check() answers ANONYMOUS, an admin: the whole runtime
                return plane
            return front_door(scope, runtime).plane
        return authorize

    def front_door(self, scope, runtime):
        """The predict front door's check: 401/403/429, then the runtime as the key sees it (its project)."""
        p = self.check(scope)
        if p.admin:
            return runtime
        if "predict" not in p.scopes:
            raise Forbidden(f"this API key lacks the 'predict' scope needed by {scope['method']} {scope['path']}")
        view = self._views.get(p.project)
        if view is None or view.runtime is not runtime:
            view = self._views[p.project] = ProjectRuntime(runtime, None, p.project, p.project)  # shared
        return view


def _answer(path: str, exc: ProblemError):
    if path == "/v2" or path.startswith("/v2/"):
        return v2_error_response(exc.status, exc.detail, exc.headers)
    return problem_response(exc.status, exc.title, exc.detail, exc.errors, exc.headers, exc.type_)


class SecurityGate:
    def __init__(self, app, guard: Guard, router):
        self.app, self.guard, self.router = app, guard, router

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or self.guard.is_open(scope["path"]):
            return await self.app(scope, receive, send)
        try:
            principal = self.guard.check(scope)
        except ProblemError as exc:
            if scope["method"] in MUTATING:
                await self._audit(scope, getattr(exc, "principal", None), exc.status, None, self._match(scope))
            return await _answer(scope["path"], exc)(scope, receive, send)
        scope.setdefault("state", {})["principal"] = principal
        if scope["method"] not in MUTATING:
            return await self.app(scope, receive, send)
        started = False

        async def send_audited(message):
            nonlocal started
            if message["type"] == "http.response.start" and not started:
                started = True
                location = None
                for k, v in message.get("headers", ()):
                    if k.lower() == b"location":
                        location = v.decode("latin-1")
                await self._audit(scope, principal, message["status"], location, scope.get("route"))
            await send(message)

        try:
            await self.app(scope, receive, send_audited)
        except BaseException:
            if not started:
                await self._audit(scope, principal, 500, None, scope.get("route"))
            raise

    def _match(self, scope):
        """The route a refused request was for (the router did not run): for its audit row."""
        for rc in iter_route_contexts(self.router.routes):
            match, _ = rc.original_route.matches(scope)
            if match == Match.FULL:
                return rc.original_route
        return None

    async def _audit(self, scope, principal: Principal | None, status: int, location: str | None, route) -> None:
        if route is None:
            return  # no such endpoint (404/405 of the router): nothing was called
        action = getattr(route, "operation_id", None) or getattr(route, "name", "?")
        if action in READ_ONLY_ACTIONS:
            return
        params = scope.get("path_params")
        if params is None:  # refused before routing
            params = route.matches(scope)[1].get("path_params", {})
        target = next((params[k] for k in _TARGETS if k in params), None)
        if target is None and location:
            target = location.rstrip("/").rsplit("/", 1)[-1]
        client = scope.get("client")
        row = {"key_id": principal.key_id if principal else None,
               "key_name": principal.name if principal else None,
               "project": principal.project if principal else None,
               "method": scope["method"], "route": getattr(route, "path", scope["path"]), "action": action,
               "target_id": target, "status": status, "request_id": request_id_var.get(None),
               "client": f"{client[0]}" if client else None}
        try:
            await run_in_threadpool(self.guard.audit.write, row)
        except Exception:  # noqa: BLE001 - the call itself happened: answer it, say the row is missing
            log.exception("audit row not written: %s", row)


def document_security(schema: dict) -> None:
    """Every operation that needs a key documents 401 (with WWW-Authenticate), 403 and 429 (with Retry-After);
    their bodies are set with the other errors' (problem+json, or V2's shape under /v2)."""
    for ops in schema.get("paths", {}).values():
        for op in ops.values():
            if not op.get("security"):
                continue
            responses = op.setdefault("responses", {})
            responses.setdefault("401", {"description": "No valid API key (missing, unknown, expired or revoked)",
                                         "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}}})
            responses.setdefault("403", {"description": "The key lacks the scope this operation needs, or names "
                                                        "another project"})
            responses.setdefault("429", {"description": "Over the key's rate limit, or the project's cap of "
                                                        "running jobs",
                                         "headers": {"Retry-After": {"schema": {"type": "integer"}}}})
