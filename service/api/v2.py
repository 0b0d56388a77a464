"""Open Inference Protocol (KServe V2) REST endpoints over Orchard's ready models.

``model_name`` is a model id or a model's unique name. Errors are ``{"error": "..."}`` (rendered by
errors.install_handlers for every /v2 path). The tensor handling is in services/oip.py.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from .. import __version__
from ..errors import NotFound
from ..schemas.v2 import (
    ModelMetadata,
    ModelReady,
    ServerLive,
    ServerMetadata,
    ServerReady,
    V2Error,
)
from ..services.dataplane import DataPlane
from ..services.health import require_ready
from ..services.inference import run_sized
from .body import infer_header_length, whole_body
from .deps import OnRows, OnRowsDep, PredictRT, Read, ReadRT, RuntimeDep

router = APIRouter(prefix="/v2", tags=["open-inference-protocol"])
EXTENSIONS = ["binary_tensor_data"]


def _err(*codes: int) -> dict:
    text = {400: "Invalid request or ambiguous model name", 404: "Unknown model", 409: "Model not ready",
            413: "Body too large", 415: "Unsupported content type", 503: "Not ready"}
    return {c: {"model": V2Error, "description": text[c]} for c in codes}


@router.get("/health/live", response_model=ServerLive, operation_id="v2_server_live")
def server_live():
    """The server is live."""
    return {"live": True}


@router.get("/health/ready", response_model=ServerReady, operation_id="v2_server_ready", responses=_err(503))
def server_ready(r: RuntimeDep):
    """Ready when the metadata store, the artifact store and the queue answer."""
    require_ready(r)  # 503 naming the first that does not
    return {"ready": True}


@router.get("", response_model=ServerMetadata, operation_id="v2_server_metadata")
def server_metadata(_: Read):
    """Server name, version and protocol extensions."""
    return {"name": "orchard", "version": __version__, "extensions": EXTENSIONS}


@router.get("/models/{model_name}", response_model=ModelMetadata, response_model_exclude_none=True,
            operation_id="v2_model_metadata", responses=_err(400, 404))
def model_metadata(model_name: str, r: ReadRT):
    """Inputs (one per feature, or one [n, n_features] tensor) and outputs of a model."""
    return r.plane.metadata(model_name)


@router.get("/models/{model_name}/versions/{model_version}", response_model=ModelMetadata,
            response_model_exclude_none=True, include_in_schema=False)
def model_version_metadata(model_name: str, model_version: str, r: ReadRT):
    _check_version(model_version)
    return r.plane.metadata(model_name)


@router.get("/models/{model_name}/ready", response_model=ModelReady, operation_id="v2_model_ready",
            responses=_err(400, 404, 409))
def model_ready(model_name: str, r: ReadRT):
    """200 when the model can serve inference now (its bundle is loaded); 409 while it trains or if it failed."""
    return r.plane.ready(model_name)


@router.get("/models/{model_name}/versions/{model_version}/ready", response_model=ModelReady, include_in_schema=False)
def model_version_ready(model_name: str, model_version: str, r: ReadRT):
    _check_version(model_version)
    return r.plane.ready(model_name)


def _check_version(v: str) -> None:
    if v != "1":
        raise NotFound(f"model version {v!r} does not exist; every Orchard model has the single version '1'")


async def _infer(request: Request, plane: DataPlane, model_name: str, on_rows: OnRows) -> Response:
    """The documented route (the front door answers ``/v2/models/{name}/infer`` itself; this one serves the
    versioned path) over the same data plane: the content type checked as the front door checks it, the model
    found, then the body read."""
    hlen = infer_header_length(request)
    bundle = await plane.amodel_named(model_name)
    body = await whole_body(request)
    data, json_len, n = await run_sized(len(body), plane.infer, bundle, model_name, body, hlen)
    on_rows("v2", bundle.model_id, n, 200)
    if json_len is None:
        return Response(data, media_type="application/json")
    return Response(data, media_type="application/octet-stream",
                    headers={"Inference-Header-Content-Length": str(json_len)})


_INFER_DOC = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": {"$ref": "#/components/schemas/InferenceRequest"}}}}}
_INFER_OK = {200: {"description": "Inference outputs", "content": {"application/json": {
    "schema": {"$ref": "#/components/schemas/InferenceResponse"}}}}}


@router.post("/models/{model_name}/infer", operation_id="v2_infer", openapi_extra=_INFER_DOC,
             responses={**_INFER_OK, **_err(400, 404, 409, 413, 415)})
async def infer(request: Request, model_name: str, r: PredictRT, on_rows: OnRowsDep):
    """Inference: inputs as one [n, n_features] tensor or one tensor per feature; outputs predict,
    predict_proba, ... (all that apply unless ``outputs`` names some). Binary tensor data is accepted."""
    return await _infer(request, r.plane, model_name, on_rows)


@router.post("/models/{model_name}/versions/{model_version}/infer", include_in_schema=False)
async def infer_version(request: Request, model_name: str, model_version: str, r: PredictRT, on_rows: OnRowsDep):
    _check_version(model_version)
    return await _infer(request, r.plane, model_name, on_rows)
