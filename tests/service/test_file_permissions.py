"""Private files (service/storage/files.py): the data directory 0700 and every file in it 0600, the signing key
created by exactly one of several racing processes (every one reads the same full key), and a key open to
group or others refused at start with a message saying how to fix it."""

import multiprocessing
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from service.storage.files import MIN_KEY_BYTES, SecretKeyError, load_or_create_secret
from tests.service.conftest import iris_csv, train, upload_csv

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 4
TRIALS = 40

_barrier = None


def _init(barrier):
    global _barrier
    _barrier = barrier


def _create(data_dir: str) -> bytes:
    _barrier.wait(timeout=60)  # all processes race from the same instant
    return load_or_create_secret(Path(data_dir))


def test_concurrent_key_creation_has_one_winner_and_every_process_reads_the_full_key(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    with ctx.Pool(PROCESSES, initializer=_init, initargs=(barrier,)) as pool:
        for trial in range(TRIALS):
            data = tmp_path / f"trial-{trial}" / "data"  # the data directory itself is made in the race too
            keys = pool.map(_create, [str(data)] * PROCESSES, chunksize=1)
            assert len(set(keys)) == 1, (trial, keys)
            assert len(keys[0]) == 64 and bytes.fromhex(keys[0].decode()), keys[0]
            assert (data / "secret.key").read_bytes() == keys[0]
            assert stat.S_IMODE((data / "secret.key").stat().st_mode) == 0o600
            assert stat.S_IMODE(data.stat().st_mode) == 0o700
            assert sorted(p.name for p in data.iterdir()) == ["secret.key"], list(data.iterdir())  # no temp left


def _modes(root: Path) -> dict:
    """{relative path: (mode, is a file)} of the directory and everything in it."""
    out = {}
    for p in [root, *root.rglob("*")]:
        st = p.stat()
        out[str(p.relative_to(root))] = (stat.S_IMODE(st.st_mode), stat.S_ISREG(st.st_mode))
    return out


def test_the_data_directory_and_every_file_orchard_creates_are_private(tmp_path, monkeypatch):
    import service.services.datasets as datasets_service

    seen = {}
    real_ingest = datasets_service.ingest_upload

    def ingest_and_note(meta, art, spool, *args):  # the upload's temporary file, seen while it exists
        seen[spool.path] = stat.S_IMODE(os.stat(spool.path).st_mode)
        return real_ingest(meta, art, spool, *args)

    monkeypatch.setattr(datasets_service, "ingest_upload", ingest_and_note)
    data = tmp_path / "data"
    settings = Settings(data_dir=data, workers=1, max_body_bytes=2_000_000)  # the key made in data/secret.key
    with TestClient(create_app(settings)) as client:
        ds = upload_csv(client, iris_csv(), name="iris").json()["id"]
        assert list(seen.values()) == [0o600] and str(data) in next(iter(seen)), seen
        mid, job = train(client, algorithm="logistic_regression", dataset_id=ds, target="species")
        assert job["status"] == "succeeded"
        assert client.post(f"/v1/models/{mid}/predict", json={"rows": [[5.1, 3.5, 1.4, 0.2]]}).status_code == 200
        modes = _modes(data)
    files = {p for p, (_, is_file) in modes.items() if is_file}
    assert {"secret.key", "orchard.db"} <= files and any(p.startswith("models/") for p in files), files
    assert any(p.startswith("datasets/") for p in files) and "tmp" in modes, files
    loose = {p: oct(m) for p, (m, is_file) in modes.items() if m != (0o600 if is_file else 0o700)}
    assert not loose, loose


def test_an_existing_open_data_directory_is_made_private(tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    load_or_create_secret(data)
    assert stat.S_IMODE(data.stat().st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_key_open_to_group_or_others_is_refused(tmp_path, mode):
    data = tmp_path / "data"
    key = load_or_create_secret(data)
    os.chmod(data / "secret.key", mode)
    with pytest.raises(SecretKeyError, match=r"chmod 600 .*secret\.key"):
        load_or_create_secret(data)
    os.chmod(data / "secret.key", 0o600)
    assert load_or_create_secret(data) == key


def test_a_short_or_empty_key_is_refused(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for content in (b"", b"abc\n", b"x" * (MIN_KEY_BYTES - 1)):
        fd = os.open(data / "secret.key", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, content)
        os.close(fd)
        with pytest.raises(SecretKeyError, match="fewer than 32"):
            load_or_create_secret(data)


def test_serve_refuses_to_start_with_a_world_readable_key(tmp_path):
    data = tmp_path / "data"
    load_or_create_secret(data)
    os.chmod(data / "secret.key", 0o644)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-m", "service.cli", "serve", "--port", "0", "--data-dir", str(data),
                           "--workers", "0"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "refusing to start" in proc.stderr and f"chmod 600 {data / 'secret.key'}" in proc.stderr, proc.stderr
