"""Models: list, get, delete, predict, evaluate."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Depends, Query, Response
from starlette.concurrency import run_in_threadpool

from ..schemas.models import (
    EvaluateRequest,
    EvaluateResponse,
    ExplainRequest,
    ExplainResponse,
    ImportanceAccepted,
    ImportanceRequest,
    Model,
    ModelList,
    PartialDependenceRequest,
    PartialDependenceResponse,
    PredictResponse,
)
from ..services import models as ms
from ..services.explain import explain_payload, partial_dependence_payload
from ..services.importance import submit_importance
from ..services.model_evaluation import evaluate_request
from .body import JSONBodyRoute
from .common import Page, errors
from .deps import JobRT, JSONBody, PredictRT, ReadRT, TrainRT
from .jobs import job_view

router = APIRouter(prefix="/v1/models", tags=["models"], route_class=JSONBodyRoute)

_MODEL_FIELDS = ("id", "name", "algorithm", "task", "params", "status", "job_id", "dataset_id", "features",
                 "target", "classes", "metrics", "insight", "created_at", "size_bytes", "notes", "preprocessing")


def model_view(m: dict) -> dict:
    out = {k: m.get(k) for k in _MODEL_FIELDS}
    out["features"] = out["features"] or []
    out["metrics"] = out["metrics"] or {}
    out["notes"] = out["notes"] or []
    return out


@router.get("", response_model=ModelList, operation_id="list_models")
def list_models(r: ReadRT, page: Page = Depends(),
                algorithm: str | None = Query(None, max_length=100),
                status: str | None = Query(None, pattern="^(training|ready|failed)$")):
    rows, total = r.meta.list_models(page.limit, page.offset, algorithm=algorithm, status=status)
    return {"data": [model_view(m) for m in rows], "count": total}


@router.get("/{model_id}", response_model=Model, operation_id="get_model", responses=errors(404))
def get_model(model_id: str, r: ReadRT):
    return model_view(ms.get_record(r.meta, model_id))


@router.delete("/{model_id}", status_code=204, operation_id="delete_model", responses=errors(404, 409))
def delete_model(model_id: str, r: TrainRT):
    ms.delete(r, model_id)  # record, cached bundle, artifact; 409 while it trains
    return Response(status_code=204)


@router.post("/{model_id}/predict", response_model=PredictResponse, response_model_exclude_none=True,
             operation_id="predict", responses=errors(404, 409, 413, 415, 422),
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                 "schema": {"$ref": "#/components/schemas/PredictRequest"}}}}})
async def predict(model_id: str, r: PredictRT, body: JSONBody):
    """Predict with a ready model from named ``instances`` or positional ``rows``.

    The body is decoded and checked by hand (not by a pydantic model) to keep single-row
    predictions free of extra copies; it follows the PredictRequest schema.
    """
    # the front door (api/fastpath.py) answers this path itself over the same data plane: this route is the
    # OpenAPI contract
    data, _ = await r.plane.apredict(model_id, body)
    return Response(data, media_type="application/json")


@router.post("/{model_id}/evaluate", response_model=EvaluateResponse, response_model_exclude_none=True,
             operation_id="evaluate_model", responses=errors(404, 409, 413, 422))
async def evaluate_model(model_id: str, body: EvaluateRequest, r: PredictRT):
    """Metrics of a ready model on a stored dataset or inline data (which must hold the target)."""
    bundle = await r.cache.aget(model_id)
    out = await run_in_threadpool(evaluate_request, r, bundle, body)
    return Response(orjson.dumps(out), media_type="application/json")


@router.post("/{model_id}/explain", response_model=ExplainResponse, response_model_exclude_none=True,
             operation_id="explain_model", responses=errors(404, 409, 413, 422))
async def explain_model(model_id: str, body: ExplainRequest, r: PredictRT):
    """Additive contributions (SHAP values) of every original feature to each instance's output."""
    bundle = await r.cache.aget(model_id)
    out = await run_in_threadpool(explain_payload, r, bundle, body.model_dump())
    return Response(orjson.dumps(out), media_type="application/json")


@router.post("/{model_id}/importance", status_code=202, response_model=ImportanceAccepted,
             operation_id="permutation_importance", responses=errors(404, 409, 413, 422))
async def importance(response: Response, model_id: str, body: ImportanceRequest, r: JobRT):
    """Start a permutation-importance job (kind ``importance``) on a dataset holding the target."""
    job = await run_in_threadpool(submit_importance, r, model_id, body.model_dump())
    response.headers["Location"] = f"/v1/jobs/{job['id']}"
    return {"job": job_view(job)}


@router.post("/{model_id}/partial-dependence", response_model=PartialDependenceResponse,
             response_model_exclude_none=True, operation_id="partial_dependence",
             responses=errors(404, 409, 413, 422))
async def partial_dependence(model_id: str, body: PartialDependenceRequest, r: PredictRT):
    """Partial dependence (average) and ICE (individual) curves over a quantile / category grid."""
    bundle = await r.cache.aget(model_id)
    out = await run_in_threadpool(partial_dependence_payload, r, bundle, body.model_dump())
    return Response(orjson.dumps(out), media_type="application/json")
