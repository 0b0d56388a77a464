"""Cold start of `orchard serve` outside a container: time from starting the process to its first 200 from
/health/ready (ready = metadata store, artifact store and one warm training worker), on a fresh data dir.

Settings alternate within each round (so drifting machine load hits them alike). Per run it prints the time
to /health/live, to /health/ready, and the CPU seconds (user + system) spent by the server's processes (its
session: API, forkserver, workers, resource tracker) at the moment it was ready: less sensitive than wall time
to the load of a shared machine.

Usage: python bench/cold_start.py [--runs 5] [--workers 1 2] [--module] [--roots DIR ...] [--nice N]
  --module: start `python -m service.cli serve` instead of the `orchard` console script.
  --roots: checkouts whose code to start (PYTHONPATH), alternating within each round, e.g. a checkout of the
           previous commit and this one (default: this repository).
  --nice: run the server at this niceness (root may give a negative one: on a machine shared with other
          work, -20 approximates an otherwise idle machine; say so when reporting such figures).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def session_cpu(sid: int) -> float:
    """CPU seconds of the live processes of session ``sid`` (the server was started in a new session)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # fields after the name: state ppid pgrp session ... utime(11) stime(12)
            total += int(fields[11]) + int(fields[12])
    return total / tick


def one_run(root: Path, workers: int, module: bool, nice: int = 0) -> tuple[float, float, float]:
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="orchard-cold-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
    env["PYTHONPATH"] = str(root)
    exe = [sys.executable, "-m", "service.cli"] if module else [shutil.which("orchard") or "orchard"]
    cmd = [*(["nice", "-n", str(nice)] if nice else []), *exe, "serve", "--port", str(port),
           "--data-dir", str(data / "d"), "--workers", str(workers)]
    url = f"http://127.0.0.1:{port}"
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    live = ready = None
    with httpx.Client(timeout=1) as c:
        while time.monotonic() - t0 < 60:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}")
            try:
                if live is None and c.get(url + "/health/live").status_code == 200:
                    live = time.monotonic() - t0
                if c.get(url + "/health/ready").status_code == 200:
                    ready = time.monotonic() - t0
                    cpu = session_cpu(proc.pid)
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.01)
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 10  # the workers, forkserver and resource tracker exit after the API
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        print("  (processes were left 10 s after SIGTERM: killed)")
    shutil.rmtree(data, ignore_errors=True)
    if ready is None:
        raise RuntimeError("not ready after 60 s")
    return live, ready, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--module", action="store_true", help="python -m service.cli instead of the console script")
    ap.add_argument("--roots", type=Path, nargs="+", default=[ROOT])
    ap.add_argument("--nice", type=int, default=0)
    args = ap.parse_args()
    print(f"date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M:%SZ}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; cores {os.cpu_count()}; "
          f"{'python -m service.cli' if args.module else 'orchard'} serve; niceness {args.nice}")
    for root in args.roots:
        one_run(root, args.workers[0], args.module, args.nice)  # warm the page cache and byte code (not counted)
    res: dict[tuple, list] = {(root, w): [] for root in args.roots for w in args.workers}
    for r in range(args.runs):
        for (root, w), rows in res.items():
            live, ready, cpu = one_run(root, w, args.module, args.nice)
            rows.append((live, ready, cpu))
            print(f"  round {r + 1} {root} workers={w}: live {live:.2f} s, ready {ready:.2f} s, cpu {cpu:.2f} s",
                  flush=True)
    for (root, w), rows in res.items():
        ready = sorted(x[1] for x in rows)
        live = sorted(x[0] for x in rows)
        cpu = sorted(x[2] for x in rows)
        print(f"{root} workers={w}: ready median {statistics.median(ready):.2f} s (min {ready[0]:.2f}, "
              f"max {ready[-1]:.2f}); live median {statistics.median(live):.2f} s; "
              f"cpu median {statistics.median(cpu):.2f} s")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
