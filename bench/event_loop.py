"""Does the event loop stall? `/health/live` latency while a real `orchard serve` loads a 150 MB cold model and
while it predicts 100,000 rows (docs/decisions/model-cache.md; the target is 50 ms at the 99th percentile).

Usage: python bench/event_loop.py [--rounds 3]
Each round starts a server on a fresh data directory, trains two small kNN regressors, re-signs one with 150 MB
of ballast, then probes `/health/live` every 10 ms during (1) the first predict on the big model (a cold load)
and (2) a 100,000-row predict on the other. Prints p50/p99/max per phase and round. The same scenario, with a
looser bound for a busy CI machine, is `tests/integration/test_event_loop.py`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BALLAST_BYTES = 150 * 1024 * 1024


class Prober(threading.Thread):
    """GET /health/live every 10 ms, recording (sent at, latency)."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.client = httpx.Client(base_url=url, timeout=30)
        self.samples: list[tuple[float, float]] = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            t0 = time.monotonic()
            assert self.client.get("/health/live").status_code == 200
            self.samples.append((t0, time.monotonic() - t0))
            time.sleep(0.01)

    def during(self, start: float, end: float) -> list[float]:
        return [lat for t0, lat in self.samples if start <= t0 and t0 + lat <= end]


def scenario(data: Path) -> dict:
    """One round; returns {"cold load": (seconds, [probe latencies]), "100,000-row predict": (...)}."""
    from service.storage.artifacts import ArtifactStore
    from tests.integration.test_serve_subprocess import Server, _free_port, _wait

    server = Server(data, _free_port()).start()
    rng = np.random.default_rng(0)
    try:
        c = httpx.Client(base_url=server.url, timeout=120)
        X = rng.normal(size=(3000, 8))
        y = X @ rng.normal(size=8)
        body = {"columns": [f"x{i}" for i in range(8)] + ["y"], "rows": np.column_stack([X, y]).tolist()}
        ds = c.post("/v1/datasets", json=body).json()["id"]
        mids = []
        for _ in range(2):
            r = c.post("/v1/train", json={"algorithm": "knn_regressor", "dataset_id": ds, "target": "y"})
            assert r.status_code == 202, r.text
            assert _wait(c, r.json()["job"]["id"])["status"] == "succeeded"
            mids.append(r.json()["model_id"])
        small, big = mids
        # the big model: the same bundle carrying 150 MB more, re-signed with the server's key (never loaded yet)
        art = ArtifactStore(data, (data / "secret.key").read_bytes().strip())
        bundle = art.load_bundle(big)
        bundle.extra["ballast"] = rng.random(BALLAST_BYTES // 8)
        art.save_bundle(big, bundle)
        prober = Prober(server.url)
        prober.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        assert c.post(f"/v1/models/{big}/predict", json={"rows": [X[0].tolist()]}).status_code == 200
        t1 = time.monotonic()
        rows = {"rows": rng.normal(size=(100_000, 8)).tolist()}
        t2 = time.monotonic()
        r = c.post(f"/v1/models/{small}/predict", json=rows)
        t3 = time.monotonic()
        assert r.status_code == 200 and len(r.json()["predictions"]) == 100_000
        time.sleep(0.1)
        prober.stop.set()
        prober.join(30)
        c.close()
    finally:
        server.stop()
    return {"cold load": (t1 - t0, prober.during(t0, t1)), "100,000-row predict": (t3 - t2, prober.during(t2, t3))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"# bench/event_loop.py  {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}\n")
    print("| round | phase | phase s | probes | p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|---|---|")
    for i in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "data"
            data.mkdir()
            for phase, (secs, lat) in scenario(data).items():
                ms = np.asarray(lat) * 1000
                print(f"| {i} | {phase} | {secs:.2f} | {len(lat)} | {np.percentile(ms, 50):.1f} | "
                      f"{np.percentile(ms, 99):.1f} | {ms.max():.1f} |", flush=True)


if __name__ == "__main__":
    main()
