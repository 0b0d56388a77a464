"""Benchmarks of the tree family against scikit-learn (ratios ours/sklearn, same run).

Usage: python bench/trees.py [--trees 100] [--n-jobs 1]

1. single-row predict_proba of a 100-tree random forest on breast_cancer;
2. fit of one decision tree and of a random forest on a 50,000 x 20 synthetic
   classification set: wall time, CPU time (the machine is shared, so CPU time
   is the steadier figure) and peak memory (peak resident memory of a fresh
   process during the fit minus its resident memory just before, with the
   kernel's high-water mark reset first; counts C allocations too, unlike
   tracemalloc, which does not see scikit-learn's Cython buffers);
3. batch predict_proba of 100,000 rows with that forest: 3 calls in each fitting process (median and
   every call), and -- steadier on a shared machine -- both fitted forests reloaded into one process and
   called alternately (ours, sklearn, ours, ...; 7 pairs after one warm-up call each), reported as the
   median of the call-by-call ratios.
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


def case(kind, impl, trees, n_jobs):
    """Run in a fresh process: fit (and batch predict) once; print JSON figures."""
    X, y = _big()
    est = _make(kind, impl, trees, n_jobs)
    if impl == "sklearn":  # import the fitting modules before the baseline, as for ours
        import sklearn.ensemble  # noqa: F401
        import sklearn.tree  # noqa: F401
    hwm = _reset_peak()
    base = _status_kib("VmRSS") if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    w0, c0 = time.perf_counter(), time.process_time()
    est.fit(X, y)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    after = _status_kib("VmHWM") if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak = max(after - base, 1) / 1024.0
    out = {"wall": wall, "cpu": cpu, "mem": peak}
    if kind == "forest":
        Xp = np.concatenate([X, X])
        walls, cpus = [], []
        for _ in range(3):
            w0, c0 = time.perf_counter(), time.process_time()
            est.predict_proba(Xp)
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
        out["pwall"], out["pcpu"] = float(np.median(walls)), float(np.median(cpus))
        out["pwall_all"], out["pcpu_all"] = walls, cpus
        import pickle

        with open(_model_path(impl, trees, n_jobs), "wb") as fh:
            pickle.dump(est, fh, protocol=pickle.HIGHEST_PROTOCOL)
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


def run_case(kind, impl, trees, n_jobs):
    res = subprocess.run(
        [sys.executable, __file__, "--case", kind, impl, str(trees), str(n_jobs)],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )
    return json.loads(res.stdout.strip().splitlines()[-1])


def row(name, ours, theirs, unit):
    print(f"| {name} | {ours:.4g} {unit} | {theirs:.4g} {unit} | {ours / theirs:.2f} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--case", nargs=4)
    args = ap.parse_args()
    if args.case:
        kind, impl, trees, n_jobs = args.case
        case(kind, impl, int(trees), int(n_jobs))
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

    _big()
    for kind in ("tree", "forest"):
        o = run_case(kind, "ours", args.trees, args.n_jobs)
        s = run_case(kind, "sklearn", args.trees, args.n_jobs)
        label = "decision tree" if kind == "tree" else f"{args.trees}-tree RF (n_jobs={args.n_jobs})"
        row(f"fit {label}, 50k x 20 (wall)", o["wall"], s["wall"], "s")
        row(f"fit {label}, 50k x 20 (CPU)", o["cpu"], s["cpu"], "s")
        row(f"fit {label}, 50k x 20 (peak extra RSS)", o["mem"], s["mem"], "MiB")
        if kind == "forest":
            row(f"batch predict_proba 100k rows, {label} (wall, median of 3)", o["pwall"], s["pwall"], "s")
            row(f"batch predict_proba 100k rows, {label} (CPU, median of 3)", o["pcpu"], s["pcpu"], "s")
            ratios = [a / b for a, b in zip(o["pcpu_all"], s["pcpu_all"], strict=True)]
            fmt = lambda vals, spec: ", ".join(format(v, spec) for v in vals)  # noqa: E731
            cpu, wall = paired_predict(args.trees, args.n_jobs)
            for name, d in (("CPU", cpu), ("wall", wall)):
                rs = [a / b for a, b in zip(d["ours"], d["sklearn"], strict=True)]
                row(f"batch predict_proba 100k rows, {label}, one process, alternating ({name}, median)",
                    float(np.median(d["ours"])), float(np.median(d["sklearn"])), "s")
                print(f"|  | ratios call by call: {fmt(rs, '.2f')} (median {np.median(rs):.2f}) | | |")
            print(f"\nbatch predict CPU s per call in the fitting processes: ours {fmt(o['pcpu_all'], '.3f')}; "
                  f"sklearn {fmt(s['pcpu_all'], '.3f')}; ratios {fmt(ratios, '.2f')}", flush=True)


if __name__ == "__main__":
    main()
