"""The column cap of uploads (ORCHARD_MAX_COLUMNS, service/services/widths.py): CSV, Parquet and JSON uploads
and the inline tables of train and evaluate wider than the cap get 422 naming the limit before the table is
parsed; tables at the cap are stored."""

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.services.widths import csv_header_width
from service.settings import Settings
from tests.service.conftest import assert_problem, wait_job

CAP = 20


@pytest.fixture
def narrow(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", workers=0, secret_key="test-secret", max_columns=CAP)
    with TestClient(create_app(settings)) as c:
        yield c


def _csv(width: int) -> bytes:
    names = [f"c{j}" for j in range(width)]
    return (",".join(names) + "\n" + ",".join(str(j) for j in range(width)) + "\n").encode()


def _parquet(width: int) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table({f"c{j}": [float(j), 1.0] for j in range(width)}), buf)
    return buf.getvalue()


def _json(width: int) -> dict:
    return {"columns": [f"c{j}" for j in range(width)], "rows": [list(range(width))]}


def test_wider_uploads_are_refused_naming_the_limit_and_store_nothing(narrow, monkeypatch):
    import service.services.datasets as datasets_service
    import service.services.ingest as ingest

    def never(*a, **k):
        raise AssertionError("a table over the cap was parsed")

    monkeypatch.setattr(datasets_service, "parse_json_table", never)
    monkeypatch.setattr(ingest, "_read_piece", never)  # the CSV parser
    monkeypatch.setattr(ingest, "Writer", never)  # where a Parquet file's batches go
    wide = CAP + 1
    calls = [
        dict(content=_csv(wide), headers={"content-type": "text/csv"}),
        dict(content=_parquet(wide), headers={"content-type": "application/vnd.apache.parquet"}),
        dict(files={"file": ("wide.csv", _csv(wide), "text/csv")}),
        dict(files={"file": ("wide.parquet", _parquet(wide), "application/octet-stream")}),
        dict(files={"file": ("wide.bin", _parquet(wide), "application/octet-stream")}),  # Parquet by its magic
        dict(json=_json(wide)),
    ]
    for kw in calls:
        r = narrow.post("/v1/datasets", **kw)
        body = assert_problem(r, 422, f"the limit is {CAP}", "ORCHARD_MAX_COLUMNS")
        assert body["errors"][0]["loc"][0] == "body"
    assert narrow.get("/v1/datasets").json()["count"] == 0


def test_tables_at_the_cap_are_stored(narrow):
    for kw in (dict(content=_csv(CAP), headers={"content-type": "text/csv"}),
               dict(content=_parquet(CAP), headers={"content-type": "application/vnd.apache.parquet"}),
               dict(files={"file": ("ok.csv", _csv(CAP), "text/csv")}),
               dict(json=_json(CAP))):
        r = narrow.post("/v1/datasets", **kw)
        assert r.status_code == 201, r.text
        assert r.json()["n_columns"] == CAP


def test_the_csv_header_is_counted_with_quotes_and_only_as_far_as_needed(tmp_path):
    path = tmp_path / "h.csv"
    path.write_bytes(b'a,"b,c","d\n""e""",f\n1,2,3,4\n')
    assert csv_header_width(path, 100) == 4
    path.write_bytes(b"a,b,c\n" + b"1,2,3\n" * 10)
    assert csv_header_width(path, 100) == 3
    path.write_bytes(b",".join(b"c%d" % j for j in range(200_000)) + b"\n")  # a header wider than a read
    assert 1000 < csv_header_width(path, 1000) < 200_000  # stops counting past the cap
    assert csv_header_width(path, 10**6) == 200_000
    path.write_bytes(b"only")
    assert csv_header_width(path, 5) == 1


def test_inline_tables_of_train_and_evaluate_are_capped_too(narrow):
    wide = _json(CAP + 1)
    r = narrow.post("/v1/train", json={"algorithm": "linear_regression", "data": wide, "target": "c0"})
    body = assert_problem(r, 422, f"the limit is {CAP}", "ORCHARD_MAX_COLUMNS")
    assert body["errors"][0]["loc"] == ["body", "data", "columns"]
    table = {**_json(CAP), "rows": [list(range(CAP))] * 5}
    ok = narrow.post("/v1/train", json={"algorithm": "linear_regression", "data": table, "target": "c0"})
    assert ok.status_code == 202, ok.text
    assert wait_job(narrow, ok.json()["job"]["id"])["status"] == "succeeded"
    r = narrow.post(f"/v1/models/{ok.json()['model_id']}/evaluate", json={"data": wide})
    assert_problem(r, 422, f"the limit is {CAP}")
