"""Fixed basis-function expansions phi(x) shared by the linear regressors.

[Colombo §1.1.2]: ``y(x, w) = w_0 + sum_j w_j phi_j(x)``; the model stays
linear in ``w``.  [Arias §2.4] gives the polynomial map; [Colombo §2.2.2] names
Gaussian basis functions with centres; sigmoidal basis functions are Bishop's
third standard family (not in the notes; documented in
docs/decisions/linear-basis-expansions.md).

The bias column ``phi_0 = 1`` is *not* produced here: every estimator handles
its intercept itself (centring), so that the intercept is never penalised.

* ``none``         phi(x) = x
* ``polynomial``   all monomials of total degree 1..``degree`` (like
                   sklearn PolynomialFeatures(include_bias=False))
* ``gaussian_rbf`` phi_j(x) = exp(-||x - c_j||^2 / (2 s^2)), ``n_centers`` centres
                   drawn as distinct training rows with ``random_state``;
                   ``width`` s (default: median distance between centres)
* ``sigmoid``      phi_{d,j}(x) = 1 / (1 + exp(-(x_d - mu_{d,j}) / s_d)), ``n_centers``
                   centres mu per feature at evenly spaced quantiles of that
                   feature; ``width`` s_d (default: the spacing of those quantiles)
"""

from __future__ import annotations

from itertools import combinations_with_replacement

import numpy as np
from scipy.special import expit

from ..params import Choice, Float, Int
from ..random import check_random_state

__all__ = ["BASIS_PARAMS", "BasisExpansion", "make_basis"]

BASIS_PARAMS = {
    "basis": Choice(
        "none",
        choices=("none", "polynomial", "gaussian_rbf", "sigmoid"),
        doc="Fixed basis expansion phi(x) applied before the linear model.",
    ),
    "degree": Int(2, ge=1, le=10, doc="Polynomial degree (basis='polynomial')."),
    "n_centers": Int(
        10, ge=1, le=10_000, doc="Number of centres for basis='gaussian_rbf' (total) or 'sigmoid' (per feature)."
    ),
    "width": Float(
        None,
        gt=0.0, le=1e12,
        nullable=True,
        doc="Width s of the RBF/sigmoid basis functions (null: chosen from the data).",
    ),
}


class BasisExpansion:
    """A fitted basis map ``phi``; ``transform`` is vectorised and cheap on one row."""

    def __init__(self, kind: str = "none", *, degree: int = 2, n_centers: int = 10, width=None):
        self.kind = kind
        self.degree = degree
        self.n_centers = n_centers
        self.width = width

    def fit(self, X: np.ndarray, random_state=None) -> BasisExpansion:
        n, d = X.shape
        self.n_features_in_ = d
        if self.kind == "polynomial":
            combos = [
                c for deg in range(1, self.degree + 1) for c in combinations_with_replacement(range(d), deg)
            ]
            # each monomial as `degree` column indices, padded with index d (a column of ones)
            idx = np.full((len(combos), self.degree), d, dtype=np.intp)
            for i, c in enumerate(combos):
                idx[i, : len(c)] = c
            self.index_ = idx
            self.n_output_ = len(combos)
        elif self.kind == "gaussian_rbf":
            rng = check_random_state(random_state)
            uniq = np.unique(X, axis=0)
            k = min(self.n_centers, uniq.shape[0])
            idx = np.sort(rng.choice(uniq.shape[0], size=k, replace=False))
            self.centers_ = uniq[idx].copy()
            if self.width is not None:
                s = float(self.width)
            elif k > 1:
                diff = self.centers_[:, None, :] - self.centers_[None, :, :]
                dist = np.sqrt(np.sum(diff**2, axis=-1))[np.triu_indices(k, 1)]
                s = float(np.median(dist))
            else:
                s = float(np.sqrt(np.sum(np.var(X, axis=0)))) or 1.0
            self.width_ = s if s > 0 else 1.0
            self._gamma = 1.0 / (2.0 * self.width_**2)
            self._c_sq = np.sum(self.centers_**2, axis=1)
            self.n_output_ = k
        elif self.kind == "sigmoid":
            k = self.n_centers
            qs = (np.arange(k) + 0.5) / k
            mu = np.quantile(X, qs, axis=0).T  # (d, k)
            if self.width is not None:
                s = np.full(d, float(self.width))
            else:
                spread = np.quantile(X, 0.95, axis=0) - np.quantile(X, 0.05, axis=0)
                s = spread / max(k, 1)
                s = np.where(s > 0, s, 1.0)
            self.centers_ = mu
            self.width_ = s
            self.n_output_ = d * k
        else:
            self.n_output_ = d
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        kind = self.kind
        if kind == "none":
            return X
        if kind == "polynomial":
            if self.degree == 1:
                return X
            Xp = np.hstack([X, np.ones((X.shape[0], 1))])
            return np.prod(Xp[:, self.index_], axis=2)
        if kind == "gaussian_rbf":
            sq = np.sum(X**2, axis=1)[:, None] + self._c_sq[None, :] - 2.0 * (X @ self.centers_.T)
            np.maximum(sq, 0.0, out=sq)
            return np.exp(-self._gamma * sq)
        # sigmoid
        z = (X[:, :, None] - self.centers_[None, :, :]) / self.width_[None, :, None]
        return expit(z).reshape(X.shape[0], -1)


def make_basis(p: dict, X: np.ndarray, random_state=None) -> BasisExpansion:
    """Fit the basis described by the validated params ``p`` on ``X``."""
    return BasisExpansion(
        p.get("basis", "none"),
        degree=p.get("degree", 2),
        n_centers=p.get("n_centers", 10),
        width=p.get("width"),
    ).fit(X, random_state)
