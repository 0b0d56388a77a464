"""Dataset ingestion speed: the whole HTTP upload against pandas.read_csv and against the previous CSV path.

Generates a mixed CSV of about --mb megabytes in a temporary directory (floats, integers, categories,
yes/no, ISO dates, missing values) and the same data as Parquet, starts two `orchard serve` processes
(this tree, and the tree of --baseline-commit: the hand-written `csv`-module parser, exported with
`git archive` into the temporary directory), and times in interleaved rounds:

- `pandas.read_csv(file)` alone (in this process; parse only, no storage);
- the HTTP upload of the CSV to this tree (stream, parse, types, storage, metadata);
- the HTTP upload of the Parquet file to this tree;
- the HTTP upload of the CSV to the baseline tree ("today's CSV path" before Arrow).

Prints the medians and the ratios. Each dataset is deleted after its round. Keep runs short: the CPUs are
shared (default 100 MB, 3 rounds: about three minutes).

Usage: python bench/ingestion.py [--mb 100] [--rounds 3] [--baseline-commit a306d88]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.service import free_port, stop, wait_http  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def make_csv(path: Path, mb: int) -> int:
    rng = np.random.default_rng(0)
    cats = np.array(["red", "green", "blue", "violet", "orange", "teal", "grey"])
    cities = np.array([f"city_{i:04d}" for i in range(2000)])
    day0 = np.datetime64("2015-01-01")
    with open(path, "w") as fh:
        fh.write("id,date,x0,x1,x2,x3,count,colour,city,member,flag,y\n")
        start = 0
        while fh.tell() < mb * 1024 * 1024:
            n = 50_000
            X = rng.normal(size=(n, 4)).round(6)
            cnt = rng.integers(0, 1000, n)
            col = cats[rng.integers(0, len(cats), n)]
            city = cities[rng.integers(0, len(cities), n)]
            member = np.where(rng.random(n) > 0.5, "yes", "no")
            flag = np.where(rng.random(n) > 0.5, "true", "false")
            dates = np.datetime_as_string(day0 + rng.integers(0, 3000, n))
            y = rng.normal(size=n).round(4)
            lines = [f"{start + i},{dates[i]},{X[i, 0]},{X[i, 1]},{X[i, 2]},{X[i, 3]},{cnt[i]},{col[i]},{city[i]},"
                     f"{member[i]},{flag[i]},{y[i]}" for i in range(n)]
            for i in range(0, n, 53):
                parts = lines[i].split(",")
                parts[2] = "" if i % 2 else "NA"
                parts[7] = ""
                lines[i] = ",".join(parts)
            fh.write("\n".join(lines) + "\n")
            start += n
    return path.stat().st_size


def start_server(cwd: Path, data_dir: Path) -> tuple[subprocess.Popen, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
    env["PYTHONPATH"] = str(cwd)
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--data-dir",
                          str(data_dir), "--workers", "1"], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/health/ready")
    return p, base


def upload(base: str, path: Path, ctype: str) -> float:
    t0 = time.perf_counter()
    with open(path, "rb") as fh:
        r = httpx.post(base + "/v1/datasets", content=fh, headers={"content-type": ctype}, timeout=900)
    elapsed = time.perf_counter() - t0
    r.raise_for_status()
    httpx.delete(base + f"/v1/datasets/{r.json()['id']}", timeout=60).raise_for_status()
    return elapsed


def main() -> None:
    import pandas as pd
    import pyarrow.parquet as pq

    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline-commit", default="a306d88")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="orchard-ingest-"))
    servers = []
    try:
        csv = tmp / "mixed.csv"
        size = make_csv(csv, args.mb)
        parquet = tmp / "mixed.parquet"
        frame = pd.read_csv(csv)
        n_rows = len(frame)
        pq.write_table(__import__("pyarrow").Table.from_pandas(frame, preserve_index=False), parquet)
        del frame
        old = tmp / "baseline"
        old.mkdir()
        archive = subprocess.run(["git", "archive", args.baseline_commit], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        new_srv, new = start_server(ROOT, tmp / "data-new")
        servers.append(new_srv)
        old_srv, base_old = start_server(old, tmp / "data-old")
        servers.append(old_srv)
        times: dict[str, list[float]] = {"pandas.read_csv": [], "upload CSV": [], "upload Parquet": [],
                                         "upload CSV, baseline": []}
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            pd.read_csv(csv)
            times["pandas.read_csv"].append(time.perf_counter() - t0)
            times["upload CSV"].append(upload(new, csv, "text/csv"))
            times["upload Parquet"].append(upload(new, parquet, "application/vnd.apache.parquet"))
            times["upload CSV, baseline"].append(upload(base_old, csv, "text/csv"))
        med = {k: statistics.median(v) for k, v in times.items()}
        cpu = next((ln.split(":", 1)[1].strip() for ln in subprocess.run(["lscpu"], capture_output=True,
                    text=True).stdout.splitlines() if ln.startswith("Model name")), "?")
        print(f"# bench/ingestion.py  {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {cpu}, {os.cpu_count()} CPUs")
        print(f"CSV {size / 2**20:.1f} MiB ({n_rows} rows x 12 columns), Parquet {parquet.stat().st_size / 2**20:.1f} "
              f"MiB; {args.rounds} interleaved rounds, medians")
        for k, v in med.items():
            print(f"  {k:<24} {v:7.2f} s   ({size / 2**20 / v:6.1f} MiB/s of CSV)   rounds: "
                  + ", ".join(f"{x:.2f}" for x in times[k]))
        print(f"upload CSV vs pandas.read_csv alone: {med['pandas.read_csv'] / med['upload CSV']:.2f}x "
              "(>= 1: the whole upload is at least as fast)")
        print(f"upload Parquet vs baseline CSV upload: {med['upload CSV, baseline'] / med['upload Parquet']:.1f}x")
        print(f"upload CSV vs baseline CSV upload: {med['upload CSV, baseline'] / med['upload CSV']:.1f}x")
    finally:
        for s in servers:
            stop(s)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
