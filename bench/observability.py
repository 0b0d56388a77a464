"""Cost of observability on single-row predict throughput (issue 7).

Serves the same model (logistic_regression on breast_cancer, 30 features) from `orchard serve` with metrics and
the JSON access log on (the defaults: ORCHARD_METRICS=true, ORCHARD_ACCESS_LOG=true, log lines written to a file)
and off (ORCHARD_METRICS=false, ORCHARD_ACCESS_LOG=false), alternating the two for several rounds, and measures
POST /v1/models/{id}/predict throughput with wrk on loopback. Prints the ratio on/off (target >= 0.95).

Usage: python bench/observability.py [--duration 10] [--connections 8] [--rounds 3]
Needs `wrk` (Debian package).
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
from bench.service import free_port, wait_http, wrk  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def serve(data_dir: Path, port: int, on: bool, log_path: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
    env.update(PYTHONPATH=str(ROOT), ORCHARD_SECRET_KEY="bench", ORCHARD_METRICS=str(on).lower(),
               ORCHARD_ACCESS_LOG=str(on).lower())
    log = open(log_path, "ab")
    p = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--data-dir",
                          str(data_dir), "--workers", "1"], cwd=ROOT, env=env, stdout=log, stderr=log,
                         start_new_session=True)
    log.close()
    wait_http(f"http://127.0.0.1:{port}/health/ready")
    return p


def stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    tmp = Path(tempfile.mkdtemp())
    results: dict[str, list[dict]] = {"on": [], "off": []}
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
        for rnd in range(args.rounds):
            for mode in (("on", "off") if rnd % 2 == 0 else ("off", "on")):
                port = free_port()
                p = serve(tmp / "data", port, mode == "on", tmp / f"server-{mode}.log")
                try:
                    url = f"http://127.0.0.1:{port}/v1/models/{mid}/predict"
                    wrk(url, body, 2, args.connections)  # warm-up
                    results[mode].append(wrk(url, body, args.duration, args.connections))
                finally:
                    stop(p)
        log_lines = sum(1 for _ in open(tmp / "server-on.log", "rb"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"# bench/observability.py  {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
          f"wrk -t1 -c{args.connections} -d{args.duration}s, {args.rounds} alternating rounds")
    print("\n| metrics + access log | requests/s (median) | per round | p50 ms | p99 ms | non-2xx |")
    print("|---|---|---|---|---|---|")
    med = {}
    for mode in ("on", "off"):
        rs = results[mode]
        med[mode] = statistics.median(r["rps"] for r in rs)
        per_round = ", ".join(f"{r['rps']:.0f}" for r in rs)
        print(f"| {mode} | {med[mode]:.0f} | {per_round} | "
              f"{statistics.median(r['p50_ms'] for r in rs):.2f} | {statistics.median(r['p99_ms'] for r in rs):.2f} | "
              f"{sum(r['errors'] for r in rs)} |")
    print(f"\nratio on / off: {med['on'] / med['off']:.3f} (target >= 0.95); "
          f"access-log lines written while on: {log_lines}")


if __name__ == "__main__":
    main()
