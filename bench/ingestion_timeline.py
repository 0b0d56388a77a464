"""Timeline of one CSV upload: which thread does what, when, and what is left serial at the end.

Runs the service in this process under uvicorn (the protocol `orchard serve` uses) and uploads a mixed CSV of
about --mb megabytes (bench/ingestion.py's generator) with `curl` in a subprocess, --rounds times after one
untimed warm-up upload. The stages are wrapped to stamp `time.perf_counter` (wall) and `time.thread_time`
(CPU of the calling thread) per call: the spool writes of the event loop, the parse of each piece (worker
threads), the conversion and append of each batch (the ingest thread), the writer's end (vocabularies, remaps,
typing), publishing (fsync, rename) and the metadata row. Per round it prints, in wall seconds from the request
start: the body receipt span, each thread's busy span and CPU, the parse of the last piece, and the tail (from
the last body byte to the answer): the serial part that no second core shortens. With --verbose, every piece.

Usage: python bench/ingestion_timeline.py [--mb 100] [--rounds 3] [--verbose]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.ingestion import make_csv  # noqa: E402
from bench.service import free_port  # noqa: E402

EVENTS: list[tuple[str, int, float, float, float]] = []  # (stage, thread id, wall start, wall end, CPU s)


def stamped(stage: str, fn):
    def wrapper(*a, **kw):
        c0, t0 = time.thread_time(), time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            EVENTS.append((stage, threading.get_native_id(), t0, time.perf_counter(), time.thread_time() - c0))
    return wrapper


def instrument() -> None:
    from service.services import column_files, datasets, ingest
    from service.storage import artifacts

    ingest.BodySpool.write = stamped("spool write", ingest.BodySpool.write)
    ingest._read_piece = stamped("parse piece", ingest._read_piece)
    if hasattr(column_files.Writer, "commit"):  # conversion where the piece was parsed, append in order
        column_files.Writer.prepare = stamped("convert", column_files.Writer.prepare)
        column_files.Writer.commit = stamped("append", column_files.Writer.commit)
    else:
        column_files.Writer.add = stamped("convert+append", column_files.Writer.add)
    column_files.Writer.finish = stamped("writer end", column_files.Writer.finish)
    artifacts.ArtifactStore.publish_dataset = stamped("publish (fsync)", artifacts.ArtifactStore.publish_dataset)
    datasets._insert = stamped("metadata row", datasets._insert)


def thread_cpu() -> dict[int, float]:
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            f = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        out[int(tid)] = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    return out


def report(t0: float, t_end: float, cpu0: dict, cpu1: dict, verbose: bool) -> None:
    ev = [e for e in EVENTS if e[2] >= t0]
    by_stage = collections.defaultdict(list)
    for e in ev:
        by_stage[e[0]].append(e)
    writes = by_stage["spool write"]
    body_end = max(e[3] for e in writes) - t0
    loop_tid = writes[0][1]
    print(f"  wall {t_end - t0:.2f} s; body received 0.00-{body_end:.2f} s ({len(writes)} spool writes, "
          f"{sum(e[4] for e in writes):.2f} s CPU in them)")
    for stage in ("parse piece", "convert", "append", "convert+append", "writer end", "publish (fsync)", "metadata row"):
        es = by_stage[stage]
        if not es:
            continue
        tids = sorted({e[1] for e in es})
        print(f"  {stage:<16} {len(es):4d} calls  {min(e[2] for e in es) - t0:6.2f}-{max(e[3] for e in es) - t0:6.2f} s"
              f"  busy {sum(e[3] - e[2] for e in es):5.2f} s wall, {sum(e[4] for e in es):5.2f} s CPU"
              f"  on {len(tids)} thread(s)")
    parses = sorted(by_stage["parse piece"], key=lambda e: e[2])
    if verbose:
        for i, e in enumerate(parses):
            print(f"    piece {i:3d} thread {e[1]} {e[2] - t0:6.3f}-{e[3] - t0:6.3f} s  CPU {e[4]:.3f} s")
    last_parse = max(e[3] for e in parses) - t0
    print("  threads (CPU s in the round, /proc): " + ", ".join(
        f"{'loop' if tid == loop_tid else tid}: {cpu1[tid] - cpu0.get(tid, 0.0):.2f}"
        for tid in sorted(cpu1) if cpu1[tid] - cpu0.get(tid, 0.0) >= 0.01))
    end_stages = [e for s in ("writer end", "publish (fsync)", "metadata row") for e in by_stage[s]]
    print(f"  tail after the last body byte: {t_end - t0 - body_end:.2f} s (last parse ends {last_parse - body_end:+.2f} s "
          f"after it; writer end + publish + metadata row {sum(e[3] - e[2] for e in end_stages):.2f} s wall)")
    first = parses[0]
    print(f"  head: first piece parsed by {first[3] - t0:.2f} s")


async def serve_and_upload(args, csv: Path, data: Path) -> None:
    import uvicorn

    from service.app import create_app
    from service.server import timed_protocol
    from service.settings import Settings

    settings = Settings(data_dir=str(data), workers=0, port=free_port())
    app = create_app(settings)
    sys.setswitchinterval(0.001)  # as `orchard serve`
    config = uvicorn.Config(app, host="127.0.0.1", port=settings.port, log_config=None, access_log=False,
                            http=timed_protocol(settings.header_timeout_s, settings.body_timeout_s))
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)
    url = f"http://127.0.0.1:{settings.port}/v1/datasets"
    cmd = ["curl", "-sS", "-f", "-o", "/dev/null", "-X", "POST", "-H", "content-type: text/csv", "-H", "Expect:",
           "-T", str(csv), url]
    for i in range(args.rounds + 1):
        cpu0, t0 = thread_cpu(), time.perf_counter()
        proc = await asyncio.create_subprocess_exec(*cmd)
        rc = await proc.wait()
        t_end = time.perf_counter()
        if rc:
            raise SystemExit(f"curl failed: {rc}")
        if i == 0:
            continue  # warm-up
        print(f"round {i}, load average {os.getloadavg()[0]:.2f}")
        report(t0, t_end, cpu0, thread_cpu(), args.verbose)
    server.should_exit = True
    await task


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="orchard-timeline-"))
    try:
        csv = tmp / "mixed.csv"
        size = make_csv(csv, args.mb)
        print(f"# bench/ingestion_timeline.py  CSV {size / 2**20:.1f} MiB, {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.2f}")
        instrument()
        asyncio.run(serve_and_upload(args, csv, tmp / "data"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
