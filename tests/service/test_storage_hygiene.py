"""Storage hygiene: per-process temporary directories (a replica's start never touches another live replica's
upload) and the janitor (orphan artifacts collected after a grace period, in-flight saves never)."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.services import datasets as ds
from service.services.janitor import collect
from service.services.tables import parse_json_table
from service.settings import Settings
from service.storage.artifacts import FOREIGN_TMP_STALE_S, process_identity
from service.storage.stores import open_stores

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def stores(tmp_path):
    meta, art = open_stores(Settings(data_dir=tmp_path / "data", secret_key="s"))
    yield meta, art
    meta.dispose()


def _columns():
    return parse_json_table(["a", "b"], [[1, 2], [3, 4], [5, 6]], None)


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_an_orphan_dataset_is_collected_after_the_grace_period_only(stores):
    meta, art = stores
    # a crash between the artifact's rename and the metadata insert: the directory, no row
    art.write_dataset("ds_orphan", {"c0": np.arange(3.0)}, {"columns": []})
    kept = ds.store_columns(meta, art, _columns(), "kept")
    assert collect(meta, art, grace_s=3600)["datasets"] == []
    assert art.dataset_dir("ds_orphan").is_dir()
    report = collect(meta, art, grace_s=0)
    assert report["datasets"] == ["ds_orphan"]
    assert not art.dataset_dir("ds_orphan").exists()
    assert art.dataset_dir(kept["id"]).is_dir() and meta.get_dataset(kept["id"])  # a complete dataset stays


def test_an_in_flight_save_is_never_collected(stores, monkeypatch):
    """The janitor runs (default grace) between a save's artifact rename and its metadata insert: the artifact
    is younger than the grace period, so it stays and the dataset is complete."""
    meta, art = stores
    insert = meta.insert_dataset
    seen = {}

    def insert_after_a_janitor_pass(values):
        seen["report"] = collect(meta, art, grace_s=Settings().janitor_grace_s)
        seen["existed"] = art.dataset_dir(values["id"]).is_dir()
        insert(values)

    monkeypatch.setattr(meta, "insert_dataset", insert_after_a_janitor_pass)
    record = ds.store_columns(meta, art, _columns(), "in-flight")
    assert seen["existed"] and seen["report"]["datasets"] == []
    assert [c.name for c in ds.load_columns(art, record["id"])] == ["a", "b"]


def test_orphan_model_files_and_interrupted_writes_are_collected(stores):
    meta, art = stores
    now = ds.utcnow()
    meta.insert_model({"id": "mdl_live", "name": "m", "algorithm": "x", "task": "regression", "params": {},
                       "status": "ready", "job_id": "job_x", "size_bytes": 0, "created_at": now})
    art.save_bundle("mdl_live", {"ok": 1})
    art.save_bundle("mdl_gone", {"ok": 2})  # its row was deleted while the job saved it
    (art.root / "models" / ".mdl_x.joblib.0123abcd.tmp").write_bytes(b"partial")  # a crash inside atomic_write
    report = collect(meta, art, grace_s=0)
    assert sorted(report["models"]) == [".mdl_x.joblib.0123abcd.tmp", "mdl_gone.joblib"]
    assert sorted(p.name for p in (art.root / "models").iterdir()) == ["mdl_live.joblib"]
    assert art.load_bundle("mdl_live") == {"ok": 1}


def test_rows_without_artifacts_are_reported_not_changed(stores, caplog):
    meta, art = stores
    record = ds.store_columns(meta, art, _columns(), "lost")
    art.delete_dataset(record["id"])  # files lost (removed by hand)
    with caplog.at_level("WARNING", logger="orchard.janitor"):
        report = collect(meta, art, grace_s=0)
    assert report["missing_datasets"] == [record["id"]] and meta.get_dataset(record["id"]) is not None
    assert record["id"] in caplog.text


def test_temp_dirs_of_ended_processes_go_and_live_ones_stay(stores, tmp_path):
    meta, art = stores
    code = ("import sys, time; from pathlib import Path; from service.storage.artifacts import ArtifactStore; "
            "a = ArtifactStore(Path(sys.argv[1]), b's'); (a.tmp_dir / 'upload-x.csv').write_text('a\\n1\\n'); "
            "print(a.tmp_dir.name, flush=True); time.sleep(float(sys.argv[2]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ended = subprocess.run([sys.executable, "-c", code, str(art.root), "0"], env=env, capture_output=True,
                           text=True, check=True, timeout=60).stdout.strip()
    live = subprocess.Popen([sys.executable, "-c", code, str(art.root), "120"], env=env, stdout=subprocess.PIPE,
                            text=True)
    try:
        live_name = live.stdout.readline().strip()
        me = process_identity()
        foreign = art.tmp_root / "otherhost-7-abcdef12"  # another replica's host: cannot be checked from here
        foreign.mkdir()
        (foreign / "owner.json").write_text(json.dumps({**me, "host": "otherhost", "pid": 7}))
        mine = art.tmp_dir
        removed = collect(meta, art, grace_s=0)["tmp"]
        assert removed == [ended]
        assert (art.tmp_root / live_name / "upload-x.csv").is_file() and mine.is_dir() and foreign.is_dir()
        # a foreign directory idle for a day goes
        old = time.time() - FOREIGN_TMP_STALE_S - 10
        for p in (foreign / "owner.json", foreign):
            os.utime(p, (old, old))
        assert collect(meta, art, grace_s=0)["tmp"] == [foreign.name]
    finally:
        live.kill()
        live.wait()
    assert collect(meta, art, grace_s=0)["tmp"] == [live_name]  # killed: provably ended


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_slow_upload_on_one_replica_survives_another_replica_starting(tmp_path):
    """Replica A (a real `orchard serve` process) is receiving an upload, slowly; replica B (this process) starts
    on the same data directory with a janitor grace of 0 and runs a janitor pass. A's upload still succeeds.
    (Before per-process temp dirs, B's start emptied the shared tmp/ and A's upload failed.)"""
    data = tmp_path / "shared"
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
    env.update({"PYTHONPATH": str(ROOT), "ORCHARD_SECRET_KEY": "shared"})
    log = open(tmp_path / "a.log", "wb")
    a = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--data-dir", str(data),
                          "--workers", "0", "--no-access-log"], cwd=ROOT, env=env, stdout=log,
                         stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert a.poll() is None and time.monotonic() < deadline, (tmp_path / "a.log").read_text()[-2000:]
            try:
                if httpx.get(url + "/health/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        rows = [f"{i},{i % 7}\n" for i in range(2000)]
        release = threading.Event()

        def body():
            yield b"x,y\n" + "".join(rows[:1000]).encode()
            release.wait(120)
            yield "".join(rows[1000:]).encode()

        result = {}

        def upload():
            result["r"] = httpx.post(url + "/v1/datasets", content=body(), timeout=180,
                                     headers={"content-type": "text/csv"})

        t = threading.Thread(target=upload)
        t.start()
        deadline = time.monotonic() + 60
        while not [p for p in (data / "tmp").rglob("upload-*") if p.stat().st_size > 0]:
            assert time.monotonic() < deadline, "the upload never reached A's temp file"
            time.sleep(0.02)
        settings_b = Settings(data_dir=data, secret_key="shared", workers=0, janitor_grace_s=0)
        with TestClient(create_app(settings_b)) as b:
            runtime = b.app.state.runtime
            report = collect(runtime.meta, runtime.art, grace_s=0)
            assert report["tmp"] == [] and report["datasets"] == []
            release.set()
            t.join(120)
            r = result["r"]
            assert r.status_code == 201, r.text
            assert r.json()["n_rows"] == 2000
            got = b.get(f"/v1/datasets/{r.json()['id']}/rows", params={"offset": 1999, "limit": 1}).json()
            assert got["rows"] == [[1999, 1999 % 7]]
    finally:
        release.set()
        if a.poll() is None:
            os.killpg(a.pid, signal.SIGTERM)
            a.wait(timeout=30)
        log.close()
    # both replicas stopped: after the janitor's grace period nothing is left over
    meta, art = open_stores(Settings(data_dir=data, secret_key="shared"))
    collect(meta, art, grace_s=0)
    meta.dispose()
    assert [f for f in _files(data / "tmp")] == []
    assert len(list((data / "datasets").iterdir())) == 1
