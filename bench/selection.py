"""Model selection: a 5-fold grid of 20 random-forest candidates over REST against scikit-learn's
``GridSearchCV(n_jobs=2)`` on the same rows and fold indices (ratios ours / sklearn, same run).

Usage: python bench/selection.py [--rounds 3] [--rows 10000] [--trees 5 10]

* Data: ``make_classification(rows, 20 features, 10 informative, random_state=0)`` uploaded once as CSV.
* Grid: ``max_depth`` [4, 6, 8, 12, None] x ``max_features`` ["sqrt", 0.5] x ``n_estimators`` (two values)
  = 20 candidates, 5 folds (the folds Orchard draws: ``make_folds(y, ..., seed=0)``, handed to sklearn as
  ``cv=``), best candidate refitted on all rows in both.
* Orchard: an app with the embedded pool of 2 worker processes (``ORCHARD_WORKERS=2``; the API runs in this
  process, the workers in the pool's forkserver children); wall time = ``POST /v1/tune`` until the job is
  terminal (polled every 100 ms). "first trial running" = the earliest ``started_at`` of the tune's trials
  minus the tune's ``created_at`` (both stamped by the database's writers on this machine's clock).
* scikit-learn: ``GridSearchCV(RandomForestClassifier(random_state=0), grid, cv=folds, n_jobs=2)`` (loky
  processes kept warm across rounds, as Orchard's pool is); wall time of ``fit``.
* Rounds are interleaved (sklearn, ours, ours, sklearn, ...); the figure is the median of the per-round
  ratios. BLAS is one thread per process on both sides. The machine is shared: keep runs short.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--trees", type=int, nargs=2, default=[5, 10])
    args = ap.parse_args()

    import numpy as np
    from fastapi.testclient import TestClient
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import GridSearchCV

    from service.app import create_app
    from service.services.selection import make_folds
    from service.settings import Settings

    X, y = make_classification(args.rows, 20, n_informative=10, random_state=0)
    names = [f"x{j}" for j in range(20)]
    text = ",".join([*names, "y"]) + "\n" + "\n".join(
        ",".join(f"{v:.6g}" for v in row) + f",c{t}" for row, t in zip(X, y, strict=True)) + "\n"
    folds = make_folds(np.asarray([f"c{t}" for t in y], dtype=object), "classification", 5, True, 0)
    depths, feats, trees = [4, 6, 8, 12, None], ["sqrt", 0.5], list(args.trees)
    space = {"max_depth": depths, "max_features": feats, "n_estimators": trees}

    def run_sklearn() -> float:
        gs = GridSearchCV(RandomForestClassifier(random_state=0), space, cv=folds, n_jobs=2)
        t0 = time.perf_counter()
        gs.fit(X, y)
        return time.perf_counter() - t0

    settings = Settings(data_dir=Path(tempfile.mkdtemp()) / "d", workers=2, secret_key="bench", allowed_hosts="*",
                        access_log=False, log_level="warning")
    with TestClient(create_app(settings)) as c:
        q = c.app.state.runtime.queue
        while not all(slot.ready for slot in q._slots):
            time.sleep(0.05)
        ds = c.post("/v1/datasets", content=text.encode(), headers={"content-type": "text/csv"}).json()["id"]
        meta = c.app.state.runtime.meta

        def run_ours() -> tuple[float, float]:
            t0 = time.perf_counter()
            r = c.post("/v1/tune", json={"algorithm": "random_forest_classifier", "params": {"random_state": 0},
                                         "search": "grid", "space": space, "dataset_id": ds, "target": "y",
                                         "folds": 5, "random_state": 0})
            job_id = r.json()["job"]["id"]
            while c.get(f"/v1/jobs/{job_id}").json()["status"] not in ("succeeded", "failed", "cancelled"):
                time.sleep(0.1)  # polling costs CPU on the same two cores; 0.1 s is < 0.1% of a run
            wall = time.perf_counter() - t0
            job = meta.get_job(job_id)
            assert job["status"] == "succeeded", job
            from sqlalchemy import select

            from service.storage.metadata import jobs

            with meta.engine.connect() as conn:
                rows = conn.execute(select(jobs.c.payload, jobs.c.started_at, jobs.c.finished_at, jobs.c.worker,
                                           jobs.c.result).where(jobs.c.kind == "trial")).all()
            rows = [r for r in rows if r.payload["parent_id"] == job_id]
            first = (min(r.started_at for r in rows).replace(tzinfo=job["created_at"].tzinfo)
                     - job["created_at"]).total_seconds()
            breakdowns.append(breakdown(job, rows, wall))
            return wall, first

        # warm the loky pool and imports (small data), as Orchard's pool is warm
        GridSearchCV(RandomForestClassifier(n_estimators=2), {"max_depth": [2, 3]}, cv=2, n_jobs=2).fit(X[:200], y[:200])
        rows = []
        breakdowns: list[dict] = []
        for r in range(args.rounds):
            if r % 2 == 0:
                s = run_sklearn()
                o, first = run_ours()
            else:
                o, first = run_ours()
                s = run_sklearn()
            rows.append((o, s, first))
            print(f"round {r}: ours {o:.2f} s, sklearn {s:.2f} s, ratio {o / s:.3f}, "
                  f"first trial running {first * 1000:.0f} ms", flush=True)
    ratios = [o / s for o, s, _ in rows]
    print(f"median ratio ours/sklearn GridSearchCV(n_jobs=2): {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}); median ours {statistics.median(o for o, _, _ in rows):.2f} s, "
          f"sklearn {statistics.median(s for _, s, _ in rows):.2f} s; "
          f"first trial running: median {statistics.median(f for _, _, f in rows) * 1000:.0f} ms, "
          f"max {max(f for _, _, f in rows) * 1000:.0f} ms")
    print("\nwhere the wall time of ours goes (seconds, median over rounds; worker-seconds summed over the 100 "
          "trials of the two workers, divided by 2 where marked /2):")
    for key in breakdowns[0]:
        print(f"  {key:58s} {statistics.median(b[key] for b in breakdowns):8.2f}")


def breakdown(job: dict, trials, wall: float) -> dict:
    """Wall time of one tune split into: queueing, the trial phase (fit / preprocessing / scoring / trial setup /
    job bookkeeping / idle workers) and the refit, from the job rows and the trials' own timings."""
    def ts(d):
        return d.replace(tzinfo=None).timestamp()

    t_created, t_started, t_finished = ts(job["created_at"]), ts(job["started_at"]), ts(job["finished_at"])
    first = min(ts(r.started_at) for r in trials)
    last = max(ts(r.finished_at) for r in trials)
    span = last - first
    tot = {"setup": 0.0, "preprocess": 0.0, "estimator": 0.0, "score": 0.0}
    inner = 0.0
    busy = 0.0
    by_worker: dict[str, list] = {}
    for r in trials:
        res = r.result
        for k in tot:
            tot[k] += res["timings"][k]
        inner += res["finished"] - res["started"]
        busy += ts(r.finished_at) - ts(r.started_at)
        by_worker.setdefault(r.worker, []).append((ts(r.started_at), ts(r.finished_at)))
    idle_tail = sum(last - max(e for _, e in v) for v in by_worker.values())
    def gap(v):
        return sum(max(0.0, b[0] - a[1]) for a, b in zip(sorted(v)[:-1], sorted(v)[1:], strict=True))

    gaps = sum(gap(v) for v in by_worker.values())
    gaps_parent = gap(by_worker.get(job["worker"], []))
    head = sum(min(s for s, _ in v) - first for v in by_worker.values())
    n_workers = max(2, len(by_worker))
    return {
        "wall (submit -> terminal, bench clock)": wall,
        "queue: submit -> parent running": t_started - t_created,
        "parent running -> first trial running": first - t_started,
        "trial phase: first trial running -> last trial finished": span,
        "  estimator fits /2": tot["estimator"] / n_workers,
        "  preprocessing fits (per fold) /2": tot["preprocess"] / n_workers,
        "  scoring the test folds /2": tot["score"] / n_workers,
        "  trial setup (data, folds, params) /2": tot["setup"] / n_workers,
        "  job bookkeeping (claim, lease, result write) /2": (busy - inner) / n_workers,
        "  other in-trial time /2": (inner - sum(tot.values())) / n_workers,
        "  workers idle between trials /2": gaps / n_workers,
        "    of which the parent's worker /2": gaps_parent / n_workers,
        "  workers idle at the start + end of the phase /2": (idle_tail + head) / n_workers,
        "refit + save: last trial finished -> tune finished": t_finished - last,
        "finished -> seen by the client poll": wall - (t_finished - t_created),
        "trials run by the parent itself": sum(1 for r in trials if r.worker == job["worker"]),
    }


if __name__ == "__main__":
    main()
