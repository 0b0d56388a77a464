"""Typed dependencies of the routes: the principal with a scope, the runtime as its project sees it, the app's
metrics, and the bodies a route decodes by hand.

The security gate (service/security.py) has authenticated the request (401/429) and left its principal in the
request state; these check the scope the route needs (403 naming it) and give the route its view of the stores
(``ProjectRuntime``: another project's records do not exist, 404). A route declares what it needs in its
signature, e.g. ``def get_model(model_id: str, r: ReadRT)``; the OpenAPI document shows the scope. This module
is the one place that reads the app's state (``request.app.state``). FastAPI resolves a route's dependencies in
the order of its parameters: a body dependency comes after the runtime one, so a key without the scope gets its
403 before its body is looked at.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Query, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer, SecurityScopes

from ..errors import NotFound, ProblemError
from ..observability import Metrics
from ..runtime import Runtime, rt
from ..services.dataplane import DataPlane
from ..services.keys import PROJECT_PATTERN, Forbidden, Principal, Unauthorized
from ..services.projects import ProjectRuntime
from .body import DatasetUpload, json_body

bearer = HTTPBearer(auto_error=False, scheme_name="bearer", bearerFormat="orch_...",
                    description="An API key (`orchard keys create`, `POST /v1/keys`) as `Authorization: Bearer "
                                "<key>`; scopes: read, predict, train, admin (docs/security.md).")


class ProjectJobCap(ProblemError):
    status, title, type_ = 429, "Too Many Jobs", "urn:orchard:problem:project-job-cap"


def principal(request: Request, security_scopes: SecurityScopes,
              _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Principal:
    """The request's principal, if it holds every scope the route needs (403 naming the missing one)."""
    p = request.scope.get("state", {}).get("principal")
    if p is None:  # a route reached without the gate (an open path): refuse rather than guess
        raise Unauthorized("this server requires an API key: send Authorization: Bearer <key>")
    for s in security_scopes.scopes:
        if not p.allows(s):
            raise Forbidden(f"this API key lacks the {s!r} scope needed by {request.method} {request.url.path} "
                            f"(it has: {', '.join(sorted(p.scopes))})")
    return p


def metrics_reader(request: Request, security_scopes: SecurityScopes,
                   creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Principal | None:
    """/metrics: open with ORCHARD_METRICS_PUBLIC=true, else ``principal`` (the read scope)."""
    if rt(request).settings.metrics_public:
        return None
    return principal(request, security_scopes, creds)


def project_runtime(request: Request, p: Annotated[Principal, Security(principal)],
                    project: Annotated[str | None, Query(
                        pattern=PROJECT_PATTERN, max_length=63,
                        description="Admin keys: the project to act in (default: every project for reads, the "
                                    "key's own for what is created). Other keys may name only their own.")] = None,
                    ) -> ProjectRuntime:
    if project is not None and project != p.project and not p.admin:
        raise Forbidden(f"this API key belongs to project {p.project!r}; only admin keys name another project")
    if p.admin:
        return ProjectRuntime(rt(request), p, project, project or p.project)
    return ProjectRuntime(rt(request), p, p.project, p.project)


def job_runtime(r: Annotated[ProjectRuntime, Security(project_runtime)]) -> ProjectRuntime:
    """``project_runtime`` for a route that starts a job: 429 when the project has its cap of queued + running
    jobs (ORCHARD_MAX_PROJECT_JOBS)."""
    cap = r.settings.max_project_jobs
    if cap:
        n = r.meta.store.count_active_jobs(r.home)
        if n >= cap:
            raise ProjectJobCap(f"project {r.home!r} has {n} queued or running jobs, its cap "
                                "(ORCHARD_MAX_PROJECT_JOBS); wait until some finish, or cancel some")
    return r


def data_plane(request: Request) -> DataPlane:
    return request.app.state.runtime.plane


def metrics_registry(request: Request) -> Metrics:
    """The app's metrics; 404 when they are off (ORCHARD_METRICS=false)."""
    m = request.app.state.metrics
    if m is None:
        raise NotFound("metrics are off (ORCHARD_METRICS=false)")
    return m


OnRows = Callable[[str, str, int, int], None]  # (protocol, model id, rows predicted, status): Metrics.on_rows


def _count_nothing(protocol: str, model_id: str, n_rows: int, status: int) -> None:
    return None


def rows_counter(request: Request) -> OnRows:
    """Where a route counts the rows it predicted: the app's ``Metrics.on_rows``, nowhere when metrics are off."""
    return request.app.state.on_rows or _count_nothing


Plane = Annotated[DataPlane, Depends(data_plane)]  # inference over the model cache (services/dataplane.py)
MetricsDep = Annotated[Metrics, Depends(metrics_registry)]
OnRowsDep = Annotated[OnRows, Depends(rows_counter)]
JSONBody = Annotated[bytes, Depends(json_body)]  # a JSON body decoded by hand: 415 for another type, 422 empty
UploadDep = Annotated[DatasetUpload, Depends(DatasetUpload)]  # a dataset upload, read as services/datasets asks
RuntimeDep = Annotated[Runtime, Depends(rt)]  # the whole runtime, no key: for the open health routes only
Read = Annotated[Principal, Security(principal, scopes=["read"])]
Admin = Annotated[Principal, Security(principal, scopes=["admin"])]
ReadRT = Annotated[ProjectRuntime, Security(project_runtime, scopes=["read"])]
PredictRT = Annotated[ProjectRuntime, Security(project_runtime, scopes=["predict"])]
TrainRT = Annotated[ProjectRuntime, Security(project_runtime, scopes=["train"])]
JobRT = Annotated[ProjectRuntime, Security(job_runtime, scopes=["train"])]
MetricsReader = Annotated[Principal | None, Security(metrics_reader, scopes=["read"])]
AdminRT = Annotated[ProjectRuntime, Security(project_runtime, scopes=["admin"])]

__all__ = ["Admin", "AdminRT", "JSONBody", "JobRT", "MetricsDep", "OnRows", "OnRowsDep", "Plane", "PredictRT",
           "Read", "ReadRT", "RuntimeDep", "TrainRT", "UploadDep", "principal"]
