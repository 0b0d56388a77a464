"""The figures behind gradient boosting's worker process (docs/decisions/gradient-boosting.md, "Two processes").

    python bench/boosting_workers.py [roundtrip] [threads] [order] [profile] [cow]     (default: all)

- roundtrip: fork cost, and a pipe round trip between two processes, both polling or both blocking.
- threads: two Python threads each splitting a node (partition + histogram + cumulative sum + scoring, one
  process's code) against one thread doing both, by node size: why the second core is a process.
- order: in the benchmark fit, how often the next split is a child of the split just made.
- profile: where a two-worker fit spends the fitting process's time, and how long the worker waits.
- cow: private memory of both processes when the parent runs gc.collect() during a fit beside a large
  Python heap, with the fit's gc.freeze() and without it.
The benchmark fit is make_classification(50000, 20, n_informative=10), max_iter=100, early_stopping=False.
"""

from __future__ import annotations

import gc
import inspect
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sklearn.datasets import make_classification  # noqa: E402

from core.context import FitContext  # noqa: E402
from core.ensemble._hist_gradient_boosting import gradient_boosting as H  # noqa: E402
from core.ensemble._hist_gradient_boosting import histogram as T  # noqa: E402
from core.ensemble._hist_gradient_boosting import splitting as S  # noqa: E402
from core.ensemble._hist_gradient_boosting import worker as W  # noqa: E402
from core.ensemble._hist_gradient_boosting.binning import BinMapper  # noqa: E402
from core.ensemble.gradient_boosting_classifier import GradientBoostingClassifier  # noqa: E402

KW = dict(max_iter=100, early_stopping=False, random_state=0)


def data():
    return make_classification(50_000, 20, n_informative=10, random_state=0)


def roundtrip():
    times = []
    for _ in range(5):
        t = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        times.append(time.perf_counter() - t)
    print(f"fork + exit + wait: median {np.median(times) * 1e3:.2f} ms")
    for polling in (True, False):
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(w1)
            os.set_blocking(r1, not polling)
            while True:
                try:
                    m = os.read(r1, 8)
                except BlockingIOError:
                    continue
                if not m:
                    os._exit(0)
                os.write(w2, m)
        os.close(r1)
        os.set_blocking(r2, not polling)
        n = 3000
        t = time.perf_counter()
        for _ in range(n):
            os.write(w1, b"x")
            while True:
                try:
                    os.read(r2, 8)
                    break
                except BlockingIOError:
                    continue
        dt = (time.perf_counter() - t) / n
        os.close(w1)
        os.waitpid(pid, 0)
        os.close(r2)
        os.close(w2)
        print(f"pipe round trip, both processes {'polling' if polling else 'blocked in read'}: "
              f"{dt * 1e6:.1f} us")


def threads():
    rng = np.random.default_rng(0)
    n, F = 50_000, 20
    XbT = rng.integers(0, 255, size=(F, n)).astype(np.uint8)
    builders = [T.HistogramBuilder(XbT, 256, False, 1) for _ in range(2)]
    for hb in builders:
        hb.g[0] = rng.normal(size=n)
        hb.h[0] = rng.random(n)
    finders = [S.SplitFinder(F, 256, None, 0.0, 20, False, False) for _ in range(2)]
    bufs = [np.empty((2, 3, F, 256)) for _ in range(2)]
    parent = np.cumsum(rng.random((3, F, 256)), axis=-1)
    nodes = {}
    for m in (200, 1000, 3000, 8000, 20000):
        rows = np.sort(rng.choice(n, m, replace=False))
        half = np.searchsorted(rows, n // 2)
        n_left = int((XbT[3, rows] <= 100).sum())
        nodes[m] = ((rows[:half], rows[half:], rows), n_left)

    def work(i, m):
        parts, n_left = nodes[m]
        _, _, hist = builders[i].split(parts, (0, 1, 2), 3, 100, False, None, n_left, 0, out=bufs[i][1])
        S.cumsum_bins(hist, out=bufs[i][0])
        np.subtract(parent, bufs[i][0], out=bufs[i][1])
        with np.errstate(divide="ignore", invalid="ignore"):  # as grow_tree
            finders[i](bufs[i], [1.0, 2.0], [100.0, 200.0], [float(n_left), float(m - n_left)])

    pool = ThreadPoolExecutor(1)
    print("| node rows (each) | one thread, both nodes (us) | two threads, one node each (us) | speed-up |")
    print("|---|---|---|---|")
    for m in nodes:
        reps = 300
        work(0, m), work(1, m)
        t = time.perf_counter()
        for _ in range(reps):
            work(0, m)
            work(1, m)
        one = (time.perf_counter() - t) / reps
        t = time.perf_counter()
        for _ in range(reps):
            job = pool.submit(work, 1, m)
            work(0, m)
            job.result()
        two = (time.perf_counter() - t) / reps
        print(f"| {m} | {one * 1e6:.0f} | {two * 1e6:.0f} | {one / two:.2f} |")
    pool.shutdown()


def order():
    X, y = data()
    m = GradientBoostingClassifier(**KW, n_jobs=1).fit(X, y)
    E = m._ensemble
    child_next = total = 0
    for a, b in E.tree_slices:
        left, right = E.left[a:b] - a, E.right[a:b] - a
        internal = np.flatnonzero(E.is_internal[a:b])
        split_order = sorted(internal, key=lambda i: left[i])  # children get ids in the order of the splits
        parent = {}
        for i in internal:
            parent[left[i]] = parent[right[i]] = i
        for s in range(1, len(split_order)):
            total += 1
            child_next += parent.get(split_order[s]) == split_order[s - 1]
    print(f"next split is a child of the split just made: {child_next} of {total} ({child_next / total:.2f})")


def profile():
    X, y = data()
    main = os.getpid()
    acc: dict = {}
    patched = []

    def timed(owner, name, key):
        fn = getattr(owner, name)

        def run(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                who = "fitting process" if os.getpid() == main else "worker"
                acc[(who, key)] = acc.get((who, key), 0.0) + time.perf_counter() - t
        static = isinstance(inspect.getattr_static(owner, name), staticmethod)
        setattr(owner, name, staticmethod(run) if static else run)
        patched.append((owner, name, staticmethod(fn) if static else fn))

    timed(T.HistogramBuilder, "split", "split (its row part, waiting included)")
    timed(T.HistogramBuilder, "root_hist", "root histograms")
    timed(W.RowWorker, "wait", "waiting for the worker")
    timed(T, "_cumsum_bins", "cumulative sums")
    timed(S.SplitFinder, "__call__", "scoring")
    timed(W, "_recv", "waiting for a command")
    timed(BinMapper, "fit_transform_T", "binning")
    timed(T.HistogramBuilder, "gradients", "gradients (its row part, waiting included)")
    timed(T.HistogramBuilder, "add_leaf_values", "leaf values into the raw predictions (its row part, waiting included)")
    timed(H.TreeGrower, "grow", "growing trees (splits, cumulative sums, scoring, root histograms and the rest)")
    out = f"/tmp/boosting_workers_{main}.txt"
    real_exit = os._exit

    def reporting_exit(code):
        if os.getpid() != main:
            with open(out, "w") as f:
                f.write(repr(acc))
        real_exit(code)

    os._exit = reporting_exit
    try:
        GradientBoostingClassifier(max_iter=5, early_stopping=False, n_jobs=2).fit(X, y)  # warm-up
        acc.clear()
        t = time.perf_counter()
        GradientBoostingClassifier(**KW, n_jobs=2).fit(X, y)
        total = time.perf_counter() - t
    finally:
        os._exit = real_exit
        for owner, name, fn in reversed(patched):
            setattr(owner, name, fn)
    with open(out) as f:
        worker = eval(f.read())  # noqa: S307 - our own repr of a dict of floats
    os.unlink(out)
    print(f"two-worker fit: {total:.3f} s wall (instrumented)")
    for (who, key), v in sorted(acc.items()):
        if key != "waiting for a command":  # (in the fitting process, _recv is inside "waiting for the worker")
            print(f"  {who}: {key} {v:.3f} s")
    waiting = worker.get(("worker", "waiting for a command"), 0.0)
    print(f"  worker: waiting for a command {waiting:.3f} s ({waiting / total:.0%} of the fit)")


def _memory(pid):
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            key, *value = line.split()
            if key in ("Private_Dirty:", "Pss:"):
                out[key[:-1]] = int(value[0]) // 1024
    return out


def cow():
    X = np.random.default_rng(0).normal(size=(10_000, 5))
    y = (X[:, 0] > 0).astype(int)
    heap = [{"a": i, "b": [i]} for i in range(2_000_000)]  # a server's Python heap, ~500 MB  # noqa: F841
    pids = []
    init = W.RowWorker.__init__

    def recording_init(self, hb):
        init(self, hb)
        pids.append(self.pid)

    def collect_at_2(fraction, metrics):
        if metrics.get("iteration") == 2:
            gc.collect()
        if metrics.get("iteration") == 4:
            seen.append((_memory(pids[-1]), _memory(os.getpid())))

    W.RowWorker.__init__ = recording_init
    saved = gc.freeze, gc.unfreeze
    try:
        for freeze in (True, False):
            if not freeze:
                gc.freeze = gc.unfreeze = lambda: None
            seen = []
            GradientBoostingClassifier(max_iter=25, early_stopping=False, n_jobs=2).fit(
                X, y, ctx=FitContext(on_progress=collect_at_2, min_interval=0.0))
            worker, parent = seen[0]
            print(f"gc.collect() mid-fit, {'with' if freeze else 'without'} gc.freeze(): private dirty MiB "
                  f"worker {worker['Private_Dirty']}, parent {parent['Private_Dirty']} "
                  f"(PSS {worker['Pss']} / {parent['Pss']})")
    finally:
        gc.freeze, gc.unfreeze = saved
        W.RowWorker.__init__ = init


def main():
    parts = sys.argv[1:] or ["roundtrip", "threads", "order", "profile", "cow"]
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; threads alive {threading.active_count()}")
    for part in parts:
        print(f"\n## {part}")
        globals()[part]()


if __name__ == "__main__":
    main()
