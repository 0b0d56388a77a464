"""Benchmarks of the tree family against scikit-learn (ratios ours/sklearn, same run).

Usage: python bench/trees.py [--quick]

1. single-row predict_proba of a 100-tree random forest on breast_cancer;
2. fit of one decision tree and of a 100-tree random forest on a 50,000 x 20
   synthetic classification set (peak memory via tracemalloc);
3. batch predict_proba of 100,000 rows with that forest.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from sklearn.datasets import load_breast_cancer, make_classification  # noqa: E402
from sklearn.ensemble import RandomForestClassifier as SkRF  # noqa: E402
from sklearn.tree import DecisionTreeClassifier as SkTree  # noqa: E402

from core import registry  # noqa: E402


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def peak_mem(fn):
    tracemalloc.start()
    t = time.perf_counter()
    fn()
    dt = time.perf_counter() - t
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return dt, peak / 2**20


def row(name, ours, theirs, unit):
    print(f"| {name} | {ours:.4g} {unit} | {theirs:.4g} {unit} | {ours / theirs:.2f} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="20 trees instead of 100 for the big fit")
    ap.add_argument("--n-jobs", type=int, default=1)
    args = ap.parse_args()
    RF = registry.get("random_forest_classifier")
    Tree = registry.get("decision_tree_classifier")
    print("| benchmark | ours | scikit-learn | ratio ours/sklearn |")
    print("|---|---|---|---|")

    # 1. single-row predict_proba, 100 trees, breast_cancer
    X, y = load_breast_cancer(return_X_y=True)
    ours = RF(n_estimators=100, random_state=0).fit(X, y)
    sk = SkRF(n_estimators=100, random_state=0).fit(X, y)
    x1 = X[:1].copy()
    n_rep = 200
    t_o = best_of(lambda: [ours.predict_proba(x1) for _ in range(n_rep)]) / n_rep
    t_s = best_of(lambda: [sk.predict_proba(x1) for _ in range(20)]) / 20
    row("single-row predict_proba, 100-tree RF, breast_cancer", t_o * 1e3, t_s * 1e3, "ms")

    # 2. fits on 50,000 x 20
    Xb, yb = make_classification(n_samples=50_000, n_features=20, n_informative=10, random_state=0)
    t_o, m_o = peak_mem(lambda: Tree(random_state=0).fit(Xb, yb))
    t_s, m_s = peak_mem(lambda: SkTree(random_state=0).fit(Xb, yb))
    row("fit decision tree, 50k x 20 (time)", t_o, t_s, "s")
    row("fit decision tree, 50k x 20 (peak memory)", m_o, m_s, "MiB")
    n_trees = 20 if args.quick else 100
    holder = {}
    t_o, m_o = peak_mem(
        lambda: holder.setdefault("o", RF(n_estimators=n_trees, random_state=0, n_jobs=args.n_jobs).fit(Xb, yb))
    )
    t_s, m_s = peak_mem(
        lambda: holder.setdefault("s", SkRF(n_estimators=n_trees, random_state=0, n_jobs=args.n_jobs).fit(Xb, yb))
    )
    row(f"fit {n_trees}-tree RF, 50k x 20, n_jobs={args.n_jobs} (time)", t_o, t_s, "s")
    row(f"fit {n_trees}-tree RF, 50k x 20, n_jobs={args.n_jobs} (peak memory)", m_o, m_s, "MiB")

    # 3. batch predict of 100,000 rows
    Xp = np.concatenate([Xb, Xb])
    t_o = best_of(lambda: holder["o"].predict_proba(Xp), repeat=1)
    t_s = best_of(lambda: holder["s"].predict_proba(Xp), repeat=1)
    row(f"batch predict_proba 100k rows, {n_trees}-tree RF", t_o, t_s, "s")


if __name__ == "__main__":
    main()
