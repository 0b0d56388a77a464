"""GET /metrics: Prometheus text exposition (404 when ORCHARD_METRICS=false)."""

from fastapi import APIRouter, Response

from ..observability import CONTENT_TYPE
from .common import errors
from .deps import MetricsDep, MetricsReader

router = APIRouter(tags=["health"])


@router.get("/metrics", operation_id="metrics", response_class=Response,
            responses={200: {"description": "Prometheus text format", "content": {"text/plain": {
                "schema": {"type": "string"}}}}, **errors(404)})
def metrics(_: MetricsReader, m: MetricsDep):
    """Requests by route and status with latency histograms, jobs by kind and status, queue depth,
    model cache hits/misses/size, rows predicted."""
    return Response(m.exposition(), media_type=CONTENT_TYPE)
