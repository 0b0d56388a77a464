"""Where a gradient boosting fit spends its time, against scikit-learn's whole fit in the same run.

    python bench/boosting_floor.py [--rounds 3]

Fits make_classification(50000, 20, n_informative=10) with max_iter=100, early_stopping=False (ours on
one process: n_jobs=1) with process-CPU timers around the parts of the fit, alternating with scikit-learn's
HistGradientBoostingClassifier (default threads and one thread). Per round it prints ours' CPU time split
into: the sparse histogram product (``csc_matvecs``, the compiled kernel), the row gathers feeding it,
the partitions of node rows, cumulative sums, split scoring, and the rest (per-node Python, losses,
binning, leaf updates); then the medians and each part against scikit-learn's whole fit (wall time
with its default threads, which collapses when the machine is loaded; CPU time on one thread).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sklearn.datasets import make_classification  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from core.ensemble._hist_gradient_boosting import grower as G  # noqa: E402
from core.ensemble._hist_gradient_boosting import histogram as T  # noqa: E402
from core.ensemble._hist_gradient_boosting import splitting as S  # noqa: E402
from core.ensemble.gradient_boosting_classifier import GradientBoostingClassifier  # noqa: E402

clock = time.process_time
acc: dict[str, float] = {}


def timed(name, fn):
    def run(*a, **k):
        t = clock()
        try:
            return fn(*a, **k)
        finally:
            acc[name] = acc.get(name, 0.0) + clock() - t
    return run


def instrument():
    T._csc_matvecs = timed("kernel", T._csc_matvecs)
    for name in ("accumulate", "root_part", "partition", "_partition_parts"):
        # (one process partitions a node's two row parts in one pass: _partition_parts)
        setattr(T.HistogramBuilder, name, timed(name.strip("_").replace("_parts", ""), getattr(T.HistogramBuilder, name)))
    G.cumsum_bins = timed("cumsum", G.cumsum_bins)
    S.SplitFinder.__call__ = timed("scoring", S.SplitFinder.__call__)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    X, y = make_classification(50_000, 20, n_informative=10, random_state=0)
    kw = dict(max_iter=100, early_stopping=False, random_state=0)
    instrument()
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC; load average before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    GradientBoostingClassifier(max_iter=3, early_stopping=False).fit(X, y)
    HistGradientBoostingClassifier(max_iter=3, early_stopping=False).fit(X, y)
    parts = ["kernel", "gathers", "partition", "cumsum", "scoring", "rest"]
    rows = []
    print("| round | ours total (CPU s) | " + " | ".join(parts)
          + " | sklearn default wall (cpu) | sklearn 1 thread wall (cpu) |")
    print("|---" * (len(parts) + 4) + "|")
    for r in range(args.rounds):
        acc.clear()
        t = clock()
        GradientBoostingClassifier(**kw).fit(X, y)
        total = clock() - t
        hist = acc["accumulate"] + acc["root_part"]
        p = {
            "kernel": acc["kernel"],
            "gathers": hist - acc["kernel"],
            "partition": acc["partition"],
            "cumsum": acc["cumsum"],
            "scoring": acc["scoring"],
        }
        p["rest"] = total - sum(p.values())
        t, c = time.perf_counter(), clock()
        HistGradientBoostingClassifier(**kw).fit(X, y)
        sk = (time.perf_counter() - t, clock() - c)
        with threadpool_limits(1):
            t, c = time.perf_counter(), clock()
            HistGradientBoostingClassifier(**kw).fit(X, y)
            sk1 = (time.perf_counter() - t, clock() - c)
        rows.append([total] + [p[k] for k in parts] + [sk[0], sk1[1]])
        print(f"| {r + 1} | {total:.3f} | " + " | ".join(f"{p[k]:.3f}" for k in parts)
              + f" | {sk[0]:.3f} ({sk[1]:.3f}) | {sk1[0]:.3f} ({sk1[1]:.3f}) |", flush=True)
    med = np.median(np.array(rows), axis=0)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print("| part (median) | ours CPU s | share of ours | / sklearn default wall | / sklearn 1 thread CPU |")
    print("|---|---|---|---|---|")
    for name, v in zip(["total"] + parts, med[:-2], strict=True):
        print(f"| {name} | {v:.3f} | {v / med[0]:.0%} | {v / med[-2]:.2f} | {v / med[-1]:.2f} |")
    print(f"| sklearn default (wall) | {med[-2]:.3f} | | | |")
    print(f"| sklearn 1 thread (CPU) | {med[-1]:.3f} | | | |")


if __name__ == "__main__":
    main()
