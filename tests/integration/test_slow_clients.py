"""Slow clients against a real `orchard serve` (service/server.py): 100 connections that never finish their
headers (slowloris) and 100 that trickle their body are closed once their timeouts pass, with a 408 saying
which limit, while a normal client is served meanwhile; a client that stops reading its answers is let go at the
send timeout; what the server wrote is private."""

import io
import os
import selectors
import socket
import stat
import time
from pathlib import Path

import httpx
import numpy as np

from tests.integration._server import ServerProcess, free_port
from tests.service.conftest import iris_csv

HEADER_TIMEOUT, BODY_TIMEOUT = 3, 4
MARGIN = 20  # seconds of slack on a loaded machine: the connections must close, not stay open for minutes
N = 100


def _open(port: int, data: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(data)
    s.setblocking(False)
    return s


def _until_closed(socks: list, deadline: float) -> dict:
    """What each socket received until the server closed it; sockets still open at the deadline are missing."""
    got = {s: b"" for s in socks}
    closed = {}
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    while len(closed) < len(socks) and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=0.5):
            s = key.fileobj
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if chunk:
                got[s] += chunk
            else:
                closed[s] = got[s]
                sel.unregister(s)
    sel.close()
    return closed


def test_slowloris_and_slow_bodies_are_cut_off_while_a_normal_client_is_served(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    server = ServerProcess(data, free_port(), ORCHARD_HEADER_TIMEOUT_S=str(HEADER_TIMEOUT),
                    ORCHARD_BODY_TIMEOUT_S=str(BODY_TIMEOUT)).start()
    socks = []
    try:
        host = f"127.0.0.1:{server.port}".encode()
        slowloris = [_open(server.port, b"GET /v1/datasets HTTP/1.1\r\nHost: " + host + b"\r\nX-Slow: a")
                     for _ in range(N)]
        head = (b"POST /v1/datasets?name=slow HTTP/1.1\r\nHost: " + host + b"\r\ncontent-type: text/csv\r\n"
                b"content-length: 100000\r\nx-request-id: slow-body\r\n\r\na,b\n1,2\n")
        slow_body = [_open(server.port, head) for _ in range(N)]
        socks = slowloris + slow_body
        # meanwhile, a normal client is served: an upload and a read
        with httpx.Client(base_url=server.url, timeout=30) as c:
            up = c.post("/v1/datasets?name=iris", content=iris_csv(), headers={"content-type": "text/csv"})
            assert up.status_code == 201, up.text
            assert c.get(f"/v1/datasets/{up.json()['id']}").json()["n_rows"] == 150
        closed = _until_closed(socks, time.monotonic() + max(HEADER_TIMEOUT, BODY_TIMEOUT) + MARGIN)
        assert len([s for s in slowloris if s in closed]) == N, "slowloris connections left open"
        assert len([s for s in slow_body if s in closed]) == N, "slow-body connections left open"
        for s in slowloris:
            assert closed[s].startswith(b"HTTP/1.1 408 "), closed[s][:200]
            assert b"ORCHARD_HEADER_TIMEOUT_S" in closed[s]
        for s in slow_body:
            assert closed[s].startswith(b"HTTP/1.1 408 "), closed[s][:200]
            assert b"ORCHARD_BODY_TIMEOUT_S" in closed[s] and b"x-request-id: slow-body" in closed[s]
            assert b"application/problem+json" in closed[s]
        # none of the trickled bodies became a dataset; the server still answers
        with httpx.Client(base_url=server.url, timeout=30) as c:
            assert c.get("/v1/datasets").json()["count"] == 1
        # what `orchard serve` wrote is private: the directory 0700, its files 0600 (storage/files.py)
        modes = {}
        for p in [data, *data.rglob("*")]:
            try:
                st = p.stat()
            except FileNotFoundError:  # a temporary file gone meanwhile
                continue
            modes[str(p.relative_to(data))] = (stat.S_IMODE(st.st_mode), 0o600 if stat.S_ISREG(st.st_mode) else 0o700)
        assert {"secret.key", "orchard.db"} <= set(modes) and any(p.startswith("datasets/") for p in modes)
        assert all(mode == want for mode, want in modes.values()), modes
    finally:
        for s in socks:
            s.close()
        server.stop()


def test_an_idle_connection_is_closed_silently_and_a_malformed_request_gets_a_problem(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    server = ServerProcess(data, free_port(), ORCHARD_HEADER_TIMEOUT_S="1").start()
    try:
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.setblocking(False)
        closed = _until_closed([s], time.monotonic() + 1 + MARGIN)
        assert closed == {s: b""}
        s.close()
        # a request uvicorn cannot parse: a problem+json 400 with a request id, like every other answer
        bad = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        bad.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        bad.setblocking(False)
        answer = _until_closed([bad], time.monotonic() + MARGIN)[bad]
        bad.close()
        assert answer.startswith(b"HTTP/1.1 400 ") and b"application/problem+json" in answer, answer
        assert b"x-request-id: " in answer and answer.endswith(b"}")
        # a keep-alive connection serves several requests, each within the header timeout
        with httpx.Client(base_url=server.url, timeout=30) as c:
            for _ in range(3):
                r = c.get("/health/live")
                assert r.status_code == 200
                assert "server" not in r.headers and "date" in r.headers  # the server's software is not named
    finally:
        server.stop()


def _server_holds(pid: int, server_port: int, client_port: int) -> bool:
    """Whether process ``pid`` still has a socket open for the TCP connection server_port <-> client_port (Linux
    /proc: the connection's socket inode among the process's file descriptors)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if int(local.rsplit(":", 1)[1], 16) == server_port and int(remote.rsplit(":", 1)[1], 16) == client_port:
                inodes.add(f"socket:[{inode}]")
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd) in inodes:
                return True
        except OSError:  # closed meanwhile
            continue
    return False


def test_a_client_that_stops_reading_its_answer_is_let_go_at_the_send_timeout(tmp_path):
    """A 9 MB dataset exported as CSV and not one byte read: the answer fills the kernel's buffers and the
    server's, the app waits to send; after ORCHARD_SEND_TIMEOUT_S the server drops the connection (it would
    otherwise hold it, the app's task and the buffered answer for as long as the client stays), quietly."""
    data = tmp_path / "data"
    data.mkdir()
    server = ServerProcess(data, free_port(), ORCHARD_SEND_TIMEOUT_S="1").start()
    s = socket.socket()
    try:
        rng = np.random.default_rng(0)
        table = io.StringIO()
        np.savetxt(table, rng.normal(size=(200_000, 4)), fmt="%.8f", delimiter=",", header="a,b,c,d", comments="")
        with httpx.Client(base_url=server.url, timeout=120) as c:
            r = c.post("/v1/datasets?name=big", content=table.getvalue().encode(), headers={"content-type": "text/csv"})
            assert r.status_code == 201, r.text
            ds = r.json()["id"]
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the client's kernel takes little
        s.connect(("127.0.0.1", server.port))
        client_port = s.getsockname()[1]
        s.sendall(f"GET /v1/datasets/{ds}/rows?format=csv HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        deadline = time.monotonic() + MARGIN
        while not _server_holds(server.proc.pid, server.port, client_port):  # the server has the connection
            assert time.monotonic() < deadline, "the server did not take the connection"
            time.sleep(0.05)
        deadline = time.monotonic() + 1 + MARGIN
        while _server_holds(server.proc.pid, server.port, client_port):
            assert time.monotonic() < deadline, "the server still holds a connection whose client reads nothing"
            time.sleep(0.2)
        with httpx.Client(base_url=server.url, timeout=30) as c:  # and serves others as before
            assert c.get("/health/live").status_code == 200
        log = server.log_path.read_text(errors="replace")
        assert "unhandled error" not in log and "Exception in ASGI application" not in log, server.log_text()
    finally:
        s.close()
        server.stop()
