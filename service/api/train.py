from fastapi import APIRouter, Response
from starlette.concurrency import run_in_threadpool

from ..schemas.models import TrainAccepted, TrainRequest
from ..services.training import submit_train
from ..services.widths import check_width
from .body import JSONBodyRoute
from .common import errors
from .deps import JobRT
from .jobs import job_view

router = APIRouter(prefix="/v1", tags=["training"], route_class=JSONBodyRoute)


@router.post("/train", status_code=202, response_model=TrainAccepted, operation_id="train_model",
             responses=errors(404, 413, 422))
async def train_model(body: TrainRequest, response: Response, r: JobRT):
    """Validate a training request (422 before anything is queued) and start a training job."""
    req = body.model_dump(exclude={"data"})
    if body.data is not None:
        check_width(len(body.data.columns), r.settings.max_columns, ["body", "data", "columns"])
        # the validated rows as they are (plain lists): dumping 100,000 of them would take tens of ms on the loop
        req["data"] = {**body.data.model_dump(exclude={"rows"}), "rows": body.data.rows}
    job, model_id = await run_in_threadpool(submit_train, r.meta, r.art, req, r.queue.enqueue,
                                            r.settings.classifier_max_numeric_classes, r.settings.max_train_bytes)
    response.headers["Location"] = f"/v1/jobs/{job['id']}"
    return {"job": job_view(job), "model_id": model_id}
