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
