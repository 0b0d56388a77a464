"""A Python SDK generated from openapi/openapi.json (openapi-python-client) drives the README walkthrough against
a real `orchard serve` that requires API keys: the SDK's AuthenticatedClient sends the key (the document declares
the bearer scheme); upload, train, poll, predict, evaluate, the error answers (401 and 403 included) and V2.

The client is generated into a temporary directory and imported from there (its dependencies, httpx, attrs and
python-dateutil, come with openapi-python-client). The CSV body form of upload is not generated (the generator
has no text/csv support); JSON rows and multipart uploads are.
"""

import importlib
import io
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration._server import ServerProcess, free_port
from tests.service.conftest import iris_csv

pytest.importorskip("openapi_python_client")
pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "openapi" / "openapi.json"


@pytest.fixture(scope="module")
def sdk(tmp_path_factory):
    out = tmp_path_factory.mktemp("sdk")
    cfg = out / "config.yaml"
    cfg.write_text("post_hooks: []\n")  # no ruff/format run on the generated code
    proc = subprocess.run([sys.executable, "-m", "openapi_python_client", "generate", "--path", str(SPEC),
                           "--meta", "none", "--config", str(cfg), "--output-path", str(out / "orchard_sdk")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = proc.stdout + proc.stderr
    assert "Could not find reference" not in log, log
    assert "Unsupported content type text/csv" in log or "text/csv" not in SPEC.read_text()
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("orchard_sdk")
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == "orchard_sdk" or m.startswith("orchard_sdk.")]:
            del sys.modules[name]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("sdk-server") / "data"
    data.mkdir()
    s = ServerProcess(data, free_port()).start()
    try:
        import httpx

        # the first key (made while the loopback server is open) switches keys on
        r = httpx.post(s.url + "/v1/keys", json={"name": "sdk", "scopes": ["admin"]}, timeout=30)
        assert r.status_code == 201, r.text
        s.key = r.json()["key"]
        r = httpx.post(s.url + "/v1/keys", json={"name": "reader", "scopes": ["read"]}, timeout=30,
                       headers={"Authorization": f"Bearer {s.key}"})
        s.read_key = r.json()["key"]
        yield s
    finally:
        s.stop()


def _csv_table():
    lines = iris_csv().strip().splitlines()
    columns = lines[0].split(",")
    rows = [[float(v) for v in ln.split(",")[:4]] + [ln.split(",")[4]] for ln in lines[1:]]
    return columns, rows


def test_walkthrough_through_the_generated_client(sdk, server):
    from orchard_sdk import AuthenticatedClient, Client
    from orchard_sdk.api.algorithms import get_algorithm, list_algorithms
    from orchard_sdk.api.datasets import get_dataset, upload_dataset
    from orchard_sdk.api.health import health_live, health_ready
    from orchard_sdk.api.jobs import cancel_job, get_job
    from orchard_sdk.api.models import delete_model, evaluate_model, get_model, predict
    from orchard_sdk.api.training import train_model
    from orchard_sdk.models import (
        Dataset,
        DatasetCreateJSON,
        EvaluateRequest,
        EvaluateResponse,
        Model,
        PredictRequest,
        PredictResponse,
        Problem,
        TrainAccepted,
        TrainRequest,
        TrainRequestParams,
        UploadDatasetFilesBody,
        Validation,
    )
    from orchard_sdk.models.job_status import JobStatus
    from orchard_sdk.types import File

    anonymous = Client(base_url=server.url, raise_on_unexpected_status=True, timeout=None)
    assert health_live.sync(client=anonymous).status == "ok"  # health needs no key
    refused = list_algorithms.sync_detailed(client=anonymous)
    assert refused.status_code == 401 and isinstance(refused.parsed, Problem)
    assert refused.headers["www-authenticate"].startswith("Bearer")
    reader = AuthenticatedClient(base_url=server.url, token=server.read_key, raise_on_unexpected_status=True,
                                 timeout=None)
    assert list_algorithms.sync(client=reader).count > 0
    client = AuthenticatedClient(base_url=server.url, token=server.key, raise_on_unexpected_status=True,
                                 timeout=None)
    assert health_live.sync(client=client).status == "ok"
    assert health_ready.sync(client=client).status == "ok"
    algos = list_algorithms.sync(client=client)
    assert "logistic_regression" in {a.name for a in algos.data}
    lr = get_algorithm.sync("logistic_regression", client=client)
    assert lr.task.value == "classification" and lr.capabilities.predict_proba

    # 1. upload: JSON rows (the typed body) and multipart (a file part)
    columns, rows = _csv_table()
    ds = upload_dataset.sync(client=client, body=DatasetCreateJSON(name="iris", columns=columns, rows=rows))
    assert isinstance(ds, Dataset) and ds.n_rows == 150 and ds.n_columns == 5
    mp = upload_dataset.sync(client=client, body=UploadDatasetFilesBody(
        file=File(payload=io.BytesIO(iris_csv().encode()), file_name="iris.csv", mime_type="text/csv"),
        name="iris-multipart"))
    assert isinstance(mp, Dataset) and mp.n_rows == 150 and mp.name == "iris-multipart"
    assert get_dataset.sync(ds.id, client=client).columns[4].type_.value == "categorical"

    # 2. train
    params = TrainRequestParams.from_dict({"C": 10})
    accepted = train_model.sync(client=client, body=TrainRequest(
        algorithm="logistic_regression", params=params, dataset_id=ds.id, target="species", name="iris-sdk",
        validation=Validation(holdout=0.2, random_state=0)))
    assert isinstance(accepted, TrainAccepted)
    # 3. poll
    deadline = time.monotonic() + 60
    job = get_job.sync(accepted.job.id, client=client)
    while job.status in (JobStatus.QUEUED, JobStatus.RUNNING) and time.monotonic() < deadline:
        time.sleep(0.1)
        job = get_job.sync(accepted.job.id, client=client)
    assert job.status == JobStatus.SUCCEEDED, job
    model = get_model.sync(accepted.model_id, client=client)
    assert isinstance(model, Model) and model.status.value == "ready" and model.params["C"] == 10

    # 4. predict: positional rows and named instances
    pred = predict.sync(accepted.model_id, client=client, body=PredictRequest.from_dict(
        {"rows": [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]], "return_proba": True}))
    assert isinstance(pred, PredictResponse)
    assert pred.predictions == ["setosa", "virginica"]
    assert pred.classes == ["setosa", "versicolor", "virginica"] and abs(sum(pred.probabilities[0]) - 1) < 1e-9
    named = predict.sync(accepted.model_id, client=client, body=PredictRequest.from_dict(
        {"instances": [{"petal_width": 0.2, "petal_length": 1.4, "sepal_length": 5.1, "sepal_width": 3.5}]}))
    assert named.predictions == ["setosa"]

    # 5. evaluate
    ev = evaluate_model.sync(accepted.model_id, client=client, body=EvaluateRequest(dataset_id=ds.id))
    assert isinstance(ev, EvaluateResponse) and ev.n_samples == 150 and ev.metrics["accuracy"] > 0.9
    assert ev.confusion_matrix.labels == ["setosa", "versicolor", "virginica"]

    # errors: each one a typed Problem with a sentence naming the problem
    missing = get_model.sync("mdl_missing", client=client)
    assert isinstance(missing, Problem) and missing.status == 404 and "mdl_missing" in missing.detail
    bad = train_model.sync(client=client, body=TrainRequest(
        algorithm="logistic_regression", params=TrainRequestParams.from_dict({"C": -1}), dataset_id=ds.id,
        target="species"))
    assert isinstance(bad, Problem) and bad.status == 422 and "C" in bad.detail
    wrong = predict.sync(accepted.model_id, client=client, body=PredictRequest.from_dict(
        {"instances": [{"sepal_lenght": 1.0}]}))
    assert isinstance(wrong, Problem) and wrong.status == 422 and "sepal_lenght" in wrong.detail
    done = cancel_job.sync(accepted.job.id, client=client)
    assert isinstance(done, Problem) and done.status == 409
    detailed = predict.sync_detailed(accepted.model_id, client=client, body=PredictRequest.from_dict({"rows": [[1]]}))
    assert detailed.status_code == 422 and isinstance(detailed.parsed, Problem)
    assert detailed.headers["x-request-id"]

    # the Open Inference Protocol through the same SDK
    from orchard_sdk.api.open_inference_protocol import v2_infer, v2_model_metadata, v2_model_ready
    from orchard_sdk.models import InferenceRequest, InferenceResponse, ModelMetadata, V2Error

    meta = v2_model_metadata.sync("iris-sdk", client=client)
    assert isinstance(meta, ModelMetadata) and [o.name for o in meta.outputs] == ["predict", "predict_proba"]
    assert v2_model_ready.sync("iris-sdk", client=client).ready is True
    out = v2_infer.sync("iris-sdk", client=client, body=InferenceRequest.from_dict(
        {"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP64",
                     "data": [5.1, 3.5, 1.4, 0.2, 6.7, 3.0, 5.2, 2.3]}], "outputs": [{"name": "predict"}]}))
    assert isinstance(out, InferenceResponse) and out.outputs[0].data == ["setosa", "virginica"]
    err = v2_model_metadata.sync("no-such-model", client=client)
    assert isinstance(err, V2Error) and "no-such-model" in err.error

    # a read key cannot predict: a typed 403 naming the scope
    denied = predict.sync(accepted.model_id, client=reader, body=PredictRequest.from_dict({"rows": [[1, 2, 3, 4]]}))
    assert isinstance(denied, Problem) and denied.status == 403 and "predict" in denied.detail

    # delete
    assert delete_model.sync_detailed(accepted.model_id, client=client).status_code == 204
    gone = get_model.sync(accepted.model_id, client=client)
    assert isinstance(gone, Problem) and gone.status == 404
