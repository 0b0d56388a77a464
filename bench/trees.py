"""Benchmarks of the tree family against scikit-learn (ratios ours/sklearn, same run).

Usage: python bench/trees.py [--trees 100] [--n-jobs 1] [--procs 5]
       python bench/trees.py --memory tree|forest [--procs 5] [--trees 100] [--n-jobs 1]
       python bench/trees.py --case tree|forest ours|sklearn TREES N_JOBS   (one fresh process, JSON)

1. single-row predict_proba of a 100-tree random forest on breast_cancer;
2. fit of one decision tree and of a random forest on a 50,000 x 20 synthetic
   classification set (both libraries with default settings, random_state=0):
   wall time, CPU time (the machine is shared, so CPU time is the steadier
   figure) and peak memory, each fit in its own fresh process, ``--procs``
   processes per library run alternately (ours, sklearn, ours, ...), reported as
   median, min and max over the processes;
3. batch predict_proba of 100,000 rows with that forest: 3 calls in each fitting process (median and
   every call), and -- steadier on a shared machine -- both fitted forests reloaded into one process and
   called alternately (ours, sklearn, ours, ...; 7 pairs after one warm-up call each), reported as the
   median of the call-by-call ratios.

What one fitting process (``--case``) measures, in this order:

a. the same preparation in both libraries' processes: import numpy, scipy.special, scipy.stats,
   ``core`` (every algorithm), sklearn.tree and sklearn.ensemble; load the 50k set from disk
   (generated once, so generating it does not enter any figure); warm up with one fit of the
   measured estimator (same class and parameters) on the first 6,000 rows (above the 5,000 rows
   where our trees switch to binned split finding, so the same code paths run) and drop it;
   ``gc.collect()``; return the allocator's free memory to the kernel (glibc ``malloc_trim(0)``).
   First-call imports and lazily built caches are thus not charged to the fit, and the fit cannot
   hide behind freed heap left over by the imports or the warm-up (without the trim it reuses
   that heap without raising the resident figure, by an amount that depends on history: up to
   ~6 MiB here).  Only the measured library's estimator is warmed up, so one library's figure does
   not depend on the other's code;
b. peak extra RSS ("mem"): reset the kernel's resident-memory high-water mark (``/proc/self/clear_refs``
   5), read VmRSS, fit, read VmHWM; mem = VmHWM - VmRSS before.  Counts every page the fit touches,
   C allocations included (scikit-learn's Cython buffers), and what the allocator holds but does
   not reuse (fragmentation); it still varies by a few percent between processes (heap layout);
c. wall and CPU time of that same fit;
d. tracemalloc peak ("traced"): a second fit of a fresh estimator in the same process with tracemalloc
   on; traced = peak traced bytes during the fit - traced bytes before.  Deterministic (live bytes, not
   pages; independent of the allocator's state).  NumPy's array buffers are traced, so this is all of
   our fit's memory; for scikit-learn it misses buffers its Cython code allocates with malloc (for
   example the node array), so it is a lower bound there.  Skipped for forests unless ``--traced-forest``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)


DATA = os.path.join(os.environ.get("TMPDIR", "/tmp"), "orchard_bench_trees_50k.npz")


def _big():
    """The 50k x 20 set, generated once and loaded from disk (so that generating it does not raise the
    fresh process's peak-memory mark before the fit is measured)."""
    if not os.path.exists(DATA):
        from sklearn.datasets import make_classification

        X, y = make_classification(n_samples=50_000, n_features=20, n_informative=10, random_state=0)
        np.savez(DATA, X=X, y=y)
    d = np.load(DATA)
    return d["X"], d["y"]


def _make(kind, impl, trees, n_jobs):
    if impl == "ours":
        from core import registry

        if kind == "tree":
            return registry.get("decision_tree_classifier")(random_state=0)
        return registry.get("random_forest_classifier")(n_estimators=trees, random_state=0, n_jobs=n_jobs)
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.tree import DecisionTreeClassifier

    if kind == "tree":
        return DecisionTreeClassifier(random_state=0)
    return RandomForestClassifier(n_estimators=trees, random_state=0, n_jobs=n_jobs)


def _status_kib(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _reset_peak():
    """Reset the kernel's resident-memory high-water mark (Linux: clear_refs 5); True if it worked."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


WARMUP_ROWS = 6000


def _prepare(kind, impl, trees, n_jobs):
    """The same imports and data in every fitting process, and a warm-up fit (docstring, a)."""
    import gc

    import scipy.special  # noqa: F401
    import scipy.stats  # noqa: F401
    import sklearn.ensemble  # noqa: F401
    import sklearn.tree  # noqa: F401

    import core  # noqa: F401  (every algorithm)

    X, y = _big()
    _make(kind, impl, trees, n_jobs).fit(X[:WARMUP_ROWS], y[:WARMUP_ROWS])
    gc.collect()
    _trim_heap()
    return X, y


def _trim_heap():
    """Return the allocator's free memory to the kernel (glibc ``malloc_trim(0)``); True if it ran.

    Without it, the resident memory before the fit includes freed heap left by the imports and the
    warm-up, which the fit reuses without raising the resident figure (how much depends on history)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
        return True
    except (OSError, AttributeError):
        return False


def _traced_fit(est, X, y):
    """Peak traced bytes during ``est.fit`` above those traced before it, in MiB (docstring, d)."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        est.fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return (peak - before) / 2**20


def case(kind, impl, trees, n_jobs, traced=None):
    """Run in a fresh process: prepare, fit (and batch predict) once; print JSON figures."""
    X, y = _prepare(kind, impl, trees, n_jobs)
    est = _make(kind, impl, trees, n_jobs)
    hwm = _reset_peak()
    base = _status_kib("VmRSS") if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    w0, c0 = time.perf_counter(), time.process_time()
    est.fit(X, y)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    after = _status_kib("VmHWM") if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak = max(after - base, 1) / 1024.0
    out = {"wall": wall, "cpu": cpu, "mem": peak, "hwm_reset": hwm}
    if kind == "forest":
        Xp = np.concatenate([X, X])
        walls, cpus = [], []
        for _ in range(3):
            w0, c0 = time.perf_counter(), time.process_time()
            est.predict_proba(Xp)
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
        del Xp
        out["pwall"], out["pcpu"] = float(np.median(walls)), float(np.median(cpus))
        out["pwall_all"], out["pcpu_all"] = walls, cpus
        import pickle

        with open(_model_path(impl, trees, n_jobs), "wb") as fh:
            pickle.dump(est, fh, protocol=pickle.HIGHEST_PROTOCOL)
    if traced if traced is not None else kind == "tree":
        del est
        out["traced"] = _traced_fit(_make(kind, impl, trees, n_jobs), X, y)
    print(json.dumps(out))


def _model_path(impl, trees, n_jobs):
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), f"orchard_bench_trees_{impl}_{trees}_{n_jobs}.pkl")


def paired_predict(trees, n_jobs, pairs=7):
    """Both fitted forests in one process, predict_proba on the 100k rows called alternately."""
    import pickle

    X, _ = _big()
    Xp = np.concatenate([X, X])
    models = {}
    for impl in ("ours", "sklearn"):
        path = _model_path(impl, trees, n_jobs)
        with open(path, "rb") as fh:
            models[impl] = pickle.load(fh)
        os.remove(path)
        models[impl].predict_proba(Xp)  # warm-up (ours rebuilds its batch tables after unpickling)
    cpu = {"ours": [], "sklearn": []}
    wall = {"ours": [], "sklearn": []}
    for _ in range(pairs):
        for impl, m in models.items():
            w0, c0 = time.perf_counter(), time.process_time()
            m.predict_proba(Xp)
            wall[impl].append(time.perf_counter() - w0)
            cpu[impl].append(time.process_time() - c0)
    return cpu, wall


def run_case(kind, impl, trees, n_jobs, traced_forest=False):
    res = subprocess.run(
        [sys.executable, __file__, "--case", kind, impl, str(trees), str(n_jobs)]
        + (["--traced-forest"] if traced_forest else []),
        capture_output=True, text=True, check=True, cwd=ROOT,
    )
    return json.loads(res.stdout.strip().splitlines()[-1])


def run_cases(kind, trees, n_jobs, procs, traced_forest=False):
    """``procs`` fresh fitting processes per library, run alternately: {impl: [figures per process]}."""
    out = {"ours": [], "sklearn": []}
    for _ in range(procs):
        for impl in ("ours", "sklearn"):
            out[impl].append(run_case(kind, impl, trees, n_jobs, traced_forest))
    return out


def row(name, ours, theirs, unit):
    print(f"| {name} | {ours:.4g} {unit} | {theirs:.4g} {unit} | {ours / theirs:.2f} |", flush=True)


def spread_rows(name, res, key, unit):
    """One table row: median [min-max] over the processes per library, ratio of the medians."""
    o = [r[key] for r in res["ours"]]
    s = [r[key] for r in res["sklearn"]]
    mo, ms = float(np.median(o)), float(np.median(s))
    print(f"| {name} | {mo:.4g} [{min(o):.4g}-{max(o):.4g}] {unit} | {ms:.4g} [{min(s):.4g}-{max(s):.4g}] "
          f"{unit} | {mo / ms:.2f} |", flush=True)


def _load():
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def report_fits(kind, res, label):
    procs = len(res["ours"])
    print(f"| fit {label}, 50k x 20, {procs} processes each: median [min-max] | ours | scikit-learn | "
          f"ratio of medians |")
    print("|---|---|---|---|")
    spread_rows(f"fit {label} (wall)", res, "wall", "s")
    spread_rows(f"fit {label} (CPU)", res, "cpu", "s")
    spread_rows(f"fit {label} (peak extra RSS)", res, "mem", "MiB")
    if "traced" in res["ours"][0]:
        spread_rows(f"fit {label} (tracemalloc peak; sklearn: NumPy buffers only)", res, "traced", "MiB")
    fmt = lambda vals: ", ".join(f"{v:.2f}" for v in vals)  # noqa: E731
    for impl in ("ours", "sklearn"):
        print(f"\n{impl} per process: peak extra RSS MiB {fmt(r['mem'] for r in res[impl])}; CPU s "
              f"{fmt(r['cpu'] for r in res[impl])}"
              + (f"; traced MiB {fmt(r['traced'] for r in res[impl])}" if "traced" in res[impl][0] else ""))
    print(f"\nload average after: {_load()}\n", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--procs", type=int, default=5, help="fresh fitting processes per library")
    ap.add_argument("--case", nargs=4)
    ap.add_argument("--memory", choices=("tree", "forest"), help="only the fits of this kind")
    ap.add_argument("--traced-forest", action="store_true", help="tracemalloc figure for forests too")
    args = ap.parse_args()
    if args.case:
        kind, impl, trees, n_jobs = args.case
        case(kind, impl, int(trees), int(n_jobs), traced=True if args.traced_forest else None)
        return
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {_load()}\n")
    if args.memory:
        _big()
        label = "decision tree" if args.memory == "tree" else f"{args.trees}-tree RF (n_jobs={args.n_jobs})"
        res = run_cases(args.memory, args.trees, args.n_jobs, args.procs, args.traced_forest)
        report_fits(args.memory, res, label)
        return
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier as SkRF

    from core import registry

    print("| benchmark | ours | scikit-learn | ratio ours/sklearn |")
    print("|---|---|---|---|")
    X, y = load_breast_cancer(return_X_y=True)
    ours = registry.get("random_forest_classifier")(n_estimators=100, random_state=0).fit(X, y)
    sk = SkRF(n_estimators=100, random_state=0).fit(X, y)
    x1 = X[:1].copy()
    for label, clock in (("wall", time.perf_counter), ("CPU", time.process_time)):
        t = clock()
        for _ in range(500):
            ours.predict_proba(x1)
        t_o = (clock() - t) / 500
        t = clock()
        for _ in range(30):
            sk.predict_proba(x1)
        t_s = (clock() - t) / 30
        row(f"single-row predict_proba, 100-tree RF, breast_cancer ({label})", t_o * 1e3, t_s * 1e3, "ms")
    print()

    _big()
    for kind in ("tree", "forest"):
        res = run_cases(kind, args.trees, args.n_jobs, args.procs, args.traced_forest)
        label = "decision tree" if kind == "tree" else f"{args.trees}-tree RF (n_jobs={args.n_jobs})"
        report_fits(kind, res, label)
        if kind == "forest":
            o, s = res["ours"][-1], res["sklearn"][-1]  # the pickles are those of the last processes
            print("| batch predict_proba 100k rows | ours | scikit-learn | ratio ours/sklearn |")
            print("|---|---|---|---|")
            spread_rows(f"{label}, in the fitting processes (wall, median of 3 per process)", res, "pwall", "s")
            spread_rows(f"{label}, in the fitting processes (CPU, median of 3 per process)", res, "pcpu", "s")
            ratios = [a / b for a, b in zip(o["pcpu_all"], s["pcpu_all"], strict=True)]
            fmt = lambda vals, spec: ", ".join(format(v, spec) for v in vals)  # noqa: E731
            cpu, wall = paired_predict(args.trees, args.n_jobs)
            for name, d in (("CPU", cpu), ("wall", wall)):
                rs = [a / b for a, b in zip(d["ours"], d["sklearn"], strict=True)]
                row(f"{label}, one process, alternating ({name}, median)",
                    float(np.median(d["ours"])), float(np.median(d["sklearn"])), "s")
                print(f"|  | ratios call by call: {fmt(rs, '.2f')} (median {np.median(rs):.2f}) | | |")
            print(f"\nbatch predict CPU s per call in the last fitting processes: ours "
                  f"{fmt(o['pcpu_all'], '.3f')}; sklearn {fmt(s['pcpu_all'], '.3f')}; ratios "
                  f"{fmt(ratios, '.2f')}", flush=True)


if __name__ == "__main__":
    main()
