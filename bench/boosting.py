"""Benchmark: histogram gradient boosting vs scikit-learn's HistGradientBoostingClassifier.

    python bench/boosting.py [--n 50000] [--features 20] [--max-iter 100] [--repeat 1] [--rounds 3]

Prints the load average, then ``--rounds`` interleaved rounds of fit timings (wall
and CPU time) for ours (default workers: two processes on a machine with two CPUs and
``n_jobs=2``; and one worker, ``n_jobs=1``) and scikit-learn (default OpenMP
threads; and one thread via threadpoolctl), with the ratios of each round; then a markdown
table of fit time (median over rounds), fit peak memory (tracemalloc: NumPy buffers are
traced; ours adds the worker process's own traced peak and the shared mapping, which
tracemalloc does not see), batch predict of 100,000 rows and single-row predict latency.
CPU times include reaped child processes (our worker).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sklearn.datasets import make_classification  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from core.ensemble._hist_gradient_boosting import histogram as _histogram  # noqa: E402
from core.ensemble._hist_gradient_boosting.histogram import max_workers  # noqa: E402
from core.ensemble.gradient_boosting_classifier import GradientBoostingClassifier  # noqa: E402


def timed(fn, repeat):
    best = np.inf
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def cpu_time():
    """CPU seconds of this process and of its reaped children (a fit's worker process is reaped by the fit)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def timed_cpu(fn, repeat):
    """Best of ``repeat``: (wall, CPU time of that run including reaped children, result)."""
    best = (np.inf, np.inf)
    out = None
    for _ in range(repeat):
        t, c = time.perf_counter(), cpu_time()
        out = fn()
        run = (time.perf_counter() - t, cpu_time() - c)
        best = min(best, run)
    return best[0], best[1], out


N_JOBS = 2  # ours by default: two processes (at most the CPUs)


def with_workers(fn, n_workers):
    def run():
        global N_JOBS
        saved = N_JOBS
        N_JOBS = n_workers
        try:
            return fn()
        finally:
            N_JOBS = saved
    return run


def peak_memory(fn):
    """MiB: tracemalloc's peak during ``fn``, plus (ours) the worker process's traced peak and the shared
    mapping of each histogram builder used (not seen by tracemalloc)."""
    extra = []
    exit_ = _histogram.HistogramBuilder.__exit__

    def counting_exit(self, *exc):
        exit_(self, *exc)
        if self.shared is not None:
            extra.append(self.worker_peak_traced + self.shared.nbytes)

    _histogram.HistogramBuilder.__exit__ = counting_exit
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        fn()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        _histogram.HistogramBuilder.__exit__ = exit_
    return (peak + sum(extra)) / 2**20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--features", type=int, default=20)
    ap.add_argument("--max-iter", type=int, default=100)
    ap.add_argument("--predict-rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    X, y = make_classification(args.n, args.features, n_informative=10, random_state=0)
    Xp = np.tile(X, (int(np.ceil(args.predict_rows / args.n)), 1))[: args.predict_rows]
    kw = dict(max_iter=args.max_iter, early_stopping=False, random_state=0)

    def ours():
        return GradientBoostingClassifier(**kw, n_jobs=N_JOBS).fit(X, y)

    def sk():
        return HistGradientBoostingClassifier(**kw).fit(X, y)

    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC; "
          f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"ours n_jobs={N_JOBS} ({max_workers(N_JOBS)} processes)")
    ours(), sk()  # warm-up (imports, thread pools)
    print()
    print("| round | ours wall (cpu) | ours 1 worker wall (cpu) | sklearn default wall (cpu) "
          "| sklearn 1 thread wall (cpu) | ours / sklearn default | ours / sklearn 1 thread "
          "| ours 1 worker / sklearn 1 thread |")
    print("|---|---|---|---|---|---|---|---|")
    fits = []
    for r in range(args.rounds):
        a = timed_cpu(ours, args.repeat)
        a1 = timed_cpu(with_workers(ours, 1), args.repeat)
        b = timed_cpu(sk, args.repeat)
        with threadpool_limits(1):
            b1 = timed_cpu(sk, args.repeat)
        fits.append((a[0], a1[0], b[0], b1[0]))
        print(f"| {r + 1} | {a[0]:.3f} ({a[1]:.3f}) | {a1[0]:.3f} ({a1[1]:.3f}) | {b[0]:.3f} ({b[1]:.3f}) "
              f"| {b1[0]:.3f} ({b1[1]:.3f}) | {a[0] / b[0]:.2f} | {a[0] / b1[0]:.2f} | {a1[0] / b1[0]:.2f} |",
              flush=True)
        m_ours, m_sk, m_sk1 = a[2], b[2], b1[2]
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    t_ours, t_ours1, t_sk, t_sk1 = np.median(np.array(fits), axis=0)
    print(f"median fit: ours {t_ours:.3f} s, ours 1 worker {t_ours1:.3f} s, sklearn {t_sk:.3f} s, "
          f"sklearn 1 thread {t_sk1:.3f} s")
    print()
    rows = []
    rows.append(("fit time (s, median of rounds)", t_ours, t_sk, t_sk1))
    mem_ours = peak_memory(ours)
    with threadpool_limits(1):  # memory does not depend on threads; one thread avoids OpenMP spinning
        mem_sk = peak_memory(sk)
    rows.append(("fit peak traced memory (MiB)", mem_ours, mem_sk, float("nan")))
    # the first batch call also builds the leaf-bitmask tables (cached on the model)
    p_first, _ = timed(lambda: m_ours.predict_proba(Xp), 1)
    p_ours, pa = timed(lambda: m_ours.predict_proba(Xp), max(args.repeat, 2))
    p_sk, pb = timed(lambda: m_sk.predict_proba(Xp), max(args.repeat, 2))
    with threadpool_limits(1):
        p_sk1, _ = timed(lambda: m_sk1.predict_proba(Xp), max(args.repeat, 2))
    rows.append((f"predict_proba {args.predict_rows} rows (s)", p_ours, p_sk, p_sk1))
    rows.append((f"predict_proba {args.predict_rows} rows, ours first call (s)", p_first, p_sk, p_sk1))
    one = X[:1]
    s_ours, _ = timed(lambda: [m_ours.predict_proba(one) for _ in range(200)], 2)
    s_sk, _ = timed(lambda: [m_sk.predict_proba(one) for _ in range(200)], 2)
    rows.append(("predict_proba 1 row (ms)", s_ours / 200 * 1e3, s_sk / 200 * 1e3, float("nan")))
    acc_o = np.mean(m_ours.predict(X) == y)
    acc_s = np.mean(m_sk.predict(X) == y)

    print(f"data: make_classification({args.n}, {args.features}, n_informative=10); "
          f"max_iter={args.max_iter}, early_stopping=False, max_leaf_nodes=31, max_bins=255")
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")
    print(f"training accuracy: ours {acc_o:.4f}, sklearn {acc_s:.4f}")
    print()
    print("| measure | ours | sklearn (default threads) | sklearn (1 thread) "
          "| ratio ours/sklearn | ratio vs 1 thread |")
    print("|---|---|---|---|---|---|")
    for name, a, b, c in rows:
        r1 = a / b
        r2 = a / c if np.isfinite(c) else float("nan")
        print(f"| {name} | {a:.3f} | {b:.3f} | {c:.3f} | {r1:.2f} | {r2:.2f} |")


if __name__ == "__main__":
    main()
