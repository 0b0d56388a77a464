import json
from pathlib import Path

from openapi_spec_validator import validate

from service.cli import openapi_document

SPEC = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


def test_committed_spec_matches_the_app():
    current = openapi_document()
    committed = json.loads(SPEC.read_text())
    assert committed == current, "openapi/openapi.json is stale: run `orchard export-openapi`"


def test_spec_is_valid_and_names_operations():
    spec = json.loads(SPEC.read_text())
    validate(spec)
    ops = {op["operationId"] for path in spec["paths"].values() for op in path.values()}
    assert {"upload_dataset", "train_model", "get_job", "cancel_job", "predict", "evaluate_model",
            "list_algorithms", "get_model", "delete_model"} <= ops
    paths = spec["paths"]
    for p in ["/health/live", "/health/ready", "/v1/algorithms", "/v1/algorithms/{name}", "/v1/datasets",
              "/v1/datasets/{dataset_id}", "/v1/datasets/{dataset_id}/rows", "/v1/train", "/v1/jobs",
              "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/cancel", "/v1/jobs/{job_id}/events", "/v1/models",
              "/v1/models/{model_id}", "/v1/models/{model_id}/predict", "/v1/models/{model_id}/evaluate"]:
        assert p in paths, p
    upload = paths["/v1/datasets"]["post"]["requestBody"]["content"]
    assert {"text/csv", "multipart/form-data", "application/json"} <= set(upload)
    assert "422" in paths["/v1/train"]["post"]["responses"]


def _refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref":
                yield v
            else:
                yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def test_every_reference_resolves_and_every_error_is_described():
    """No dangling $ref (a generated SDK would lose the type), and each error response has its body schema."""
    spec = json.loads(SPEC.read_text())
    schemas = spec["components"]["schemas"]
    for ref in set(_refs(spec)):
        assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in schemas, ref
    assert "HTTPValidationError" not in schemas  # validation errors are problem+json 422, not FastAPI's default
    for path, ops in spec["paths"].items():
        for op in ops.values():
            for code, resp in op["responses"].items():
                if code[0] in "45":
                    want = ({"application/json": "V2Error"} if path.startswith("/v2")
                            else {"application/problem+json": "Problem"})
                    got = {ct: c["schema"]["$ref"].rsplit("/", 1)[1] for ct, c in resp["content"].items()}
                    assert got == want, (path, code, got)
            if "requestBody" in op:
                assert "413" in op["responses"], (path, op["operationId"])
    assert {"v2_server_live", "v2_server_ready", "v2_server_metadata", "v2_model_metadata", "v2_model_ready",
            "v2_infer", "metrics"} <= {op["operationId"] for ops in spec["paths"].values() for op in ops.values()}
