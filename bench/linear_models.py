"""Benchmark of the linear family against scikit-learn (prints ratios ours/sklearn).

    python bench/linear_models.py            # full run
    python bench/linear_models.py --quick    # smaller problems
    python bench/linear_models.py --predict-only   # only the single-row predict table

1. Lasso and ElasticNet coordinate descent on a 20,000 x 200 design (target: <= 2x sklearn).
2. Logistic regression fits on breast_cancer and digits (lbfgs and newton).
3. Single-row predict latency of every linear-family model (target: < 100 microseconds).

Timings are best-of-``repeat`` wall-clock; the machine is shared, so expect noise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import timeit

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from sklearn import linear_model as sk  # noqa: E402
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits  # noqa: E402
from sklearn.multiclass import OneVsOneClassifier  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from core import registry  # noqa: E402


def best_time(fn, repeat=3):
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench_cd(n, p, repeat):
    rows = []
    for design in ("iid", "correlated"):
        rows += _bench_cd(n, p, repeat, design)
    return rows


def _bench_cd(n, p, repeat, design):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, p))
    if design == "correlated":  # shared factor: pairwise correlation ~0.8, many more sweeps
        X = 0.5 * X + rng.normal(size=(n, 1))
    w = np.zeros(p)
    w[:20] = rng.normal(size=20) * 3
    y = X @ w + rng.normal(size=n)
    rows = []
    for name, ours, ref in (
        ("lasso alpha=0.1", registry.get("lasso_regression")(alpha=0.1), sk.Lasso(alpha=0.1)),
        ("lasso alpha=0.01", registry.get("lasso_regression")(alpha=0.01), sk.Lasso(alpha=0.01)),
        ("elastic_net alpha=0.1 l1=0.5", registry.get("elastic_net")(alpha=0.1, l1_ratio=0.5),
         sk.ElasticNet(alpha=0.1, l1_ratio=0.5)),
        ("elastic_net alpha=0.01 l1=0.7", registry.get("elastic_net")(alpha=0.01, l1_ratio=0.7),
         sk.ElasticNet(alpha=0.01, l1_ratio=0.7)),
    ):
        t_o = best_time(lambda o=ours, X=X, y=y: o.fit(X, y), repeat)
        t_s = best_time(lambda r=ref, X=X, y=y: r.fit(X, y), repeat)
        diff = float(np.max(np.abs(ours.coef_ - ref.coef_)) / np.max(np.abs(ref.coef_)))
        rows.append((f"{name} ({n}x{p}, {design})", t_o, t_s, f"sweeps {ours.n_iter_} vs {ref.n_iter_}, "
                     f"max rel coef diff {diff:.1e}"))
    return rows


def bench_logistic(repeat):
    rows = []
    for loader in (load_breast_cancer, load_digits):
        X, y = loader(return_X_y=True)
        X = np.nan_to_num(StandardScaler().fit_transform(X))
        for solver in ("lbfgs", "newton"):
            ours = registry.get("logistic_regression")(solver=solver)
            sk_solver = "lbfgs" if solver == "lbfgs" else "newton-cholesky"
            ref = sk.LogisticRegression(max_iter=1000, solver=sk_solver)
            t_o = best_time(lambda o=ours, X=X, y=y: o.fit(X, y), repeat)
            t_s = best_time(lambda r=ref, X=X, y=y: r.fit(X, y), repeat)
            acc = (np.mean(ours.predict(X) == y), np.mean(ref.predict(X) == y))
            rows.append((f"logistic {solver} {loader.__name__[5:]} {X.shape}", t_o, t_s,
                         f"train acc {acc[0]:.4f} vs {acc[1]:.4f} (sklearn {ref.solver})"))
    return rows


def bench_predict(number):
    Xr, yr = load_diabetes(return_X_y=True)
    Xr = StandardScaler().fit_transform(Xr)
    Xc, yc = load_breast_cancer(return_X_y=True)
    Xc = StandardScaler().fit_transform(Xc)
    Xd, yd = load_digits(return_X_y=True)
    Xd = np.nan_to_num(StandardScaler().fit_transform(Xd))
    yp = np.round(yr / 20.0)
    cases = [
        ("linear_regression", {}, sk.LinearRegression(), Xr, yr),
        ("linear_regression", {"basis": "polynomial", "degree": 2}, None, Xr, yr),
        ("linear_regression", {"basis": "gaussian_rbf", "n_centers": 20, "random_state": 0}, None, Xr, yr),
        ("ridge_regression", {"basis": "sigmoid", "n_centers": 5}, None, Xr, yr),
        ("ridge_regression", {}, sk.Ridge(), Xr, yr),
        ("lasso_regression", {"alpha": 0.1}, sk.Lasso(alpha=0.1), Xr, yr),
        ("elastic_net", {"alpha": 0.01}, sk.ElasticNet(alpha=0.01), Xr, yr),
        ("bayesian_linear_regression", {}, sk.BayesianRidge(), Xr, yr),
        ("locally_weighted_regression", {"tau": 3.0}, None, Xr, yr),
        ("poisson_regression", {"alpha": 0.01}, sk.PoissonRegressor(alpha=0.01), Xr, yp),
        ("logistic_regression", {}, sk.LogisticRegression(max_iter=1000), Xc, yc),
        ("logistic_regression", {}, sk.LogisticRegression(max_iter=1000), Xd, yd),
        ("softmax_regression", {}, sk.LogisticRegression(max_iter=1000), Xd, yd),
        ("perceptron", {"random_state": 0}, sk.Perceptron(random_state=0), Xd, yd),
        ("perceptron", {"multi_class": "ovo", "random_state": 0},
         OneVsOneClassifier(sk.Perceptron(random_state=0)), Xd, yd),
        ("least_squares_classifier", {}, sk.RidgeClassifier(alpha=1e-10), Xd, yd),
    ]
    rows = []
    for name, params, ref, X, y in cases:
        ours = registry.get(name)(**params).fit(X, y)
        row = X[:1].copy()
        t_o = min(timeit.repeat(lambda o=ours, row=row: o.predict(row), number=number, repeat=5)) / number
        t_s = np.nan
        if ref is not None:
            ref.fit(X, y)
            t_s = min(timeit.repeat(lambda r=ref, row=row: r.predict(row), number=number, repeat=5)) / number
        label = name + ("" if not params else " " + ",".join(f"{k}={v}" for k, v in params.items()
                                                              if k != "random_state"))
        rows.append((f"{label} d={X.shape[1]}", t_o, t_s, ""))
        if name == "locally_weighted_regression":  # batch path, reported per row
            t_b = min(timeit.repeat(lambda o=ours, X=X: o.predict(X), number=3, repeat=3)) / 3 / X.shape[0]
            rows.append((f"{label} d={X.shape[1]}, batch of {X.shape[0]} rows (per row)", t_b, np.nan, ""))
        if name == "bayesian_linear_regression":
            t_std = min(timeit.repeat(lambda o=ours, row=row: o.predict(row, return_std=True), number=number,
                                      repeat=5)) / number
            t_sstd = min(timeit.repeat(lambda r=ref, row=row: r.predict(row, return_std=True), number=number,
                                       repeat=5)) / number
            rows.append((f"{name} return_std=True d={X.shape[1]}", t_std, t_sstd, ""))
    return rows


def parity():
    """Cross-validated accuracy / R^2 of ours vs sklearn on the same folds (not a timing)."""
    from core.model_selection.split import KFold, StratifiedKFold

    print("\n### Parity (5-fold CV, same folds; standardised features)\n")
    print("| model | dataset | ours | sklearn | diff |")
    print("|---|---|---:|---:|---:|")
    cls_cases = [
        ("logistic_regression lbfgs", lambda: registry.get("logistic_regression")(),
         lambda: sk.LogisticRegression(max_iter=1000)),
        ("logistic_regression newton", lambda: registry.get("logistic_regression")(solver="newton"),
         lambda: sk.LogisticRegression(max_iter=1000)),
        ("softmax_regression", lambda: registry.get("softmax_regression")(),
         lambda: sk.LogisticRegression(max_iter=1000)),
        ("perceptron (no shuffle)", lambda: registry.get("perceptron")(shuffle=False),
         lambda: sk.Perceptron(shuffle=False)),
        ("perceptron ovo (no shuffle)", lambda: registry.get("perceptron")(multi_class="ovo", shuffle=False),
         lambda: OneVsOneClassifier(sk.Perceptron(shuffle=False))),
        ("least_squares_classifier", lambda: registry.get("least_squares_classifier")(alpha=1.0),
         lambda: sk.RidgeClassifier(alpha=1.0)),
    ]
    from sklearn.datasets import load_iris, load_wine

    for loader in (load_iris, load_wine, load_breast_cancer, load_digits):
        X, y = loader(return_X_y=True)
        X = np.nan_to_num(StandardScaler().fit_transform(X))
        folds = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))
        for label, mk_o, mk_s in cls_cases:
            a = np.mean([np.mean(mk_o().fit(X[tr], y[tr]).predict(X[te]) == y[te]) for tr, te in folds])
            b = np.mean([np.mean(mk_s().fit(X[tr], y[tr]).predict(X[te]) == y[te]) for tr, te in folds])
            print(f"| {label} | {loader.__name__[5:]} | {a:.4f} | {b:.4f} | {100 * (a - b):+.2f} pp |")
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    folds = list(KFold(5, shuffle=True, random_state=0).split(X))
    reg_cases = [
        ("linear_regression", lambda: registry.get("linear_regression")(), sk.LinearRegression),
        ("ridge_regression alpha=1", lambda: registry.get("ridge_regression")(), sk.Ridge),
        ("lasso_regression alpha=1", lambda: registry.get("lasso_regression")(), sk.Lasso),
        ("elastic_net alpha=0.1", lambda: registry.get("elastic_net")(alpha=0.1),
         lambda: sk.ElasticNet(alpha=0.1)),
        ("bayesian_linear_regression", lambda: registry.get("bayesian_linear_regression")(),
         sk.BayesianRidge),
        ("poisson_regression alpha=0.01", lambda: registry.get("poisson_regression")(alpha=0.01),
         lambda: sk.PoissonRegressor(alpha=0.01)),
    ]

    def r2(m, Xt, yt):
        pred = m.predict(Xt)
        return 1 - np.sum((yt - pred) ** 2) / np.sum((yt - yt.mean()) ** 2)

    for label, mk_o, mk_s in reg_cases:
        a = np.mean([r2(mk_o().fit(X[tr], y[tr]), X[te], y[te]) for tr, te in folds])
        b = np.mean([r2(mk_s().fit(X[tr], y[tr]), X[te], y[te]) for tr, te in folds])
        print(f"| {label} (R^2) | diabetes | {a:.4f} | {b:.4f} | {a - b:+.4f} |")


def fmt_table(title, rows, unit, scale):
    print(f"\n### {title}\n")
    print(f"| case | ours ({unit}) | sklearn ({unit}) | ratio ours/sklearn | note |")
    print("|---|---:|---:|---:|---|")
    for name, t_o, t_s, note in rows:
        ratio = t_o / t_s if np.isfinite(t_s) else np.nan
        s_txt = f"{t_s * scale:.1f}" if np.isfinite(t_s) else "n/a"
        r_txt = f"{ratio:.2f}" if np.isfinite(ratio) else "n/a"
        print(f"| {name} | {t_o * scale:.1f} | {s_txt} | {r_txt} | {note} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--parity", action="store_true", help="also print CV parity figures")
    ap.add_argument("--predict-only", action="store_true", help="only the single-row predict table")
    args = ap.parse_args()
    n, p = (5000, 100) if args.quick else (20000, 200)
    repeat = 2 if args.quick else 3
    print(f"numpy {np.__version__}; OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    if not args.predict_only:
        fmt_table("Coordinate descent (fit)", bench_cd(n, p, repeat), "ms", 1e3)
        fmt_table("Logistic regression (fit)", bench_logistic(repeat), "ms", 1e3)
    fmt_table("Single-row predict", bench_predict(200 if args.quick else 1000), "us", 1e6)
    if args.parity:
        parity()


if __name__ == "__main__":
    main()
