"""Model selection: cross-validate, compare, tune, AutoML, learning curves, feature selection (all jobs)."""

from fastapi import APIRouter, Response
from starlette.concurrency import run_in_threadpool

from ..schemas.selection import (
    AutoMLRequest,
    CompareRequest,
    CrossValidateRequest,
    FeatureSelectionRequest,
    JobAccepted,
    LearningCurveRequest,
    TuneRequest,
)
from ..services import selection as sel
from .body import JSONBodyRoute
from .common import errors
from .deps import JobRT
from .jobs import job_view

router = APIRouter(prefix="/v1", tags=["model selection"], route_class=JSONBodyRoute)
_RESP = {"status_code": 202, "response_model": JobAccepted, "responses": errors(404, 422)}


async def _submit(r, response: Response, fn, body) -> dict:
    job = await run_in_threadpool(fn, r.meta, r.art, body.model_dump(), r.queue.enqueue,
                                  r.settings.classifier_max_numeric_classes)
    response.headers["Location"] = f"/v1/jobs/{job['id']}"
    return {"job": job_view(job)}


@router.post("/cross-validate", operation_id="cross_validate", **_RESP)
async def cross_validate(body: CrossValidateRequest, response: Response, r: JobRT):
    """k-fold cross-validation (preprocessing fitted inside each training fold) as a job; one trial per fold."""
    return await _submit(r, response, sel.submit_cross_validate, body)


@router.post("/compare", operation_id="compare_models", **_RESP)
async def compare_models(body: CompareRequest, response: Response, r: JobRT):
    """Score every candidate on the same (repeated) folds; paired and corrected resampled t-tests per pair."""
    return await _submit(r, response, sel.submit_compare, body)


@router.post("/tune", operation_id="tune_model", **_RESP)
async def tune_model(body: TuneRequest, response: Response, r: JobRT):
    """Grid, random or successive-halving search; the best configuration is refitted as an ordinary model."""
    return await _submit(r, response, sel.submit_tune, body)


@router.post("/automl", operation_id="automl", **_RESP)
async def automl(body: AutoMLRequest, response: Response, r: JobRT):
    """Every suitable algorithm of the task with small grids, within a time budget: a leaderboard with
    uncertainty (std, corrected p-value against the best) and the refitted winner."""
    return await _submit(r, response, sel.submit_automl, body)


@router.post("/learning-curve", operation_id="learning_curve", **_RESP)
async def learning_curve(body: LearningCurveRequest, response: Response, r: JobRT):
    """Train and validation scores against the number of training rows."""
    return await _submit(r, response, sel.submit_learning_curve, body)


@router.post("/feature-selection", operation_id="feature_selection", **_RESP)
async def feature_selection(body: FeatureSelectionRequest, response: Response, r: JobRT):
    """Greedy forward or backward feature selection by cross-validated score."""
    return await _submit(r, response, sel.submit_feature_selection, body)
