import math

import pytest

from tests.service.conftest import assert_problem, iris_csv, upload_csv, while_paused


def test_health_and_algorithms(client):
    assert client.get("/health/live").json() == {"status": "ok"}
    ready = client.get("/health/ready").json()
    assert ready["status"] == "ok" and set(ready["checks"]) == {"metadata", "artifacts", "queue"}
    algos = client.get("/v1/algorithms").json()
    assert algos["count"] == len(algos["data"]) >= 3
    names = {a["name"] for a in algos["data"]}
    assert {"linear_regression", "logistic_regression", "kmeans"} <= names
    one = client.get("/v1/algorithms/kmeans").json()
    assert one["task"] == "clustering"
    assert one["params_schema"]["additionalProperties"] is False
    assert one["params_schema"]["properties"]["n_clusters"]["default"] == 8
    assert_problem(client.get("/v1/algorithms/nope"), 404, "nope")


def test_csv_upload_infers_types_and_missing(client):
    text = "a,b,c,d\n1,x,true,\n2.5,y,false,3\n,x,TRUE,4\n"
    r = upload_csv(client, text, name="tiny")
    assert r.status_code == 201, r.text
    ds = r.json()
    assert r.headers["location"] == f"/v1/datasets/{ds['id']}"
    assert ds["name"] == "tiny" and ds["n_rows"] == 3 and ds["n_columns"] == 4
    cols = {c["name"]: c for c in ds["columns"]}
    assert cols["a"]["type"] == "numeric" and cols["a"]["n_missing"] == 1
    assert math.isclose(cols["a"]["summary"]["mean"], 1.75)
    assert cols["b"]["type"] == "categorical" and cols["b"]["summary"]["n_categories"] == 2
    assert cols["c"]["type"] == "boolean" and cols["c"]["summary"] == {"true": 2, "false": 1}
    assert cols["d"]["n_missing"] == 1
    rows = client.get(f"/v1/datasets/{ds['id']}/rows", params={"limit": 2, "offset": 1}).json()
    assert rows["columns"] == ["a", "b", "c", "d"]
    assert rows["rows"] == [[2.5, "y", False, 3], [None, "x", True, 4]]
    assert rows["total"] == 3


def test_type_override_and_json_and_multipart(client):
    r = upload_csv(client, "zip,v\n01000,1\n02000,2\n", types="zip:categorical")
    assert r.status_code == 201
    assert r.json()["columns"][0]["type"] == "categorical"
    rows = client.get(f"/v1/datasets/{r.json()['id']}/rows").json()["rows"]
    assert rows[0][0] == "01000"  # leading zero kept: the column was forced categorical
    r = client.post("/v1/datasets", json={"name": "j", "columns": ["n", "s", "b"],
                                          "rows": [[1, "a", True], [None, "b", False], [3.5, None, None]]})
    assert r.status_code == 201, r.text
    types = [c["type"] for c in r.json()["columns"]]
    assert types == ["numeric", "categorical", "boolean"]
    r = client.post("/v1/datasets", files={"file": ("iris.csv", iris_csv(), "text/csv")}, data={"name": "iris"})
    assert r.status_code == 201, r.text
    assert r.json()["name"] == "iris" and r.json()["n_rows"] == 150


def test_list_paginate_get_delete(client):
    ids = [upload_csv(client, f"a\n{i}\n").json()["id"] for i in range(3)]
    page = client.get("/v1/datasets", params={"limit": 2}).json()
    assert page["count"] == 3 and len(page["data"]) == 2
    assert client.get(f"/v1/datasets/{ids[0]}").json()["id"] == ids[0]
    assert client.delete(f"/v1/datasets/{ids[0]}").status_code == 204
    assert_problem(client.get(f"/v1/datasets/{ids[0]}"), 404, ids[0])
    assert_problem(client.delete(f"/v1/datasets/{ids[0]}"), 404)
    assert client.get("/v1/datasets").json()["count"] == 2
    assert_problem(client.get("/v1/datasets", params={"limit": 0}), 422, "limit")


def _count(client):
    return client.get("/v1/datasets").json()["count"]


def test_bad_uploads_are_422_and_store_nothing(client, settings):
    cases = [
        (b"", "empty"),
        (b"a,b\n", "no data rows"),
        (b"a,b\n1,2\n3\n", "has 1 fields, but the header has 2: '3'"),
        (b"a,b\n1,\xff\xfe\n", "UTF-8"),
        (b"a,a\n1,2\n", "duplicate column name 'a'"),
        (b"a,\n1,2\n", "empty name"),
        (b"a,b\n1,inf\n", "infinite"),
    ]
    for body, fragment in cases:
        r = client.post("/v1/datasets", content=body, headers={"content-type": "text/csv"})
        assert_problem(r, 422, fragment)
    r = upload_csv(client, "a\nx\n", types="a:numeric")
    assert_problem(r, 422, "declared numeric")
    assert_problem(upload_csv(client, "a\n1\n", types="b:numeric"), 422, "'b'")
    assert_problem(upload_csv(client, "a\n1\n", types="a:weird"), 422, "weird")
    r = client.post("/v1/datasets", json={"columns": ["a", "b"], "rows": [[1]]})
    assert_problem(r, 422, "rows.0")
    r = client.post("/v1/datasets", json={"columns": ["a"], "rows": [[1]], "extra": 1})
    assert_problem(r, 422, "extra")
    r = client.post("/v1/datasets", content=b"<x/>", headers={"content-type": "application/xml"})
    assert_problem(r, 415, "application/xml")
    r = client.post("/v1/datasets", files={"other": ("a.csv", "a\n1\n", "text/csv")})
    assert_problem(r, 422, "file")
    assert _count(client) == 0
    # tmp/ holds one directory per process (its owner.json only, once the uploads are done)
    leftovers = list((settings.data_dir / "datasets").iterdir()) + [
        p for p in (settings.data_dir / "tmp").rglob("*") if p.is_file() and p.name != "owner.json"]
    assert leftovers == []


def test_body_limit_is_413(client):
    big = b"a\n" + b"1\n" * 1_100_000  # > 2 MB limit of the test settings
    r = client.post("/v1/datasets", content=big, headers={"content-type": "text/csv"})
    assert_problem(r, 413, "limit")

    def gen():  # no Content-Length: the streamed size is counted
        for _ in range(300):
            yield b"1\n" * 5000

    r = client.post("/v1/datasets", content=gen(), headers={"content-type": "text/csv"})
    assert_problem(r, 413)
    assert _count(client) == 0


def test_csv_columns_that_change_type_between_chunks(monkeypatch, tmp_path):
    """A column numeric for the first blocks and textual later is re-read as categorical, whole."""
    import service.services.ingest as ingest

    monkeypatch.setattr(ingest, "BLOCK_SIZE", 24)
    path = tmp_path / "t.csv"
    path.write_text("a,b,c,d\n1,x,true,5\n2,y,false,6\n3,x,TRUE,\n4,z,no,7\nfoo,x,true,8\n5,,,9\n")
    cols = {c.name: c for c in ingest.parse_csv_file(path)}
    assert cols["a"].type == "categorical" and cols["a"].categories == ["1", "2", "3", "4", "5", "foo"]
    assert cols["a"].python_values(slice(None)) == ["1", "2", "3", "4", "foo", "5"]
    assert cols["b"].python_values(slice(None)) == ["x", "y", "x", "z", "x", None]
    assert cols["c"].type == "boolean" and cols["c"].python_values(slice(None)) == [True, False, True, False,
                                                                                    True, None]
    assert cols["d"].type == "numeric" and cols["d"].python_values(slice(None)) == [5, 6, None, 7, 8, 9]
    forced = {c.name: c for c in ingest.parse_csv_file(path, {"d": "categorical"})}
    assert forced["d"].categories == ["5", "6", "7", "8", "9"]


def test_csv_summaries_kept_while_parsing_equal_the_stored_columns(monkeypatch, tmp_path):
    """Each column's summary, kept batch by batch while the pieces are parsed, equals the one computed from the
    stored values; missing tokens in text columns (quoted or not) are missing, not categories."""
    import service.services.ingest as ingest

    rows = ["n,t,yn,when,v,flag"]
    for i in range(60):
        t = ["NA", '"NA"', "", "n/a", "red", "green", "blue"][i % 7]
        yn = ["yes", "no", "?"][i % 3]
        when = "" if i % 11 == 0 else f"2021-03-{1 + i % 28:02d}"
        v = "" if i % 5 == 0 else f"{(i * 7919) % 1000 / 7:.4f}"
        rows.append(f"{i},{t},{yn},{when},{v},{['true', 'false', 'null'][i % 3]}")
    path = tmp_path / "s.csv"
    path.write_text("\n".join(rows) + "\n")
    for size in (64, 1 << 20):  # many pieces, one piece
        monkeypatch.setattr(ingest, "BLOCK_SIZE", size)
        cols = {c.name: c for c in ingest.parse_csv_file(path)}
        assert [cols[k].type for k in cols] == ["numeric", "categorical", "boolean", "datetime", "numeric",
                                                "boolean"]
        assert cols["t"].categories == ["blue", "green", "red"] and cols["yn"].labels == ["no", "yes"]
        for c in cols.values():
            kept, c.described = c.schema(), None
            fresh = c.schema()
            assert kept["n_missing"] == fresh["n_missing"] and kept.keys() == fresh.keys(), c.name
            for k, want in fresh["summary"].items():
                got = kept["summary"][k]
                assert got == (pytest.approx(want, rel=1e-12) if isinstance(want, float) else want), (c.name, k)
        assert cols["t"].schema()["n_missing"] == 36 and cols["yn"].schema()["n_missing"] == 20


def test_algorithms_describe_the_gp_normalize_y_default(client):
    schema = client.get("/v1/algorithms/gaussian_process_regressor").json()["params_schema"]
    prop = schema["properties"]["normalize_y"]
    assert prop["default"] is True
    assert "scikit-learn: false" in prop["description"]


def test_csv_pieces_cut_outside_quoted_line_breaks(monkeypatch, tmp_path):
    """The body is parsed in pieces cut at line breaks; a quoted value holding line breaks and quotes is never
    cut, whatever the piece size (here a few bytes, so that every line is a piece boundary)."""
    import service.services.ingest as ingest

    text = 'id,note,v\n0,"one\nline ""two""\nthree",1.5\n1,plain,2\n2,"a,b\n",3\n3,,4\n'
    path = tmp_path / "q.csv"
    path.write_text(text)
    for size in (8, 16, 1 << 20):
        monkeypatch.setattr(ingest, "BLOCK_SIZE", size)
        cols = {c.name: c for c in ingest.parse_csv_file(path)}
        assert cols["note"].python_values(slice(None)) == ['one\nline "two"\nthree', "plain", "a,b\n", None]
        assert cols["v"].python_values(slice(None)) == [1.5, 2, 3, 4]
    buf = bytearray(b'a\n"x\ny"\n"z')  # the last line break outside quotes ends 'x\ny'; '"z' is unfinished
    assert ingest._safe_cut(buf, len(buf)) == len(b'a\n"x\ny"\n')
    assert ingest._safe_cut(bytearray(b'"open\nstill open\n'), 17) == -1
    # _cut: the same cut, and whether the piece before it holds a quote (then the parser allows line breaks in
    # values); a quote past the cut does not count
    for raw, want in [(b"a,b\n1,2\n3,", (8, False)), (b'a\n1\n"z', (4, False)), (b'a\n"x\ny"\n"z', (8, True)),
                      (b'a\n"q"\n"open\nmore', (6, True)), (b'"open\nstill open\n', (-1, False))]:
        assert ingest._cut(bytearray(raw), len(raw), 0) == want, raw
        assert ingest._cut(bytearray(b"xx" + raw), len(raw) + 2, 2) == ((want[0] + 2) if want[0] >= 0 else -1,
                                                                       want[1]), raw


def test_parser_follows_the_body_while_it_arrives(tmp_path):
    """The CSV parser reads the spool as it grows: it waits for more bytes instead of taking the bytes written
    so far for the whole body; a failed upload stops it."""
    import threading

    import service.services.ingest as ingest

    spool = ingest.BodySpool(tmp_path / "body")
    spool.write(b"x,label\n1,a\n")
    staging = tmp_path / "st"
    staging.mkdir()
    out: dict = {}
    t = threading.Thread(target=lambda: out.update(table=ingest.ingest_csv(spool, staging)))
    t.start()
    for _ in range(1000):  # until the parser has read what there is and waits for more
        if spool._cond._waiters:
            break
        threading.Event().wait(0.01)
    assert spool._cond._waiters and t.is_alive()
    spool.write(b"2,b\n3,a\n")
    spool.finish()
    t.join(30)
    x, label = out["table"]
    assert x.python_values(slice(None)) == [1, 2, 3] and label.python_values(slice(None)) == ["a", "b", "a"]
    failed = ingest.BodySpool(tmp_path / "body2")
    failed.write(b"x\n1\n")
    failed.fail(RuntimeError("client gone"))
    (tmp_path / "st2").mkdir()
    with pytest.raises(ingest._UploadAborted):
        ingest.ingest_csv(failed, tmp_path / "st2")


@pytest.mark.parametrize("what", ["evaluate", "rows", "rows.csv", "partial-dependence", "explain background"])
def test_a_dataset_deleted_while_a_request_reads_it_is_a_404_never_a_500(client, what):
    """The request has found the dataset's record and is about to read its files when the dataset is deleted
    (record, then files): it answers 404 problem+json (the dataset is gone), never a 500."""
    from tests.service.conftest import train

    ds = upload_csv(client, iris_csv()).json()["id"]
    mid, job = train(client, algorithm="logistic_regression", dataset_id=ds, target="species")
    assert job["status"] == "succeeded"
    victim = upload_csv(client, iris_csv()).json()["id"]
    requests = {
        "evaluate": ("POST", f"/v1/models/{mid}/evaluate", {"dataset_id": victim}),
        "rows": ("GET", f"/v1/datasets/{victim}/rows?limit=5", None),
        "rows.csv": ("GET", f"/v1/datasets/{victim}/rows?format=csv", None),
        "partial-dependence": ("POST", f"/v1/models/{mid}/partial-dependence",
                               {"dataset_id": victim, "features": ["petal_length"]}),
        "explain background": ("POST", f"/v1/models/{mid}/explain", {
            "instances": [{"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4, "petal_width": 0.2}],
            "method": "kernel", "background": {"dataset_id": victim, "n": 10}}),
    }
    method, url, body = requests[what]
    r, deleted = while_paused(client.app.state.runtime.art, "read_dataset_schema",
                              lambda: client.request(method, url, json=body),
                              lambda: client.delete(f"/v1/datasets/{victim}"),
                              when=lambda dataset_id: dataset_id == victim)
    assert deleted.status_code == 204
    assert_problem(r, 404, victim)


def test_a_dataset_whose_files_are_lost_under_its_record_is_an_artifact_integrity_problem(client):
    import shutil

    ds = upload_csv(client, iris_csv()).json()["id"]
    shutil.rmtree(client.app.state.runtime.art.dataset_dir(ds))
    body = assert_problem(client.get(f"/v1/datasets/{ds}/rows"), 500, ds)
    assert body["type"] == "urn:orchard:problem:artifact-integrity"
