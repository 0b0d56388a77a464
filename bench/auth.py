"""The cost of API keys on the hottest request: single-row predict with keys required (a `read,predict` key of
project `default`, so the project view is exercised) against the same server without keys (open), same run.

Setup: `logistic_regression` on breast_cancer (30 numeric features) trained once; its data directory copied, and
a key created in the copy with `orchard keys create`. Two measurements, each in interleaved rounds (open, keyed,
open, keyed, ...), ratio keyed / open per round, median printed:

1. app alone: N predict calls straight into each ASGI app (no HTTP), both apps in one child process, time per
   call (the steadiest figure on a loaded machine);
2. over HTTP: `orchard serve` on each directory, wrk (`--connections`, `--duration`) alternating.

3. ``--callgrind``: user-space instructions per call into each app (valgrind, ``functools.reduce`` toggled as in
   bench/service.py): independent of the machine's load, the figure to trust on a busy machine.

Usage: python bench/auth.py [--rounds 5] [--calls 3000] [--duration 5] [--connections 8] [--no-http] [--callgrind]
Target (issue "Security"): keyed >= 0.9 of open throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.service import ROOT, free_port, start, stop, train_breast_cancer_model, wait_http, wrk  # noqa: E402


def prepare(tmp: Path, env: dict) -> tuple[Path, Path, str, str, list]:
    """(open dir, keyed dir, model id, key, one row)."""
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    open_dir, keyed_dir = tmp / "open", tmp / "keyed"
    mid = train_breast_cancer_model(open_dir, env, data)
    shutil.copytree(open_dir, keyed_dir)
    made = subprocess.run([sys.executable, "-m", "service.cli", "keys", "--data-dir", str(keyed_dir), "create",
                           "--name", "bench", "--scopes", "read,predict"], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=True)
    return open_dir, keyed_dir, mid, json.loads(made.stdout)["key"], list(map(float, data.data[0]))


def child(args) -> None:
    """In a child process: both apps, interleaved rounds of N direct calls; writes per-round seconds per call."""
    from service.app import create_app
    from service.settings import Settings

    spec = json.loads(Path(args.child).read_text())
    body = json.dumps({"rows": [spec["row"]]}).encode()
    path = f"/v1/models/{spec['model']}/predict"

    def scope(auth: bool) -> dict:
        headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                   (b"content-length", b"%d" % len(body))]
        if auth:
            headers.append((b"authorization", f"Bearer {spec['key']}".encode()))
        return {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "query_string": b"",
                "headers": headers, "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8000),
                "scheme": "http", "http_version": "1.1", "root_path": "", "asgi": {"version": "3.0"}, "state": {}}

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    status = []

    async def send(message):
        if message["type"] == "http.response.start":
            status.append(message["status"])

    def calls(app, auth: bool, n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            coro = app(scope(auth), receive, send)
            try:
                coro.send(None)
            except StopIteration:
                continue
            raise RuntimeError("the app suspended")
        return (time.perf_counter() - t0) / n

    if args.count:  # one app, N calls driven by functools.reduce (what callgrind counts)
        import functools

        app = create_app(Settings(data_dir=Path(spec[args.count]), workers=0, access_log=False))
        auth = args.count == "keyed"

        def one(done: int, _: int) -> int:
            coro = app(scope(auth), receive, send)
            try:
                coro.send(None)
            except StopIteration:
                return done + 1
            raise RuntimeError("the app suspended")

        async def count():
            async with app.router.lifespan_context(app):
                for _ in range(200):
                    await app(scope(auth), receive, send)
                assert functools.reduce(one, range(args.calls), 0) == args.calls
                assert set(status) == {200}, set(status)

        asyncio.run(count())
        return

    async def run():
        apps = {name: create_app(Settings(data_dir=Path(spec[name]), workers=0, access_log=False))
                for name in ("open", "keyed")}
        async with apps["open"].router.lifespan_context(apps["open"]), \
                apps["keyed"].router.lifespan_context(apps["keyed"]):
            for name in apps:  # warm-up: the model loaded (on a worker thread: awaited), caches filled
                for _ in range(200):
                    await apps[name](scope(name == "keyed"), receive, send)
            assert set(status) == {200}, set(status)
            out = []
            for _ in range(args.rounds):
                out.append({name: calls(apps[name], name == "keyed", args.calls) for name in ("open", "keyed")})
            assert set(status) == {200}, set(status)
        Path(spec["out"]).write_text(json.dumps(out))

    asyncio.run(run())


def callgrind(tmp: Path, env: dict, n: int) -> None:
    import re

    counts = {}
    for name in ("open", "keyed"):
        out = tmp / f"callgrind.{name}"
        subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=functools_reduce",
                        f"--callgrind-out-file={out}", sys.executable, __file__, "--child",
                        str(tmp / "spec.json"), "--count", name, "--calls", str(n)], cwd=ROOT,
                       env=dict(env, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1"), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        counts[name] = int(re.search(r"^summary:\s+(\d+)", out.read_text(errors="replace"), re.M).group(1)) // n
    print(f"# bench/auth.py --callgrind  {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC; {n} calls each")
    print(f"instructions per single-row predict call into the app: open {counts['open']:,}, keyed "
          f"{counts['keyed']:,}; the key check adds {counts['keyed'] - counts['open']:,}")
    print(f"throughput ratio keyed/open at equal IPC: {counts['open'] / counts['keyed']:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--no-http", action="store_true")
    ap.add_argument("--callgrind", action="store_true", help="instructions per call under valgrind instead")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--count", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
    env["PYTHONPATH"] = str(ROOT)
    tmp = Path(tempfile.mkdtemp())
    try:
        open_dir, keyed_dir, mid, key, row = prepare(tmp, env)
        spec = {"open": str(open_dir), "keyed": str(keyed_dir), "model": mid, "key": key, "row": row,
                "out": str(tmp / "calls.json")}
        (tmp / "spec.json").write_text(json.dumps(spec))
        if args.callgrind:
            return callgrind(tmp, env, args.calls)
        subprocess.run([sys.executable, __file__, "--child", str(tmp / "spec.json"), "--rounds", str(args.rounds),
                        "--calls", str(args.calls)], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
        rounds = json.loads((tmp / "calls.json").read_text())
        print(f"# bench/auth.py  {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC; load {os.getloadavg()}")
        print("\n1. app alone, single-row predict, microseconds per call (open | keyed | throughput ratio)")
        ratios = []
        for r in rounds:
            ratios.append(r["open"] / r["keyed"])
            print(f"   {r['open'] * 1e6:8.1f} | {r['keyed'] * 1e6:8.1f} | {ratios[-1]:.3f}")
        print(f"   median ratio keyed/open: {statistics.median(ratios):.3f}")
        if args.no_http:
            return
        body = json.dumps({"rows": [row]})
        servers, urls = [], {}
        try:
            for name, d in (("open", open_dir), ("keyed", keyed_dir)):
                port = free_port()
                servers.append(start([sys.executable, "-m", "service.cli", "serve", "--port", str(port),
                                      "--data-dir", str(d), "--workers", "0"], env))
                wait_http(f"http://127.0.0.1:{port}/health/ready")
                urls[name] = f"http://127.0.0.1:{port}/v1/models/{mid}/predict"
            headers = {"keyed": {"Authorization": f"Bearer {key}"}, "open": {}}
            for name in urls:  # warm-up
                wrk(urls[name], body, 2, args.connections, headers[name])
            print(f"\n2. over HTTP (wrk, {args.connections} connections, {args.duration} s), requests/s "
                  "(open | keyed | ratio)")
            ratios = []
            for _ in range(args.rounds):
                o = wrk(urls["open"], body, args.duration, args.connections, headers["open"])
                k = wrk(urls["keyed"], body, args.duration, args.connections, headers["keyed"])
                assert o["errors"] == 0 and k["errors"] == 0, (o, k)
                ratios.append(k["rps"] / o["rps"])
                print(f"   {o['rps']:8.0f} | {k['rps']:8.0f} | {ratios[-1]:.3f}")
            print(f"   median ratio keyed/open: {statistics.median(ratios):.3f}")
        finally:
            for s in servers:
                stop(s)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
