"""No server error from any input: schemathesis over every operation of the app's OpenAPI document, in-process
(ASGI), with a real dataset and a trained model behind the ids. Checked: no 5xx, no status code the document
does not list, bodies and content types as documented.

Path parameters naming a dataset or a model (and ``dataset_id`` in bodies) are replaced by the real ids, so
the generated inputs reach the code behind the lookups; DELETE keeps its generated ids (a real one would remove
the fixtures). Authentication is on (an admin key from ``ORCHARD_ADMIN_KEY``), so every operation is reached
as a client with every scope reaches it, and its 401/403/429 are documented answers. Bounded by
``MAX_EXAMPLES`` per operation to stay within about a minute or two.
"""

import shutil
import tempfile
import time
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck
from hypothesis import settings as hsettings
from schemathesis import checks
from schemathesis.python.asgi import get_client

from service.app import create_app
from service.settings import Settings
from tests.service.conftest import iris_csv

MAX_EXAMPLES = 30
CHECKS = [checks.not_a_server_error, checks.status_code_conformance, checks.content_type_conformance,
          checks.response_schema_conformance]
pytestmark = pytest.mark.timeout(900)


ADMIN_KEY = "orch_schemathesis-admin-key-0123456789abcdef"


@pytest.fixture(scope="module")
def auth_headers() -> dict:
    """Headers every generated request carries: the admin key."""
    return {"Authorization": f"Bearer {ADMIN_KEY}"}


# the app is made at import: schemathesis generates one test per operation from its document at collection
_DATA = Path(tempfile.mkdtemp(prefix="orchard-schemathesis-"))
APP = create_app(Settings(data_dir=_DATA / "data", workers=0, max_body_bytes=2_000_000, secret_key="test-secret",
                          admin_key=ADMIN_KEY))
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@pytest.fixture(scope="module")
def real_ids(auth_headers):
    """An iris dataset and a model trained on it: {"dataset_id": ..., "model_id": ...}."""
    with get_client(APP) as c:  # schemathesis's own in-process client: the app's lifespan starts once
        up = c.post("/v1/datasets?name=iris", data=iris_csv(), headers={"content-type": "text/csv", **auth_headers})
        assert up.status_code == 201, up.text
        ds = up.json()["id"]
        r = c.post("/v1/train", json={"algorithm": "logistic_regression", "dataset_id": ds, "target": "species"},
                   headers=auth_headers)
        assert r.status_code == 202, r.text
        deadline = time.monotonic() + 120
        while c.get(f"/v1/jobs/{r.json()['job']['id']}", headers=auth_headers).json()["status"] != "succeeded":
            assert time.monotonic() < deadline, "the fixture model did not train"
            time.sleep(0.05)
    yield {"dataset_id": ds, "model_id": r.json()["model_id"]}
    shutil.rmtree(_DATA, ignore_errors=True)


def _use_real_ids(case, ids: dict) -> None:
    if case.method.upper() == "DELETE":
        return
    params = case.path_parameters or {}
    for name in ("dataset_id", "model_id", "model_name"):
        if name in params:
            params[name] = ids["dataset_id" if name == "dataset_id" else "model_id"]
    if isinstance(case.body, dict) and "dataset_id" in case.body:
        case.body["dataset_id"] = ids["dataset_id"]


@schema.parametrize()
@hsettings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
           suppress_health_check=list(HealthCheck))
def test_no_server_error_and_every_answer_as_documented(case, real_ids, auth_headers):
    _use_real_ids(case, real_ids)
    case.headers = {**(case.headers or {}), **auth_headers}  # the key, not one generated from the bearer scheme
    response = case.call_and_validate(checks=CHECKS)
    assert response.status_code != 401, (case.method, case.path, response.text)  # the key reached every operation
    assert response.headers.get("x-request-id"), (case.method, case.path, response.status_code)
