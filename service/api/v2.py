"""Open Inference Protocol (KServe V2) REST endpoints over Orchard's ready models.

``model_name`` is a model id or a model's unique name. Errors are ``{"error": "..."}`` (rendered by
errors.install_handlers for every /v2 path). The tensor handling is in services/oip.py.
"""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Request, Response

from .. import __version__
from ..errors import Conflict, NotFound, ProblemError, Unavailable
from ..runtime import rt
from ..schemas.v2 import (
    ModelMetadata,
    ModelReady,
    ServerLive,
    ServerMetadata,
    ServerReady,
    V2Error,
)
from ..services import oip, rl
from ..services.inference import run_sized
from .deps import PredictRT, Read, ReadRT

router = APIRouter(prefix="/v2", tags=["open-inference-protocol"])
EXTENSIONS = ["binary_tensor_data"]


def _err(*codes: int) -> dict:
    text = {400: "Invalid request or ambiguous model name", 404: "Unknown model", 409: "Model not ready",
            413: "Body too large", 415: "Unsupported content type", 503: "Not ready"}
    return {c: {"model": V2Error, "description": text[c]} for c in codes}


def resolve(r, model_name: str) -> dict:
    """The model record for an id or a unique name (in the project the principal sees)."""
    return oip.resolve_model(r.meta, model_name)


async def _bundle(r, model_name: str):
    bundle = r.cache.peek(model_name)  # an id already loaded: no lookup
    if bundle is not None:
        return bundle
    return await r.cache.aget(resolve(r, model_name)["id"])


@router.get("/health/live", response_model=ServerLive, operation_id="v2_server_live")
def server_live():
    """The server is live."""
    return {"live": True}


@router.get("/health/ready", response_model=ServerReady, operation_id="v2_server_ready", responses=_err(503))
def server_ready(request: Request):
    """Ready when the metadata store, the artifact store and the queue answer."""
    r = rt(request)
    for name, fn in (("metadata", r.meta.ping), ("artifacts", r.art.ping), ("queue", r.queue.ping)):
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - report any failure
            raise Unavailable(f"not ready: {name} not answering ({exc})") from None
    return {"ready": True}


@router.get("", response_model=ServerMetadata, operation_id="v2_server_metadata")
def server_metadata(_: Read):
    """Server name, version and protocol extensions."""
    return {"name": "orchard", "version": __version__, "extensions": EXTENSIONS}


def _metadata(r, model_name: str) -> dict:
    record = resolve(r, model_name)
    from core import registry

    features = record.get("features") or []
    numeric = "FP64"
    if record["task"] == rl.TASK and record["algorithm"] not in rl.MATRIX_INPUT:
        numeric = "INT64"  # states are labels: BYTES, or INT64 when the state column is numeric
    inputs = [{"name": f["name"], "datatype": "BYTES" if f.get("type") == "categorical" else numeric,
               "shape": [-1]} for f in features]
    n_components = None
    if record["status"] == "ready":
        bundle = r.cache.get(record["id"])
        caps = oip.bundle_capabilities(bundle)
        comp = getattr(bundle.estimator, "components_", None)
        n_components = int(comp.shape[0]) if comp is not None and getattr(comp, "ndim", 0) == 2 else None
    else:
        try:
            cls = registry.get(record["algorithm"])
            caps = dict(cls.capabilities(), score_samples=callable(getattr(cls, "score_samples", None)))
        except Exception:  # noqa: BLE001 - an unknown algorithm only loses the optional outputs
            caps = {}
    classes = record.get("classes")
    params = {"id": record["id"], "model_name": record["name"], "algorithm": record["algorithm"],
              "task": record["task"], "status": record["status"],
              "input_matrix": f"alternatively one tensor of shape [-1, {len(features)}] in input order"}
    if classes is not None:
        params["classes"] = orjson.dumps(classes).decode()
    return {"name": model_name, "versions": ["1"], "platform": "orchard", "inputs": inputs,
            "outputs": oip.available_outputs(record["task"], caps, classes, n_components), "parameters": params}


@router.get("/models/{model_name}", response_model=ModelMetadata, response_model_exclude_none=True,
            operation_id="v2_model_metadata", responses=_err(400, 404))
def model_metadata(model_name: str, r: ReadRT):
    """Inputs (one per feature, or one [n, n_features] tensor) and outputs of a model."""
    return _metadata(r, model_name)


@router.get("/models/{model_name}/versions/{model_version}", response_model=ModelMetadata,
            response_model_exclude_none=True, include_in_schema=False)
def model_version_metadata(model_name: str, model_version: str, r: ReadRT):
    _check_version(model_version)
    return _metadata(r, model_name)


def _ready(r, model_name: str) -> dict:
    record = resolve(r, model_name)
    if record["status"] != "ready":
        raise Conflict(f"model {model_name!r} is not ready (status {record['status']})")
    r.cache.get(record["id"])  # loads (and verifies) the bundle: ready means servable now
    return {"name": model_name, "ready": True}


@router.get("/models/{model_name}/ready", response_model=ModelReady, operation_id="v2_model_ready",
            responses=_err(400, 404, 409))
def model_ready(model_name: str, r: ReadRT):
    """200 when the model can serve inference now (its bundle is loaded); 409 while it trains or if it failed."""
    return _ready(r, model_name)


@router.get("/models/{model_name}/versions/{model_version}/ready", response_model=ModelReady, include_in_schema=False)
def model_version_ready(model_name: str, model_version: str, r: ReadRT):
    _check_version(model_version)
    return _ready(r, model_name)


def _check_version(v: str) -> None:
    if v != "1":
        raise NotFound(f"model version {v!r} does not exist; every Orchard model has the single version '1'")


async def _infer(request: Request, r, model_name: str) -> Response:
    ctype = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    hlen = request.headers.get("inference-header-content-length")
    if hlen is None and ctype not in ("application/json", ""):
        raise ProblemError(f"content type {ctype!r} is not supported: send application/json, or binary tensor "
                           "data with an Inference-Header-Content-Length header", status=415)
    bundle = await _bundle(r, model_name)
    body = await request.body()
    return await run_sized(len(body), _infer_sync, request, bundle, model_name, body, hlen)


def _infer_sync(request: Request, bundle, model_name: str, body: bytes, hlen) -> Response:
    data, json_len, n = oip.infer(bundle, model_name, body, hlen, rt(request).settings.max_predict_rows)
    on_predict = getattr(request.app.state, "on_predict", None)
    if on_predict is not None:
        on_predict(bundle.model_id, n, 200)
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
async def infer(request: Request, model_name: str, r: PredictRT):
    """Inference: inputs as one [n, n_features] tensor or one tensor per feature; outputs predict,
    predict_proba, ... (all that apply unless ``outputs`` names some). Binary tensor data is accepted."""
    return await _infer(request, r, model_name)


@router.post("/models/{model_name}/versions/{model_version}/infer", include_in_schema=False)
async def infer_version(request: Request, model_name: str, model_version: str, r: PredictRT):
    _check_version(model_version)
    return await _infer(request, r, model_name)
