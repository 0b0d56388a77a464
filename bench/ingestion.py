"""Dataset ingestion speed: the whole HTTP upload against pandas.read_csv and against the previous CSV path.

Generates a mixed CSV of about --mb megabytes in a temporary directory (floats, integers, categories,
yes/no, ISO dates, missing values) and the same data as Parquet, starts three `orchard serve` processes
(this tree with Arrow's default thread pool; this tree with OMP_NUM_THREADS=1, i.e. one Arrow thread, which
is also the number of pieces parsed at once; the tree of --baseline-commit, the hand-written `csv`-module
parser, exported with `git archive` into the temporary directory), and times in interleaved rounds:

- `pandas.read_csv(file)` alone (in this process, C engine: single-threaded; parse only, no storage);
- the HTTP upload of the CSV to this tree, Arrow threads at default and at 1 (stream, parse, types, storage,
  metadata);
- the HTTP upload of the Parquet file to this tree (default threads);
- the HTTP upload of the CSV to the baseline tree ("today's CSV path" before Arrow); --baseline-rounds of them.

Before the timed rounds: one untimed upload per server (CSV, and Parquet to the default server) and one
untimed `read_csv`, so no round pays a cold import (pyarrow in a server, pandas' parser here). Prints the load
average at the start and the end, wall-clock medians, the CPU seconds each took (pandas: this process; uploads: the server process, all
its threads; CPU time does not depend on how loaded the machine is) and the ratios. Each dataset is deleted
after its round. Report `uptime` with the figures: the CPUs are shared.

Usage: python bench/ingestion.py [--mb 100] [--rounds 5] [--baseline-rounds 1] [--baseline-commit a306d88]
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


def start_server(cwd: Path, data_dir: Path, threads: int | None = None) -> tuple[subprocess.Popen, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
    env.pop("OMP_NUM_THREADS", None)  # Arrow sizes its thread pool from it
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    env["PYTHONPATH"] = str(cwd)
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--data-dir",
                          str(data_dir), "--workers", "1"], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/health/ready")
    return p, base


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime, all threads


def upload(server: subprocess.Popen, base: str, path: Path, ctype: str) -> tuple[float, float]:
    c0, t0 = cpu_seconds(server.pid), time.perf_counter()
    with open(path, "rb") as fh:
        r = httpx.post(base + "/v1/datasets", content=fh, headers={"content-type": ctype}, timeout=900)
    elapsed, cpu = time.perf_counter() - t0, cpu_seconds(server.pid) - c0
    r.raise_for_status()
    httpx.delete(base + f"/v1/datasets/{r.json()['id']}", timeout=60).raise_for_status()
    return elapsed, cpu


def main() -> None:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline-rounds", type=int, default=1)
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
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), parquet)
        del frame
        old = tmp / "baseline"
        old.mkdir()
        archive = subprocess.run(["git", "archive", args.baseline_commit], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        srv = {}
        for key, cwd, threads in (("default", ROOT, None), ("one", ROOT, 1), ("baseline", old, None)):
            srv[key] = start_server(cwd, tmp / f"data-{key}", threads)
            servers.append(srv[key][0])
        runs = {"pandas.read_csv": lambda: None,
                "upload CSV, Arrow threads default": lambda: upload(*srv["default"], csv, "text/csv"),
                "upload CSV, Arrow threads 1": lambda: upload(*srv["one"], csv, "text/csv"),
                "upload Parquet": lambda: upload(*srv["default"], parquet, "application/vnd.apache.parquet"),
                "upload CSV, baseline": lambda: upload(*srv["baseline"], csv, "text/csv")}
        wall: dict[str, list[float]] = {k: [] for k in runs}
        cpu: dict[str, list[float]] = {k: [] for k in runs}
        load_start = os.getloadavg()
        pd.read_csv(csv)  # warm-up, untimed
        upload(*srv["default"], csv, "text/csv")
        upload(*srv["default"], parquet, "application/vnd.apache.parquet")
        upload(*srv["one"], csv, "text/csv")
        upload(*srv["baseline"], csv, "text/csv")
        loads = [os.getloadavg()[0]]
        for i in range(args.rounds):
            for k, run in runs.items():
                if k == "upload CSV, baseline" and i >= args.baseline_rounds:
                    continue
                if k == "pandas.read_csv":
                    c0, t0 = time.process_time(), time.perf_counter()
                    pd.read_csv(csv)
                    w, c = time.perf_counter() - t0, time.process_time() - c0
                else:
                    w, c = run()
                wall[k].append(w)
                cpu[k].append(c)
            loads.append(os.getloadavg()[0])
        med = {k: statistics.median(v) for k, v in wall.items()}
        mcpu = {k: statistics.median(v) for k, v in cpu.items()}
        model = next((ln.split(":", 1)[1].strip() for ln in subprocess.run(["lscpu"], capture_output=True,
                      text=True).stdout.splitlines() if ln.startswith("Model name")), "?")
        print(f"# bench/ingestion.py  {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {model}, {os.cpu_count()} CPUs, "
              f"load average (1 min) {min(loads):.1f}-{max(loads):.1f}")
        load_end = os.getloadavg()
        print("load average (1, 5, 15 min) at start: " + ", ".join(f"{x:.2f}" for x in load_start)
              + "; at end: " + ", ".join(f"{x:.2f}" for x in load_end))
        print(f"CSV {size / 2**20:.1f} MiB ({n_rows} rows x 12 columns), Parquet {parquet.stat().st_size / 2**20:.1f} "
              f"MiB; {args.rounds} interleaved rounds ({args.baseline_rounds} of the baseline), medians")
        for k, v in med.items():
            print(f"  {k:<35} {v:7.2f} s wall ({size / 2**20 / v:6.1f} MiB/s)  {mcpu[k]:6.2f} s CPU   rounds: "
                  + ", ".join(f"{x:.2f}" for x in wall[k]))
        pandas = "pandas.read_csv"
        for k in ("upload CSV, Arrow threads default", "upload CSV, Arrow threads 1"):
            print(f"{k} vs {pandas} alone: {med[pandas] / med[k]:.2f}x wall, {mcpu[pandas] / mcpu[k]:.2f}x CPU "
                  "(>= 1: the whole upload is at least as fast)")
        print(f"upload Parquet vs baseline CSV upload: {med['upload CSV, baseline'] / med['upload Parquet']:.1f}x")
        print(f"upload Parquet vs today's CSV upload (threads default): "
              f"{med['upload CSV, Arrow threads default'] / med['upload Parquet']:.1f}x")
        print(f"upload CSV vs baseline CSV upload: "
              f"{med['upload CSV, baseline'] / med['upload CSV, Arrow threads default']:.1f}x")
    finally:
        for s in servers:
            stop(s)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
