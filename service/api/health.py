from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ..schemas.models import Health, Problem
from ..services.health import readiness
from .deps import RuntimeDep

router = APIRouter(tags=["health"])


@router.get("/health/live", response_model=Health, response_model_exclude_none=True, operation_id="health_live")
def live() -> dict:
    """The process is up."""
    return {"status": "ok"}


@router.get("/health/ready", response_model=Health, operation_id="health_ready",
            responses={503: {"model": Problem, "description": "a dependency is not answering"}})
def ready(r: RuntimeDep):
    """Ready when the metadata store, the artifact store and the queue answer."""
    checks = readiness(r)
    if any(v != "ok" for v in checks.values()):
        return _not_ready(checks)
    return {"status": "ok", "checks": checks}


def _not_ready(checks: dict[str, str]) -> JSONResponse:
    """503 problem+json naming the stores that do not answer, with every check."""
    failing = ", ".join(k for k, v in checks.items() if v != "ok")
    return JSONResponse({"type": "about:blank", "title": "Service Unavailable", "status": 503,
                         "detail": f"not ready: {failing} not answering", "status_text": "unavailable",
                         "checks": checks}, status_code=503, media_type="application/problem+json")
