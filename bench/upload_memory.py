"""Peak memory of `orchard serve` while it ingests a large CSV (issue: service foundation).

Generates a CSV of about --mb megabytes (numeric, categorical and boolean columns, some missing values),
starts `orchard serve` as a subprocess, streams the file to POST /v1/datasets, and reports the server's
peak resident memory (VmHWM) before and after, against the file size.

Usage: python bench/upload_memory.py [--mb 100]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.service import free_port, start, stop, wait_http  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def vm(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024  # MiB
    return float("nan")


def make_csv(path: Path, mb: int) -> int:
    rng = np.random.default_rng(0)
    cats = np.array(["red", "green", "blue", "violet", "orange"])
    with open(path, "w") as fh:
        fh.write(",".join([f"x{j}" for j in range(8)] + ["colour", "flag", "y"]) + "\n")
        while fh.tell() < mb * 1024 * 1024:
            n = 20_000
            X = rng.normal(size=(n, 8)).round(6)
            col = cats[rng.integers(0, 5, n)]
            flag = np.where(rng.random(n) > 0.5, "true", "false")
            y = rng.normal(size=n).round(4)
            lines = [",".join(map(str, X[i])) + f",{col[i]},{flag[i]},{y[i]}" for i in range(n)]
            for i in range(0, n, 97):
                lines[i] = "," + lines[i].split(",", 1)[1]  # a missing x0
            fh.write("\n".join(lines) + "\n")
    return path.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=100)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    csv = tmp / "big.csv"
    size = make_csv(csv, args.mb)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
    env["PYTHONPATH"] = str(ROOT)
    port = free_port()
    server = start([sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--data-dir",
                    str(tmp / "data"), "--workers", "1"], env)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/health/ready")
        idle = vm(server.pid, "VmRSS")
        t0 = time.perf_counter()
        with open(csv, "rb") as fh:
            r = httpx.post(base + "/v1/datasets?name=big", content=fh, headers={"content-type": "text/csv"},
                           timeout=600)
        elapsed = time.perf_counter() - t0
        r.raise_for_status()
        peak = vm(server.pid, "VmHWM")
        rows = r.json()["n_rows"]
    finally:
        stop(server)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"# bench/upload_memory.py  {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"CSV {size / 2**20:.1f} MiB, {rows} rows x 11 columns, uploaded in {elapsed:.1f} s "
          f"({size / 2**20 / elapsed:.1f} MiB/s)")
    print(f"server RSS idle {idle:.0f} MiB, peak {peak:.0f} MiB: peak - idle = {peak - idle:.0f} MiB = "
          f"{(peak - idle) / (size / 2**20):.2f} x the file size")


if __name__ == "__main__":
    main()
