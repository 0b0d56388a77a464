"""A real `orchard serve` killed (SIGKILL) during a CSV upload, mid-body and mid-publication, then restarted on
the same data directory: no partial dataset is listed or recorded, the leftovers are collected, and the same
file uploaded again reads back equal to the generated data."""

import socket
import sqlite3
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from service.services.column_files import _FLUSH_BYTES, _HEADER_BYTES
from tests.integration._server import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

N_DIGITS = 40  # one-character columns: 2 bytes of CSV, 8 bytes of column file each, so the flusher starts early
COLOURS = np.array(["red", "green", "blue", "cyan", "NA"], dtype=object)  # "NA": a missing cell


def _generated(n_rows: int, seed: int = 7) -> tuple[bytes, dict]:
    """A mixed CSV (integer id, one-digit integers, floats with empty cells, colours with NA, yes/no, ISO dates)
    and its columns as expected back."""
    rng = np.random.default_rng(seed)
    ids = np.arange(n_rows)
    digits = rng.integers(0, 10, size=(N_DIGITS, n_rows))
    x = np.round(rng.normal(size=n_rows) * 100, 3)
    x[rng.random(n_rows) < 0.1] = np.nan
    colour = COLOURS[rng.integers(0, len(COLOURS), n_rows)]
    flag = np.where(rng.random(n_rows) < 0.3, "yes", "no").astype(object)
    day = np.datetime64("2020-01-01") + rng.integers(0, 2000, n_rows).astype("timedelta64[D]")
    table = pa.table({"id": ids, **{f"d{k}": digits[k] for k in range(N_DIGITS)},
                      "x": pa.array(x, mask=np.isnan(x)), "colour": colour.astype(str), "flag": flag.astype(str),
                      "day": day.astype(str)})
    import pyarrow.csv as pacsv

    sink = pa.BufferOutputStream()
    pacsv.write_csv(table, sink, pacsv.WriteOptions(quoting_style="none"))
    expected = {"id": ids, **{f"d{k}": digits[k] for k in range(N_DIGITS)}, "x": x,
                "colour": np.where(colour == "NA", None, colour), "flag": flag, "day": day.astype("datetime64[us]")}
    return sink.getvalue().to_pybytes(), expected


class Server(ServerProcess):
    """`orchard serve` on a free port, no worker process, no access log (``paused_at``: started through
    _serve_paused.py, which stops the upload's thread for good at that point of the publication)."""

    workers = 0
    options = ("--no-access-log",)
    ready_timeout = 90.0

    def __init__(self, data_dir: Path, *, paused_at: str | None = None, **env):
        super().__init__(data_dir, ORCHARD_SECRET_KEY="kill-test-key", **env)
        self.paused_at = paused_at
        self.marker = data_dir.parent / f"paused-{self.port}"

    def command(self) -> list[str]:
        if not self.paused_at:
            return super().command()
        serve = super().command()
        return [serve[0], str(ROOT / "tests" / "integration" / "_serve_paused.py"), self.paused_at,
                str(self.marker), *serve[3:]]


def _wait_for(cond, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _staging_dirs(data: Path) -> list[Path]:
    return sorted((data / "tmp").glob("*/ds-*"))


def _rows_committed(data: Path) -> int:
    """Rows appended to the staging column files so far (the id column's file: float64 after the header)."""
    for d in _staging_dirs(data):
        try:
            return max(0, ((d / "s0.npy").stat().st_size - _HEADER_BYTES) // 8)
        except FileNotFoundError:
            pass
    return 0


def _db_dataset_ids(data: Path) -> list[str]:
    con = sqlite3.connect(data / "orchard.db")
    try:
        return [r[0] for r in con.execute("SELECT id FROM datasets")]
    finally:
        con.close()


def _check_recovered(data: Path, csv: bytes, expected: dict) -> None:
    """Restart on the same data directory (janitor grace 0: the killed process's leftovers go at its first
    pass): nothing listed or recorded, leftovers collected, and the same file uploads and reads back intact."""
    server = Server(data, ORCHARD_JANITOR_GRACE_S="0").start()
    try:
        with httpx.Client(base_url=server.url, timeout=120) as c:
            listed = c.get("/v1/datasets").json()
            assert listed == {"data": [], "count": 0}, listed
            assert _db_dataset_ids(data) == []
            _wait_for(lambda: not _staging_dirs(data) and not any((data / "datasets").iterdir()),
                      "the killed upload's files were not collected by the janitor")
            r = c.post("/v1/datasets?name=again", content=csv, headers={"content-type": "text/csv"})
            assert r.status_code == 201, r.text
            rec = r.json()
            n = len(expected["id"])
            assert rec["n_rows"] == n and [col["name"] for col in rec["columns"]] == list(expected)
            types = {col["name"]: col["type"] for col in rec["columns"]}
            assert types["x"] == "numeric" and types["colour"] == "categorical"
            assert types["flag"] == "boolean" and types["day"] == "datetime"
            assert c.get("/v1/datasets").json()["count"] == 1 and _db_dataset_ids(data) == [rec["id"]]
            got = c.get(f"/v1/datasets/{rec['id']}/rows", params={"format": "parquet"})
            assert got.status_code == 200
            table = pq.read_table(pa.BufferReader(got.content))
        assert table.num_rows == n
        for name in ["id", *(f"d{k}" for k in range(N_DIGITS))]:
            np.testing.assert_array_equal(table[name].to_numpy(), expected[name], err_msg=name)
        np.testing.assert_array_equal(table["x"].to_numpy(), expected["x"])  # NaN where empty
        colour = pc.cast(table["colour"], pa.string()).to_numpy(zero_copy_only=False)
        np.testing.assert_array_equal(colour, expected["colour"])
        np.testing.assert_array_equal(table["flag"].to_numpy(zero_copy_only=False), expected["flag"])
        np.testing.assert_array_equal(table["day"].to_numpy(), expected["day"])
    finally:
        server.stop()


def test_sigkill_mid_body_leaves_no_partial_dataset(tmp_path):
    """Killed while the body is still arriving, once the upload's column files have passed the background
    flusher's threshold (so parse workers, commits and a flush to disk were all under way)."""
    n_rows = 300_000
    csv, expected = _generated(n_rows)
    per_row = 8 * len(expected)  # bytes the writer counts per row towards a background flush
    data = tmp_path / "data"
    server = Server(data).start()
    sock = socket.create_connection(("127.0.0.1", server.port))
    try:
        sock.sendall(f"POST /v1/datasets?name=killed HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                     f"Content-Type: text/csv\r\nContent-Length: {len(csv)}\r\n\r\n".encode())
        sent, stop_at, chunk = 0, int(len(csv) * 0.9), 1 << 20
        while sent < stop_at and _rows_committed(data) * per_row < _FLUSH_BYTES:
            part = csv[sent:min(sent + chunk, stop_at)]
            sock.sendall(part)
            sent += len(part)
            spool = _wait_for(lambda: list((data / "tmp").glob("*/upload-*.data")), "no spool file")
            _wait_for(lambda path=spool[0], size=sent: path.stat().st_size == size, "the server did not take the chunk")
        # the precondition: rows committed past the flush threshold while a tenth of the body never came
        rows = _wait_for(lambda: _rows_committed(data) if _rows_committed(data) * per_row >= _FLUSH_BYTES else 0,
                         "the upload's column files never reached the background flusher's threshold")
        assert rows < n_rows and sent < len(csv)
        staging = _staging_dirs(data)
        assert len(staging) == 1 and len(list(staging[0].glob("s*.npy"))) == len(expected)
        assert not any((data / "datasets").iterdir())
        server.kill()
    finally:
        sock.close()
        server.kill()
    assert _staging_dirs(data) == staging  # left as it was: neither published nor removed
    assert not any((data / "datasets").iterdir()) and _db_dataset_ids(data) == []
    _check_recovered(data, csv, expected)


@pytest.mark.parametrize("point", ["fsync", "rename", "insert"])
def test_sigkill_during_publication_leaves_no_partial_dataset(tmp_path, point):
    """Killed at a fixed point of the publication (the server stops there for good, see _serve_paused.py): while
    the column files are fsynced, before the staging directory's rename, and between the rename and the
    metadata row. Before the rename nothing is in datasets/; after it the directory is whole but has no row."""
    csv, expected = _generated(50_000, seed=11)
    data = tmp_path / "data"
    server = Server(data, paused_at=point).start()
    result = {}

    def upload():
        try:
            result["r"] = httpx.post(server.url + "/v1/datasets?name=killed", content=csv, timeout=120,
                                     headers={"content-type": "text/csv"})
        except httpx.HTTPError as exc:
            result["error"] = exc

    t = threading.Thread(target=upload)
    t.start()
    try:
        _wait_for(server.marker.exists, f"the upload never reached {point!r}")
        published = sorted((data / "datasets").iterdir())
        server.kill()
    finally:
        server.kill()
        t.join(60)
    assert "r" not in result, result  # no response: killed before answering
    assert _db_dataset_ids(data) == []
    if point == "insert":
        assert len(published) == 1  # whole: every column and the schema
        assert sorted(p.name for p in published[0].iterdir()) == sorted(
            ["schema.json", *(f"c{j}.npy" for j in range(len(expected)))])
        assert _staging_dirs(data) == []
    else:
        assert published == []
        assert len(_staging_dirs(data)) == 1
    _check_recovered(data, csv, expected)
