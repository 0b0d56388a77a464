"""Cost of observability on single-row predict throughput (issue 7).

Serves the same model (logistic_regression on breast_cancer, 30 features) from `orchard serve` with metrics and
the JSON access log on (the defaults: ORCHARD_METRICS=true, ORCHARD_ACCESS_LOG=true, log lines written to a file)
and off (ORCHARD_METRICS=false, ORCHARD_ACCESS_LOG=false), alternating the two for several rounds, and measures
POST /v1/models/{id}/predict throughput with wrk on loopback. Prints the ratio on/off (target >= 0.95).

Usage: python bench/observability.py [--duration 10] [--connections 8] [--rounds 3] [--concurrent]
                                    [--tree NAME=DIR ...]
Needs `wrk` (Debian package). With taskset and 2+ cores the server runs on core 0 and wrk on core 1.

On a shared, loaded machine timings vary by more than the 5% in question, so `--callgrind` counts instead the
server's instructions per request under valgrind (Debian package `valgrind`): the server is run with 200 and
with 1,200 sequential predict requests, and (I(1200) - I(200)) / 1000 is the cost of one request without the
start-up (PYTHONHASHSEED=0; deterministic up to garbage-collection timing). Slow: ~2 minutes per server run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.service import CALLGRIND_ENV, free_port, wait_http  # noqa: E402
from bench.service import wrk as _wrk  # noqa: E402


def wrk(url: str, body: str, duration: int, connections: int) -> dict:
    """wrk pinned to the second core (the server is pinned to the first), to keep the two apart."""
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        real = subprocess.run

        def pinned(cmd, *a, **kw):
            return real(["taskset", "-c", "1", *cmd] if cmd and cmd[0] == "wrk" else cmd, *a, **kw)

        subprocess.run = pinned
        try:
            return _wrk(url, body, duration, connections)
        finally:
            subprocess.run = real
    return _wrk(url, body, duration, connections)

ROOT = Path(__file__).resolve().parents[1]


def serve(data_dir: Path, port: int, on: bool, log_path: Path, root: Path = ROOT) -> subprocess.Popen:
    """`orchard serve` from the source tree ``root`` (another tree: an A/B of two versions), pinned to core 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
    env.update(PYTHONPATH=str(root), ORCHARD_SECRET_KEY="bench", ORCHARD_METRICS=str(on).lower(),
               ORCHARD_ACCESS_LOG=str(on).lower())
    log = open(log_path, "ab")
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") and (os.cpu_count() or 1) > 1 else []
    p = subprocess.Popen([*pin, sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--data-dir",
                          str(data_dir), "--workers", "1"], cwd=root, env=env, stdout=log, stderr=log,
                         start_new_session=True)
    log.close()
    wait_http(f"http://127.0.0.1:{port}/health/ready")
    return p


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (/proc/<pid>/stat), to compute server CPU per request."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=30)


def callgrind(data_dir: Path, mid: str, body: dict, on: bool, n: int, tmp: Path) -> int:
    """Instructions executed by `orchard serve` (user space) from start to exit after n predict requests."""
    import re

    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
    env.update(PYTHONPATH=str(ROOT), ORCHARD_SECRET_KEY="bench", ORCHARD_METRICS=str(on).lower(),
               ORCHARD_ACCESS_LOG=str(on).lower(), **CALLGRIND_ENV)
    port = free_port()
    out = tmp / f"callgrind-{on}-{n}.out"
    with open(tmp / f"callgrind-{on}-{n}.log", "wb") as log:
        p = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-m",
                              "service.cli", "serve", "--port", str(port), "--data-dir", str(data_dir), "--workers",
                              "0"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    wait_http(f"http://127.0.0.1:{port}/health/ready", timeout=900)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as c:
        for _ in range(n):
            assert c.post(f"/v1/models/{mid}/predict", json=body).status_code == 200
    os.killpg(p.pid, signal.SIGINT)
    p.wait(timeout=900)
    return int(re.search(r"^summary:\s+(\d+)", out.read_text(errors="replace"), re.M).group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--callgrind", action="store_true", help="count instructions per request instead of timing")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrent", action="store_true",
                    help="start the servers once, all at the same time, and measure them in turns (short bursts "
                         "cancel the machine's drift between rounds)")
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                    help="also serve another source tree (e.g. `git archive` of an earlier commit, or a variant) "
                         "with metrics and access log on, measured in turns with the others (repeatable; implies "
                         "--concurrent)")
    args = ap.parse_args()
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    tmp = Path(tempfile.mkdtemp())
    results: dict[str, list[dict]] = {"on": [], "off": []}
    modes = ["on", "off"]
    try:
        port = free_port()
        p = serve(tmp / "data", port, True, tmp / "setup.log")
        try:
            c = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
            cols = [f"f{j}" for j in range(data.data.shape[1])] + ["diagnosis"]
            rows = [list(map(float, x)) + [data.target_names[t]] for x, t in zip(data.data, data.target, strict=True)]
            ds = c.post("/v1/datasets", json={"name": "bc", "columns": cols, "rows": rows}).json()["id"]
            r = c.post("/v1/train", json={"algorithm": "logistic_regression", "dataset_id": ds, "target": "diagnosis"})
            mid = r.json()["model_id"]
            while c.get(f"/v1/jobs/{r.json()['job']['id']}").json()["status"] not in ("succeeded", "failed"):
                pass
        finally:
            stop(p)
        body = json.dumps({"rows": [list(map(float, data.data[0]))]})
        if args.callgrind:
            per = {}
            for on in (False, True):
                a = callgrind(tmp / "data", mid, json.loads(body), on, 200, tmp)
                b = callgrind(tmp / "data", mid, json.loads(body), on, 1200, tmp)
                per[on] = (b - a) / 1000
                print(f"metrics + access log {'on' if on else 'off'}: {per[on]:,.0f} instructions per request "
                      f"(I(1200) = {b:,}, I(200) = {a:,})", flush=True)
            print(f"overhead: {per[True] - per[False]:,.0f} instructions per request, "
                  f"{100 * (per[True] / per[False] - 1):.1f}% of the off figure (target <= 5%)")
            return
        def measure(p: subprocess.Popen, port: int) -> dict:
            url = f"http://127.0.0.1:{port}/v1/models/{mid}/predict"
            cpu0 = cpu_seconds(p.pid)
            r = wrk(url, body, args.duration, args.connections)
            r["cpu_us"] = (cpu_seconds(p.pid) - cpu0) / (r["rps"] * args.duration) * 1e6
            return r

        trees = dict(spec.split("=", 1) for spec in args.tree)
        for name in trees:
            modes.append(name)
            results[name] = []
        if args.concurrent or trees:  # every server up at once, short bursts in turn
            servers = {}
            try:
                for mode in modes:
                    port = free_port()
                    servers[mode] = (serve(tmp / "data", port, mode != "off", tmp / f"server-{mode}.log",
                                           Path(trees.get(mode, ROOT))), port)
                    wrk(f"http://127.0.0.1:{port}/v1/models/{mid}/predict", body, 2, args.connections)  # warm-up
                for rnd in range(args.rounds):
                    for mode in (modes if rnd % 2 == 0 else modes[::-1]):
                        results[mode].append(measure(*servers[mode]))
            finally:
                for p, _ in servers.values():
                    stop(p)
        else:
            for rnd in range(args.rounds):
                for mode in (("on", "off") if rnd % 2 == 0 else ("off", "on")):
                    port = free_port()
                    p = serve(tmp / "data", port, mode == "on", tmp / f"server-{mode}.log")
                    try:
                        wrk(f"http://127.0.0.1:{port}/v1/models/{mid}/predict", body, 2, args.connections)  # warm-up
                        results[mode].append(measure(p, port))
                    finally:
                        stop(p)
        log_lines = sum(1 for _ in open(tmp / "server-on.log", "rb"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"# bench/observability.py  {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
          f"wrk -t1 -c{args.connections} -d{args.duration}s, {args.rounds} alternating rounds")
    print("\n| metrics + access log | requests/s (median) | per round | server CPU us/request (median) | "
          "p50 ms | p99 ms | non-2xx |")
    print("|---|---|---|---|---|---|---|")
    med, cpu = {}, {}
    for mode in modes:
        rs = results[mode]
        med[mode] = statistics.median(r["rps"] for r in rs)
        per_round = ", ".join(f"{r['rps']:.0f}" for r in rs)
        cpu[mode] = statistics.median(r["cpu_us"] for r in rs)
        print(f"| {mode} | {med[mode]:.0f} | {per_round} | {cpu[mode]:.0f} | "
              f"{statistics.median(r['p50_ms'] for r in rs):.2f} | {statistics.median(r['p99_ms'] for r in rs):.2f} | "
              f"{sum(r['errors'] for r in rs)} |")
    print(f"\nthroughput ratio on / off: {med['on'] / med['off']:.3f} (target >= 0.95); server CPU per request "
          f"off / on: {cpu['off'] / cpu['on']:.3f} (the throughput ratio a saturated dedicated core would give); "
          f"access-log lines written while on: {log_lines}")
    per_round = statistics.median(a["rps"] / b["rps"] for a, b in zip(results["on"], results["off"], strict=True))
    print(f"median of the per-round ratios on / off: {per_round:.3f}")
    for name in modes[2:]:
        ratios = [a["rps"] / b["rps"] for a, b in zip(results[name], results["off"], strict=True)]
        print(f"tree {name} (on) / off: {med[name] / med['off']:.3f}, median of the per-round ratios "
              f"{statistics.median(ratios):.3f}; server CPU per request off / {name}: {cpu['off'] / cpu[name]:.3f}")


if __name__ == "__main__":
    main()
