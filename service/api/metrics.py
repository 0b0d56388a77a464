"""GET /metrics: Prometheus text exposition (404 when ORCHARD_METRICS=false)."""

from fastapi import APIRouter, Request, Response

from ..errors import NotFound
from ..observability import CONTENT_TYPE
from .common import errors
from .deps import MetricsReader

router = APIRouter(tags=["health"])


@router.get("/metrics", operation_id="metrics", response_class=Response,
            responses={200: {"description": "Prometheus text format", "content": {"text/plain": {
                "schema": {"type": "string"}}}}, **errors(404)})
def metrics(request: Request, _: MetricsReader):
    """Requests by route and status with latency histograms, jobs by kind and status, queue depth,
    model cache hits/misses/size, rows predicted."""
    m = request.app.state.metrics
    if m is None:
        raise NotFound("metrics are off (ORCHARD_METRICS=false)")
    return Response(m.exposition(), media_type=CONTENT_TYPE)
