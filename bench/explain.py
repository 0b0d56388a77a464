"""TreeSHAP benchmark: Orchard's NumPy interventional TreeSHAP against shap's compiled TreeExplainer.

Usage: python bench/explain.py [--rows 1000] [--background 100] [--trees 100] [--depth 8] [--rounds 3]

A 20-feature regression set (4,000 rows; y depends on 4 features plus noise); an Orchard random forest and a
scikit-learn random forest with the same settings (``n_estimators``, ``max_depth``, ``max_features=1/3``,
``random_state=0``; equivalent, not identical, trees); background = the first ``--background`` rows;
explained = the next ``--rows`` rows.  ``shap.TreeExplainer(model, data=background,
feature_perturbation="interventional")``, ``check_additivity=False``.  Rounds alternate (ours, shap,
ours, shap, ...); medians are reported, and the ratio ours/shap of the medians.  Also: one row (median of
``--single`` calls, after one warm-up call that builds the per-model tables), and a check that both
explanations are additive.  Short by design (the machine is shared): about a minute at the defaults.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--background", type=int, default=100)
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--single", type=int, default=21)
    args = ap.parse_args()

    import shap
    from sklearn.ensemble import RandomForestRegressor as SkForest

    from core import registry
    from core.inspection._trees import tree_arrays
    from core.inspection.tree_shap import tree_shap

    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 20))
    y = X[:, 0] + X[:, 1] * X[:, 2] + np.sin(3 * X[:, 3]) + 0.1 * rng.normal(size=4000)
    kw = {"n_estimators": args.trees, "max_depth": args.depth, "max_features": 1 / 3, "random_state": 0}
    ours = registry.get("random_forest_regressor")(**kw).fit(X, y)
    sk = SkForest(**kw).fit(X, y)
    bg = X[: args.background]
    Xe = X[args.background : args.background + args.rows]
    arrays = tree_arrays(ours)
    explainer = shap.TreeExplainer(sk, data=bg, feature_perturbation="interventional")
    # warm-up: per-model tables (ours), numba/C setup (shap)
    tree_shap(arrays, Xe[:1], bg)
    explainer.shap_values(Xe[:1], check_additivity=False)

    t_ours, t_shap = [], []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        phi, base = tree_shap(arrays, Xe, bg)
        t_ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        sv = explainer.shap_values(Xe, check_additivity=False)
        t_shap.append(time.perf_counter() - t0)
    add_ours = float(np.abs(base[0] + phi[:, :, 0].sum(1) - ours.predict(Xe)).max())
    add_shap = float(np.abs(explainer.expected_value + np.asarray(sv).sum(1) - sk.predict(Xe)).max())

    s_ours, s_shap = [], []
    for i in range(args.single):
        x = Xe[i : i + 1]
        t0 = time.perf_counter()
        tree_shap(arrays, x, bg)
        s_ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        explainer.shap_values(x, check_additivity=False)
        s_shap.append(time.perf_counter() - t0)

    mo, ms = statistics.median(t_ours), statistics.median(t_shap)
    so, ss = statistics.median(s_ours), statistics.median(s_shap)
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs (shared); shap {shap.__version__}")
    print(f"forest: {args.trees} trees, max_depth {args.depth}, 20 features; background {args.background} rows")
    print(f"{args.rows} rows: ours {mo:.3f} s, shap {ms:.3f} s (medians of {args.rounds}; "
          f"ours {[round(t, 3) for t in t_ours]}, shap {[round(t, 3) for t in t_shap]}); ratio ours/shap {mo / ms:.2f}")
    print(f"one row: ours {so * 1e3:.1f} ms, shap {ss * 1e3:.1f} ms (medians of {args.single}); "
          f"ratio {so / ss:.2f}")
    print(f"additivity (max |base + sum phi - prediction|): ours {add_ours:.2e}, shap {add_shap:.2e}")


if __name__ == "__main__":
    main()
