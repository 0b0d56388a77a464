"""Service benchmarks (issue: service foundation).

1. Single-row predict throughput and latency over HTTP for `logistic_regression` on breast_cancer, through /v1
   and through /v2 infer (one [1, 30] FP64 tensor, output `predict`; by model id, and by model name), measured
   with wrk on loopback, against a bare ASGI app (bench/_bare_asgi.py) that only decodes the JSON and runs
   NumPy, in the same run, both served by one uvicorn process with the same options (no access log of uvicorn's,
   no Server header), with the server's CPU time per request beside the throughput.
2. Time from POST /v1/train to the job being `running` with an idle pool (server timestamps
   started_at - created_at, plus the client-observed time to the first `running` poll).

Usage: python bench/service.py [--duration 10] [--connections 8] [--runs 20] [--rounds 3] [--pin]
       python bench/service.py --callgrind [--apps-only] [--recording] [--set ORCHARD_X=...]
Needs `wrk` (Debian package) for part 1. Orchard and the bare app are measured alternately for --rounds
rounds (each round: orchard then bare), and the ratio of each round is printed, with the median.

On a shared, loaded machine throughput moves by more than the difference in question, so `--callgrind`
counts instead each server's user-space instructions per request under valgrind (Debian package
`valgrind`): each server answers 200 and then 1,200 sequential predict requests in two separate runs (Orchard
once for each of /v1, /v2 JSON and /v2 binary), and
(I(1200) - I(200)) / 1000 is the cost of one request without start-up (PYTHONHASHSEED=0, byte code compiled
beforehand, OPENBLAS_NUM_THREADS=1: under valgrind the idle OpenBLAS worker threads of NumPy's and SciPy's
libraries executed ~90,000 instructions per request in their wait loops, in proportion to valgrind's slowed wall
clock, while under wrk without valgrind they used no CPU at all; single-row products never use them). Kernel time (the socket system calls, the same for both servers) is not counted. It also counts each
app alone, called 500 times straight from Python with no HTTP (bench/_asgi_calls.py): the steadiest figure,
free of uvicorn and of the periodic work that grows with valgrind's slowed wall clock.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


# --pin: the servers on one CPU and wrk on another (taskset), so that neither waits for the other's CPU and
# every server measured gets the same one; (server CPU, client CPU) or None
PIN: tuple[str, str] | None = None


def _pinned(cmd: list[str], which: int) -> list[str]:
    return cmd if PIN is None else ["taskset", "-c", PIN[which], *cmd]


def start(cmd: list[str], env: dict) -> subprocess.Popen:
    cmd = _pinned(cmd, 0)
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=30)


def _lua_bytes(raw: bytes) -> str:
    return '"' + "".join(f"\\{b:03d}" for b in raw) + '"'  # any byte, as a Lua escape


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` (all its threads) so far."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(url: str, body: str | bytes, duration: int, connections: int, headers: dict | None = None,
        new_ids: bool = False, pid: int | None = None) -> dict:
    """wrk POSTing ``body`` (text: JSON; bytes: sent as they are) with ``headers`` (over a JSON content type).
    ``new_ids``: ``body`` holds the text ``REQUEST-ID`` once, replaced by another id in every request
    (``req-1``, ``req-2``, ... per connection), as clients that number or draw their request ids send them.
    ``pid``: the server's process, whose CPU time per request is measured too (``cpu_us``): unlike throughput,
    it does not count the time a shared machine gives to others."""
    headers = {"Content-Type": "application/json", **(headers or {})}
    raw = body.encode() if isinstance(body, str) else body
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write('wrk.method = "POST"\n')
        for k, v in headers.items():
            fh.write(f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}\n")
        if new_ids:
            left, right = raw.split(b"REQUEST-ID")
            fh.write(f"local left, right, n = {_lua_bytes(left)}, {_lua_bytes(right)}, 0\n"
                     "request = function()\n  n = n + 1\n"
                     '  return wrk.format(nil, nil, nil, left .. "req-" .. n .. right)\nend\n')
        else:
            fh.write(f"wrk.body = {_lua_bytes(raw)}\n")
        script = fh.name
    cpu0 = cpu_seconds(pid) if pid else 0.0
    out = subprocess.run(_pinned(["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--latency", "-s", script, url],
                                 1),
                         capture_output=True, text=True, check=True).stdout
    cpu = cpu_seconds(pid) - cpu0 if pid else 0.0
    os.unlink(script)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    requests = int(re.search(r"(\d+) requests in", out).group(1))

    def pct(p):
        m = re.search(rf"\s{p}%\s+([\d.]+)(us|ms|s)", out)
        v, unit = float(m.group(1)), m.group(2)
        return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v

    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": rps, "p50_ms": pct(50), "p99_ms": pct(99), "errors": int(non2xx.group(1)) if non2xx else 0,
            "cpu_us": cpu * 1e6 / requests}


def upload_breast_cancer(c: httpx.Client, data) -> str:
    """Upload breast_cancer (30 numeric features, target ``diagnosis``) to a running server; its dataset id."""
    cols = [f"f{j}" for j in range(data.data.shape[1])] + ["diagnosis"]
    rows = [list(map(float, x)) + [data.target_names[t]] for x, t in zip(data.data, data.target, strict=True)]
    return c.post("/v1/datasets", json={"name": "breast_cancer", "columns": cols, "rows": rows}).json()["id"]


def train_breast_cancer_model(data_dir: Path, env: dict, data) -> str:
    """Serve ``data_dir`` once (one worker), upload breast_cancer and train ``logistic_regression`` on it; the
    model id. The data directory then holds a ready model for servers started on it later."""
    port = free_port()
    server = start([sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--data-dir", str(data_dir),
                    "--workers", "1"], env)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/health/ready")
        c = httpx.Client(base_url=base, timeout=60)
        ds = upload_breast_cancer(c, data)
        job = c.post("/v1/train", json={"algorithm": "logistic_regression", "dataset_id": ds,
                                        "target": "diagnosis"}).json()
        while (j := c.get(f"/v1/jobs/{job['job']['id']}").json())["status"] not in ("succeeded", "failed"):
            time.sleep(0.05)
        return j["result"]["model_id"]
    finally:
        stop(server)


def _real_python() -> str:
    """The interpreter binary itself (valgrind must not trace a shell shim such as pyenv's), under the name it
    runs as: a virtual environment's interpreter is a link to the binary, and finds its packages by that name."""
    with open(sys.executable, "rb") as fh:
        if fh.read(4) == b"\x7fELF":
            return sys.executable
    return os.path.realpath(sys.executable)


CALLGRIND_ENV = {"PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}  # see the module docstring


def callgrind_per_request(cmd: list[str], env: dict, url_path: str, body: dict | bytes, health: str,
                          headers: dict | None = None) -> tuple[int, int]:
    """(instructions per request, start-up instructions) of the server ``cmd`` under callgrind; ``body``: a JSON
    document, or bytes sent as they are (with ``headers``)."""
    send = {"content": body} if isinstance(body, bytes) else {"json": body}
    totals = {}
    for n in (200, 1200):
        port = free_port()
        out = Path(tempfile.mkdtemp()) / "callgrind.out"
        full = [c.replace("{port}", str(port)) for c in cmd]
        p = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *full], cwd=ROOT,
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_http(f"http://127.0.0.1:{port}{health}", timeout=900)
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as c:
                for _ in range(n):
                    r = c.post(url_path, headers=headers, **send)
                    assert r.status_code == 200, r.text
        finally:
            os.killpg(p.pid, signal.SIGINT)
            p.wait(timeout=900)
        totals[n] = int(re.search(r"^summary:\s+(\d+)", out.read_text(errors="replace"), re.M).group(1))
        shutil.rmtree(out.parent, ignore_errors=True)
    per = (totals[1200] - totals[200]) // 1000
    return per, totals[200] - 200 * per


def callgrind_app_calls(which: str, env: dict, data_dir: Path, model_id: str, body: dict | bytes, n: int = 500,
                        header_length: int | None = None) -> int:
    """Instructions per single-row predict call straight into the ASGI app (bench/_asgi_calls.py): the app's
    own cost, without uvicorn, the kernel or the server's other threads."""
    tmp = Path(tempfile.mkdtemp())
    try:
        (tmp / "body").write_bytes(body if isinstance(body, bytes) else json.dumps(body).encode())
        out = tmp / "callgrind.out"
        extra = [] if header_length is None else [str(header_length)]
        subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=functools_reduce",
                        f"--callgrind-out-file={out}", _real_python(), str(ROOT / "bench" / "_asgi_calls.py"), which,
                        str(n), str(data_dir), model_id, str(tmp / "body"), *extra], cwd=ROOT, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        total = int(re.search(r"^summary:\s+(\d+)", out.read_text(errors="replace"), re.M).group(1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return total // n


def main_callgrind(args, data, env, server_env) -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", "service", "core", "bench"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    tmp = Path(tempfile.mkdtemp())
    # train the model once, then serve the same data dir under valgrind (no worker: jobs are not run)
    mid = train_breast_cancer_model(tmp, server_env, data)
    body = {"rows": [list(map(float, data.data[0]))]}
    v2_json, v2_binary, header_length = v2_bodies(body["rows"][0])
    py = _real_python()
    cg_env = dict(server_env, **CALLGRIND_ENV)
    orchard = bare = v2_http = v2b_http = None
    if not args.apps_only:
        serve = [py, "-m", "service.cli", "serve", "--port", "{port}", "--data-dir", str(tmp), "--workers", "0"]
        orchard, o_start = callgrind_per_request(serve, cg_env, f"/v1/models/{mid}/predict", body, "/health/live")
        v2_http, _ = callgrind_per_request(serve, cg_env, f"/v2/models/{mid}/infer", v2_json, "/health/live",
                                           headers={"content-type": "application/json"})
        v2b_http, _ = callgrind_per_request(
            serve, cg_env, f"/v2/models/{mid}/infer", v2_binary, "/health/live",
            headers={"content-type": "application/octet-stream",
                     "inference-header-content-length": str(header_length)})
        bare, b_start = callgrind_per_request(
            [py, "-m", "uvicorn", "bench._bare_asgi:app", "--port", "{port}", "--log-level", "warning",
             "--no-access-log", "--no-server-header"], dict(env, **CALLGRIND_ENV), "/", body, "/")
    o_app = callgrind_app_calls("orchard", cg_env, tmp, mid, body)
    v2_app = callgrind_app_calls("orchard-v2", cg_env, tmp, mid, v2_json)
    v2b_app = callgrind_app_calls("orchard-v2", cg_env, tmp, mid, v2_binary, header_length=header_length)
    b_app = callgrind_app_calls("bare", dict(env, **CALLGRIND_ENV), tmp, mid, body)
    if args.recording:  # the request-recording paths compared (docs/decisions/observability.md)
        std_app = callgrind_app_calls("orchard-stdlib", cg_env, tmp, mid, body)
        off_app = callgrind_app_calls("orchard", dict(cg_env, ORCHARD_ACCESS_LOG="false", ORCHARD_METRICS="false"),
                                      tmp, mid, body)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"# bench/service.py --callgrind  {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; server settings: "
          f"{' '.join(args.set) or 'defaults'}\n")
    print("| server | instructions per request over HTTP (whole server, user space) | per call into the ASGI app "
          "| bare / this (apps alone) |")
    print("|---|---|---|---|")
    print(f"| orchard /v1 | {orchard or 0:,} | {o_app:,} | {b_app / o_app:.2f} |")
    print(f"| orchard /v2 JSON | {v2_http or 0:,} | {v2_app:,} | {b_app / v2_app:.2f} |")
    print(f"| orchard /v2 binary tensor | {v2b_http or 0:,} | {v2b_app:,} | {b_app / v2b_app:.2f} |")
    print(f"| bare ASGI + NumPy | {bare or 0:,} | {b_app:,} | 1.00 |")
    if args.recording:
        print("\n| /v1, requests recorded by | instructions per call | recording's own | share of the call |")
        print("|---|---|---|---|")
        for label, n in (("RequestRecorder (hand-built, batched)", o_app),
                         ("QueueHandler + prometheus_client (bench/_stdlib_recorder.py)", std_app),
                         ("nothing (metrics and access log off)", off_app)):
            print(f"| {label} | {n:,} | {n - off_app:,} | {(n - off_app) / n:.1%} |")
    if orchard:
        print(f"\nratio bare / orchard over HTTP (the throughput ratio if CPU-bound at equal IPC): /v1 "
              f"{bare / orchard:.2f}, /v2 JSON {bare / v2_http:.2f}, /v2 binary {bare / v2b_http:.2f}")


def v2_bodies(x: list[float]) -> tuple[bytes, bytes, int]:
    """The single-row /v2 bodies: one [1, k] FP64 tensor as JSON, and as binary tensor data (with the JSON
    header's length), asking for the output /v1 gives."""
    tensor = {"name": "input-0", "shape": [1, len(x)], "datatype": "FP64"}
    as_json = json.dumps({"inputs": [dict(tensor, data=x)], "outputs": [{"name": "predict"}]}).encode()
    head = json.dumps({"inputs": [dict(tensor, parameters={"binary_data_size": 8 * len(x)})],
                       "outputs": [{"name": "predict"}]}).encode()
    return as_json, head + struct.pack(f"<{len(x)}d", *x), len(head)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3, help="alternating orchard/bare wrk rounds")
    ap.add_argument("--pin", action="store_true",
                    help="servers on the last CPU and wrk on the one before it (taskset): steadier on a small VM")
    ap.add_argument("--callgrind", action="store_true", help="instructions per request under valgrind instead")
    ap.add_argument("--apps-only", action="store_true", help="with --callgrind: only the apps called from Python")
    ap.add_argument("--recording", action="store_true",
                    help="with --callgrind: also /v1 with the standard library's recording path, and with none")
    ap.add_argument("--set", action="append", default=[], metavar="ORCHARD_X=value",
                    help="a setting for the Orchard server (repeatable), e.g. ORCHARD_ACCESS_LOG=false")
    args = ap.parse_args()
    if args.pin and not args.callgrind:
        global PIN
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            ap.error("--pin needs two CPUs")
        PIN = (str(cpus[-1]), str(cpus[-2]))
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
    env["PYTHONPATH"] = str(ROOT)
    server_env = dict(env, **dict(kv.split("=", 1) for kv in args.set))
    if args.callgrind:
        return main_callgrind(args, data, env, server_env)
    tmp = Path(tempfile.mkdtemp())
    port = free_port()
    server = start([sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--data-dir", str(tmp),
                    "--workers", "1"], server_env)
    bare = None
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/health/ready")
        c = httpx.Client(base_url=base, timeout=60)
        ds = upload_breast_cancer(c, data)

        # -- 2. train -> running latency, idle pool ------------------------------------------------
        server_ms, client_ms = [], []
        for i in range(args.runs):
            t0 = time.perf_counter()
            r = c.post("/v1/train", json={"algorithm": "logistic_regression", "dataset_id": ds, "target": "diagnosis",
                                          "name": f"bench-{i}"})
            job_id = r.json()["job"]["id"]
            while True:
                j = c.get(f"/v1/jobs/{job_id}").json()
                if j["status"] != "queued":
                    client_ms.append((time.perf_counter() - t0) * 1000)
                    break
            while j["status"] not in ("succeeded", "failed"):
                time.sleep(0.02)
                j = c.get(f"/v1/jobs/{job_id}").json()
            created = dt.datetime.fromisoformat(j["created_at"])
            started = dt.datetime.fromisoformat(j["started_at"])
            server_ms.append((started - created).total_seconds() * 1000)
            mid = j["result"]["model_id"]
        # -- 1. predict throughput --------------------------------------------------------------------
        row = {"rows": [list(map(float, data.data[0]))]}
        body = json.dumps(row)
        assert c.post(f"/v1/models/{mid}/predict", json=row).status_code == 200
        bport = free_port()
        bare = start([sys.executable, "-m", "uvicorn", "bench._bare_asgi:app", "--port", str(bport),
                      "--log-level", "warning", "--no-access-log", "--no-server-header"], env)  # as orchard serve
        wait_http(f"http://127.0.0.1:{bport}/", 30)
        o_url, b_url = f"{base}/v1/models/{mid}/predict", f"http://127.0.0.1:{bport}/"
        v2_url, v2n_url = f"{base}/v2/models/{mid}/infer", f"{base}/v2/models/bench-{args.runs - 1}/infer"  # id, name
        # the same row as one [1, 30] FP64 tensor, asking for the output /v1 gives: JSON, and binary tensor data
        v2_body, v2_bin, hlen = v2_bodies(row["rows"][0])
        v2_ids = b'{"id":"REQUEST-ID",' + v2_body[1:]  # the same document with a new id in every request
        bin_headers = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(hlen)}
        answers = [c.post(o_url, content=body).json()["predictions"],
                   c.post(v2_url, content=v2_body).json()["outputs"][0]["data"],
                   orjson.loads(c.post(v2_url, content=v2_bin, headers=bin_headers).content)["outputs"][0]["data"],
                   c.post(v2_url, content=v2_ids.replace(b"REQUEST-ID", b"req-0")).json()["outputs"][0]["data"],
                   c.post(v2n_url, content=v2_body).json()["outputs"][0]["data"]]
        assert all(a == answers[0] for a in answers), answers  # the same numbers each way
        for url, b, h in ((o_url, body, None), (v2_url, v2_body, None), (v2_url, v2_bin, bin_headers),
                          (v2n_url, v2_body, None), (b_url, body, None)):  # warm-up
            wrk(url, b, 2, args.connections, h)
        wrk(v2_url, v2_ids, 2, args.connections, new_ids=True)
        rounds = []
        for _ in range(args.rounds):
            o, b = server.pid, bare.pid
            rounds.append((wrk(o_url, body, args.duration, args.connections, pid=o),
                           wrk(b_url, body, args.duration, args.connections, pid=b),
                           wrk(v2_url, v2_body, args.duration, args.connections, pid=o),
                           wrk(v2_url, v2_bin, args.duration, args.connections, bin_headers, pid=o),
                           wrk(v2_url, v2_ids, args.duration, args.connections, new_ids=True, pid=o),
                           wrk(v2n_url, v2_body, args.duration, args.connections, pid=o)))
    finally:
        stop(server)
        if bare is not None:
            stop(bare)
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"# bench/service.py  {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}, wrk -t1 -c{args.connections} -d{args.duration}s, {args.rounds} alternating rounds"
          f"{f', servers on CPU {PIN[0]} and wrk on CPU {PIN[1]}' if PIN else ''}; "
          f"server settings: {' '.join(args.set) or 'defaults'}")
    print("\n## Single-row predict over HTTP (logistic_regression, breast_cancer, 30 features)\n")
    print("| round | /v1 req/s | /v2 JSON req/s | /v2 binary req/s | /v2 JSON, new id each req/s | /v2 JSON by name "
          "req/s | bare req/s | /v1 p99 ms | /v2 JSON p99 ms | /v2 binary p99 ms | /v2 new ids p99 ms | /v2 by name "
          "p99 ms | bare p99 ms | /v1 / bare | /v2 JSON / bare | /v2 binary / bare | /v2 new ids / bare "
          "| /v2 by name / bare | non-2xx |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios: list[list[float]] = [[], [], [], [], []]
    for i, (o, b, v, vb, vi, vn) in enumerate(rounds, 1):
        for r, x in zip(ratios, (o, v, vb, vi, vn), strict=True):
            r.append(x["rps"] / b["rps"])
        print(f"| {i} | {o['rps']:.0f} | {v['rps']:.0f} | {vb['rps']:.0f} | {vi['rps']:.0f} | {vn['rps']:.0f} | "
              f"{b['rps']:.0f} | {o['p99_ms']:.2f} | {v['p99_ms']:.2f} | {vb['p99_ms']:.2f} | {vi['p99_ms']:.2f} | "
              f"{vn['p99_ms']:.2f} | {b['p99_ms']:.2f} | " + " | ".join(f"{r[-1]:.2f}" for r in ratios)
              + f" | {sum(x['errors'] for x in (o, b, v, vb, vi, vn))} |")
    print(f"\nmedian ratios to the bare app: /v1 {statistics.median(ratios[0]):.2f}, /v2 JSON "
          f"{statistics.median(ratios[1]):.2f}, /v2 binary {statistics.median(ratios[2]):.2f} (target >= 0.80 each); "
          f"/v2 JSON with a new id in each request {statistics.median(ratios[3]):.2f}, /v2 JSON by model name "
          f"{statistics.median(ratios[4]):.2f}; the five answered the same predictions")
    print("\nserver CPU time per request (user + system, all threads; median over the rounds): "
          + ", ".join(f"{label} {statistics.median(r[i]['cpu_us'] for r in rounds):.1f} us" for i, label in
                      ((0, "/v1"), (2, "/v2 JSON"), (3, "/v2 binary"), (1, "bare")))
          + "; bare / this: " + ", ".join(
              f"{label} {statistics.median(r[1]['cpu_us'] / r[i]['cpu_us'] for r in rounds):.2f}" for i, label in
              ((0, "/v1"), (2, "/v2 JSON"), (3, "/v2 binary"))))
    print(f"\n## POST /v1/train -> running, idle pool ({args.runs} runs)\n")
    print(f"server timestamps (started_at - created_at): median {statistics.median(server_ms):.1f} ms, "
          f"max {max(server_ms):.1f} ms (target < 100 ms)")
    print(f"client view (POST to first non-queued poll): median {statistics.median(client_ms):.1f} ms, "
          f"max {max(client_ms):.1f} ms")


if __name__ == "__main__":
    main()
