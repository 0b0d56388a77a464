"""Speed of kNN, naive Bayes and discriminant analysis against scikit-learn (ratio ours/sklearn).

Run from the repository root:  python bench/neighbors_nb_da.py [--quick]
Prints a Markdown table; every figure is the best of a few repeats (the machine is shared).
Targets (task brief): kNN 10k queries x 100k x 20 training points within 1.5x; single-row kNN
query under 200 us on 10k training points; NB and DA fit and predict within 1.5x.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core import registry  # noqa: E402


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def per_call(fn, n: int, repeat: int = 3) -> float:
    def run():
        for _ in range(n):
            fn()

    return best_of(run, repeat) / n


def cpu_per_call(fn, n: int, repeat: int = 3) -> float:
    """CPU seconds per call (process time: excludes waiting for a core on a busy machine)."""
    best = np.inf
    for _ in range(repeat):
        t = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, (time.process_time() - t) / n)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller problems, fewer repeats")
    ap.add_argument("--skip-large-knn", action="store_true", help="skip the 10k x 100k kNN query")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from sklearn import discriminant_analysis as skda
    from sklearn import naive_bayes as sknb
    from sklearn.neighbors import KNeighborsClassifier

    rng = np.random.default_rng(0)
    rep = 2 if args.quick else 3
    rows = []

    def add(task, ours_s, ref_s, unit="s"):
        scale = 1e6 if unit == "us" else 1.0
        rows.append((task, ours_s * scale, ref_s * scale, ours_s / ref_s, unit))
        print(f"{task:58s} ours {ours_s * scale:10.4g} {unit}  sklearn {ref_s * scale:10.4g} {unit}"
              f"  ratio {ours_s / ref_s:5.2f}", flush=True)

    # -- kNN: 10k queries against 100k x 20 ------------------------------------------------
    n_train = 20_000 if args.quick else 100_000
    Xt = rng.normal(size=(n_train, 20))
    yt = rng.integers(0, 3, size=n_train)
    Xq = rng.normal(size=(10_000, 20))
    if not args.skip_large_knn:
        ours = registry.get("knn_classifier")(n_neighbors=5).fit(Xt, yt)
        ref = KNeighborsClassifier(n_neighbors=5).fit(Xt, yt)
        assert (ours.predict(Xq[:200]) == ref.predict(Xq[:200])).all()
        add(f"kNN predict 10k queries, {n_train // 1000}k x 20 train, k=5 (auto)",
            best_of(lambda: ours.predict(Xq), rep), best_of(lambda: ref.predict(Xq), rep))

    # -- kNN single row on 10k training points ----------------------------------------------
    for d in (4, 20):
        Xs = rng.normal(size=(10_000, d))
        ys = rng.integers(0, 3, size=10_000)
        ours = registry.get("knn_classifier")(n_neighbors=5).fit(Xs, ys)
        ref = KNeighborsClassifier(n_neighbors=5).fit(Xs, ys)
        one = rng.normal(size=(1, d))
        add(f"kNN single-row predict, 10k x {d} train ({ours.index_.algorithm}), wall",
            per_call(lambda o=ours, q=one: o.predict(q), 200),
            per_call(lambda r=ref, q=one: r.predict(q), 200), "us")
        add(f"kNN single-row predict, 10k x {d} train ({ours.index_.algorithm}), CPU time",
            cpu_per_call(lambda o=ours, q=one: o.predict(q), 200),
            cpu_per_call(lambda r=ref, q=one: r.predict(q), 200), "us")

    # -- naive Bayes ------------------------------------------------------------------------
    n = 50_000 if args.quick else 200_000
    y = rng.integers(0, 5, size=n)
    Xg = rng.normal(size=(n, 30)) + y[:, None] * 0.1
    Xc = rng.poisson(2.0 + y[:, None] * 0.2, size=(n, 30)).astype(float)
    Xk = np.minimum(Xc, 7)
    cases = [
        ("gaussian_nb", sknb.GaussianNB(), {}, Xg),
        ("multinomial_nb", sknb.MultinomialNB(), {}, Xc),
        ("bernoulli_nb", sknb.BernoulliNB(binarize=2.0), {"binarize": 2.0}, Xc),
        ("categorical_nb", sknb.CategoricalNB(), {}, Xk),
    ]
    # -- discriminant analysis ----------------------------------------------------------------
    nd = 50_000 if args.quick else 100_000
    yd = rng.integers(0, 5, size=nd)
    Xd = rng.normal(size=(nd, 30)) + yd[:, None] * 0.2
    cases += [
        ("linear_discriminant_analysis", skda.LinearDiscriminantAnalysis(), {}, (Xd, yd)),
        ("linear_discriminant_analysis", skda.LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto"),
         {"solver": "lsqr", "shrinkage": "auto"}, (Xd, yd)),
        ("quadratic_discriminant_analysis", skda.QuadraticDiscriminantAnalysis(reg_param=0.01),
         {"reg_param": 0.01}, (Xd, yd)),
    ]
    for name, ref, kw, data in cases:
        X, yy = data if isinstance(data, tuple) else (data, y)
        ours = registry.get(name)(**kw)
        label = name + (f" {kw}" if kw else "")
        add(f"{label} fit ({X.shape[0] // 1000}k x {X.shape[1]})",
            best_of(lambda o=ours, X=X, yy=yy: o.fit(X, yy), rep),
            best_of(lambda r=ref, X=X, yy=yy: r.fit(X, yy), rep))
        add(f"{label} predict_proba",
            best_of(lambda o=ours, X=X: o.predict_proba(X), rep),
            best_of(lambda r=ref, X=X: r.predict_proba(X), rep))

    print("\n| task | ours | scikit-learn | ratio |\n|---|---|---|---|")
    for task, a, b, r, unit in rows:
        print(f"| {task} | {a:.4g} {unit} | {b:.4g} {unit} | {r:.2f} |")
    print(f"\n{platform.platform()}, Python {platform.python_version()}, numpy {np.__version__}")


if __name__ == "__main__":
    main()
