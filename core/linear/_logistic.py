"""Engine of ``logistic_regression`` and ``softmax_regression``.

Objective (scikit-learn's, divided by C * S so that tolerances do not depend on n):

    F(W) = 1/S sum_i s_i l_i(W) + 1/(C S) * pen(W)

with s_i = sample_weight_i * class_weight[y_i], S = sum_i s_i, the intercept never
penalised, and
    l2:          pen = 1/2 ||W||^2
    l1:          pen = ||W||_1
    elasticnet:  pen = l1_ratio ||W||_1 + (1 - l1_ratio)/2 ||W||^2
    none:        pen = 0.

Binary ([Colombo §2.4], [da Silva Neto §1.2.3]): l_i = log(1 + e^{z_i}) - y_i z_i,
z = x^T w + b, gradient X^T s (sigma(z) - y) ([Colombo §2.4]; the notes' update
rule has the ascent sign, erratum).  Multinomial ([Colombo §2.4.2], [da Silva Neto §1.3.4]):
l_i = logsumexp_k(z_ik) - z_{i,y_i}, gradient (P - Y)^T X, one weight vector per
class (the full, penalised parameterisation that sklearn uses).  Log-sum-exp and
``scipy.special.expit``/``log_expit`` keep everything finite.

Solvers: ``lbfgs`` (scipy L-BFGS-B, smooth penalties), ``newton`` (IRLS: Newton steps
H d = -g with the exact Hessian, Cholesky, backtracking line search; [da Silva Neto §1.2.4]),
``gd`` (accelerated proximal gradient: L1 via soft-thresholding, i.e. FISTA) and
``sgd`` (mini-batch proximal SGD).  L1/elastic-net need ``gd`` or ``sgd``
(docs/decisions/linear-logistic-solvers.md).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize
from scipy.special import expit, log_expit, logsumexp, softmax

from ..base import Classifier
from ..context import NULL_CONTEXT
from ..params import Bool, Choice, DictOf, Float, Int, OneOf, ParamError, Seed
from ..random import check_random_state
from ..validation import check_predict_input, check_sample_weight, check_X_y, class_weight_vector, is_one_clean_row
from ._common import binary_labels, linear_scores, lipschitz_sq
from ._optim import accelerated_gradient, cholesky_direction, minibatch_sgd, newton_minimize, soft_threshold

LOGISTIC_PARAMS = {
    "penalty": Choice("l2", choices=("l2", "none", "l1", "elasticnet"), doc="Regulariser of the weights."),
    "C": Float(1.0, gt=0.0, le=1e12, doc="Inverse regularisation strength (sklearn's C)."),
    "l1_ratio": Float(0.5, ge=0.0, le=1.0, doc="L1 share of the elastic-net penalty."),
    "solver": Choice(
        "lbfgs",
        choices=("lbfgs", "newton", "gd", "sgd"),
        doc="lbfgs / newton (IRLS): l2 or none; gd (proximal, FISTA) and sgd: any penalty.",
    ),
    "fit_intercept": Bool(True, doc="Fit an unpenalised intercept."),
    "class_weight": OneOf(
        None,
        options=(Choice("balanced", choices=("balanced",)), DictOf(Float(gt=0.0, le=1e12))),
        nullable=True,
        doc='null, "balanced" or {label: weight}.',
    ),
    "max_iter": Int(1000, ge=1, le=1_000_000, doc="Iterations (lbfgs, newton, gd) or epochs (sgd)."),
    "tol": Float(1e-4, gt=0.0, le=1e6, doc="Gradient (lbfgs, newton) or step-size (gd, sgd) tolerance."),
    "learning_rate": Float(None, gt=0.0, le=1e6, nullable=True, doc="Step size for gd/sgd (null: 1/L)."),
    "batch_size": Int(32, ge=1, le=10_000_000, doc="Mini-batch size for sgd."),
    "random_state": Seed(None),
}


# ----------------------------------------------------------------------------- losses
class _Problem:
    """Loss, gradient and Hessian of F for parameters theta = W.ravel() (W: k x (p [+1]))."""

    def __init__(self, Xa, codes, s, k, multinomial, C, l2, fit_intercept):
        self.X = Xa  # with a trailing ones column when fit_intercept
        self.s = s
        self.S = float(s.sum())
        self.k = k  # rows of W: 1 (binary) or n_classes
        self.multinomial = multinomial
        self.codes = codes
        self.l2 = l2 / (C * self.S)  # curvature of the smooth penalty
        n, q = Xa.shape
        self.q = q
        mask = np.ones((k, q))
        if fit_intercept:
            mask[:, -1] = 0.0
        self.mask = mask.ravel()
        self.fit_intercept = fit_intercept
        self.rows = np.arange(n)
        if multinomial:
            Y = np.zeros((n, k))
            Y[np.arange(n), codes] = 1.0
            self.Y = Y
        else:
            self.y = codes.astype(float)

    def loss_grad(self, theta):
        X, s, S = self.X, self.s, self.S
        W = theta.reshape(self.k, self.q)
        mw = theta * self.mask
        pen = 0.5 * self.l2 * float(mw @ mw)
        if self.multinomial:
            Z = X @ W.T
            zmax = Z.max(axis=1, keepdims=True)
            E = np.exp(Z - zmax)
            sumE = E.sum(axis=1, keepdims=True)
            lse = (zmax + np.log(sumE))[:, 0]  # log-sum-exp, shifted by the row maximum
            loss = float(s @ (lse - Z[self.rows, self.codes])) / S
            E /= sumE  # probabilities
            E -= self.Y
            G = (E * s[:, None]).T @ X / S
        else:
            z = X @ W[0]
            # log(1 + e^z) - y z = -log_expit(z) + (1 - y) z ... written stably:
            loss = float(s @ (-log_expit(z) + (1.0 - self.y) * z)) / S
            G = (((expit(z) - self.y) * s) @ X / S)[None, :]
        return loss + pen, G.ravel() + self.l2 * mw

    def grad(self, theta):
        return self.loss_grad(theta)[1]

    def hessian(self, theta):
        X, s, S = self.X, self.s, self.S
        W = theta.reshape(self.k, self.q)
        if self.multinomial:
            # H = sum_i s_i (diag(p_i) - p_i p_i^T) (x) x_i x_i^T  =  blockdiag_a(X^T S P_a X) - B^T B
            k, q = self.k, self.q
            P = softmax(X @ W.T, axis=1)
            B = (P[:, :, None] * X[:, None, :]).reshape(X.shape[0], k * q) * np.sqrt(s / S)[:, None]
            H = -(B.T @ B)
            for a in range(k):
                H[a * q : (a + 1) * q, a * q : (a + 1) * q] += (X * (s * P[:, a] / S)[:, None]).T @ X
        else:
            pz = expit(X @ W[0])
            H = (X * (s * pz * (1.0 - pz))[:, None]).T @ X / S
        H[np.diag_indices_from(H)] += self.l2 * self.mask
        return H


# ----------------------------------------------------------------------------- solvers
def _lbfgs(prob, theta0, p, ctx):
    it = [0]
    max_iter = p["max_iter"]

    def callback(*_):
        it[0] += 1
        ctx.step(it[0], max_iter)

    res = optimize.minimize(
        prob.loss_grad, theta0, jac=True, method="L-BFGS-B", callback=callback,
        options={"maxiter": max_iter, "maxls": 50, "gtol": p["tol"], "ftol": 64 * np.finfo(float).eps},
    )
    return res.x, int(res.nit)


def _newton(prob, theta0, p, ctx):
    """Newton / IRLS on F with the exact Hessian (see ``_optim.newton_minimize``)."""

    def direction(theta, g):
        H = prob.hessian(theta)
        if prob.multinomial:
            # the softmax is invariant to adding one vector to every class (the
            # unpenalised intercepts always, all weights without a penalty): H is
            # singular along U = 1_K (x) e_j and g is orthogonal to U, so solving
            # (H + c U U^T) d = -g gives the minimum-norm Newton step by Cholesky
            k, q = prob.k, prob.q
            Hs = H.reshape(k, q, k, q)
            c = float(np.mean(np.diag(H))) or 1.0
            free = np.arange(q) if prob.l2 == 0.0 else np.array([q - 1] if prob.fit_intercept else [], int)
            for j in free:
                Hs[:, j, :, j] += c / k
        return cholesky_direction(H, g)

    return newton_minimize(prob.loss_grad, direction, theta0, max_iter=p["max_iter"], tol=p["tol"], ctx=ctx)


def _smoothness(prob, p):
    Xa, s, S = prob.X, prob.s, prob.S
    c = 0.5 if prob.multinomial else 0.25
    return c * lipschitz_sq(Xa, s) / S + prob.l2


def _make_prox(prob, l1):
    if l1 <= 0:
        return None
    mask = prob.mask.astype(bool)

    def prox(v, step):
        out = v.copy()
        out[mask] = soft_threshold(v[mask], step * l1)
        return out

    return prox


def _gd(prob, theta0, p, l1, ctx):
    L = 1.0 / p["learning_rate"] if p["learning_rate"] is not None else _smoothness(prob, p)
    return accelerated_gradient(
        prob.grad, theta0, L, prox=_make_prox(prob, l1), max_iter=p["max_iter"], tol=p["tol"], ctx=ctx
    )


def _sgd(prob, theta0, p, l1, rng, ctx):
    Xa, s, S = prob.X, prob.s, prob.S
    n = Xa.shape[0]
    bs = min(p["batch_size"], n)
    w_rows = (n / S) * s
    c = 0.5 if prob.multinomial else 0.25
    L_full = c * lipschitz_sq(Xa, s) / S
    L_max = c * float(np.max(w_rows * np.sum(Xa * Xa, axis=1)))
    L_b = (n * (bs - 1) * L_full + (n - bs) * L_max) / (bs * (n - 1)) if n > 1 else L_max
    eta0 = p["learning_rate"] if p["learning_rate"] is not None else 1.0 / (L_b + prob.l2)
    k, q = prob.k, prob.q

    def grad_batch(theta, idx):
        Xb = Xa[idx]
        W = theta.reshape(k, q)
        wb = w_rows[idx]
        if prob.multinomial:
            P = softmax(Xb @ W.T, axis=1)
            G = ((P - prob.Y[idx]) * wb[:, None]).T @ Xb / len(idx)
        else:
            G = (((expit(Xb @ W[0]) - prob.y[idx]) * wb) @ Xb / len(idx))[None, :]
        return G.ravel() + prob.l2 * theta * prob.mask

    def objective(theta):
        return prob.loss_grad(theta)[0] + l1 * float(np.abs(theta * prob.mask).sum())

    return minibatch_sgd(
        grad_batch, theta0, n, eta0=eta0, rng=rng, batch_size=bs, max_iter=p["max_iter"],
        tol=p["tol"], prox=_make_prox(prob, l1), loss=objective, ctx=ctx,
    )


def fit_logistic(X, codes, s, k_classes, multinomial, p, rng, ctx=NULL_CONTEXT):
    """Coefficients (rows, p) and intercepts (rows,) of one binary or multinomial problem."""
    penalty, C = p["penalty"], p["C"]
    if penalty == "none":
        l2, l1 = 0.0, 0.0
    elif penalty == "l2":
        l2, l1 = 1.0, 0.0
    elif penalty == "l1":
        l2, l1 = 0.0, 1.0
    else:
        l2, l1 = 1.0 - p["l1_ratio"], p["l1_ratio"]
    fit_intercept = p["fit_intercept"]
    Xa = np.hstack([X, np.ones((X.shape[0], 1))]) if fit_intercept else X
    rows = k_classes if multinomial else 1
    prob = _Problem(Xa, codes, s, rows, multinomial, C, l2, fit_intercept)
    l1_scaled = l1 / (C * prob.S)
    theta0 = np.zeros(rows * Xa.shape[1])
    solver = p["solver"]
    if solver == "lbfgs":
        theta, n_iter = _lbfgs(prob, theta0, p, ctx)
    elif solver == "newton":
        theta, n_iter = _newton(prob, theta0, p, ctx)
    elif solver == "gd":
        theta, n_iter = _gd(prob, theta0, p, l1_scaled, ctx)
    else:
        theta, n_iter = _sgd(prob, theta0, p, l1_scaled, rng, ctx)
    W = theta.reshape(rows, Xa.shape[1])
    if multinomial:
        # fix the softmax's free shift: intercepts sum to zero (and, unpenalised, the weights too)
        if fit_intercept:
            W[:, -1] -= W[:, -1].mean()
        if l2 == 0.0 and l1 == 0.0:
            W[:, : X.shape[1]] -= W[:, : X.shape[1]].mean(axis=0)
    if fit_intercept:
        return W[:, :-1].copy(), W[:, -1].copy(), n_iter
    return W.copy(), np.zeros(rows), n_iter


class LogisticModel(Classifier):
    """Base of logistic_regression and softmax_regression (not registered)."""

    supports_sample_weight = True
    needs_scaling = True
    reports_progress = True

    def _multi_class(self, p, n_classes) -> str:
        mc = p.get("multi_class", "multinomial")
        if mc == "auto":
            return "binary" if n_classes == 2 else "multinomial"
        if mc == "ovr" and n_classes == 2:
            return "binary"
        return mc

    def fit(self, X, y, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        if p["penalty"] in ("l1", "elasticnet") and p["solver"] in ("lbfgs", "newton"):
            raise ParamError(
                "solver",
                f"solver {p['solver']!r} needs a smooth penalty; use solver 'gd' (proximal "
                f"gradient) or 'sgd' with penalty {p['penalty']!r}",
            )
        X, y = check_X_y(X, y)
        classes, codes = self._encode_targets(y)
        k = len(classes)
        sw = check_sample_weight(sample_weight, X.shape[0])
        s = sw * class_weight_vector(p["class_weight"], classes, codes, sw)[codes]
        rng = check_random_state(p["random_state"])
        mode = self._multi_class(p, k)
        if mode == "ovr":
            coefs, ints, iters = [], [], []
            for c in range(k):
                sub = ctx.child(c / k, (c + 1) / k)
                w, b, it = fit_logistic(X, (codes == c).astype(np.intp), s, 2, False, p, rng, sub)
                coefs.append(w[0])
                ints.append(b[0])
                iters.append(it)
            coef, intercept, n_iter = np.array(coefs), np.array(ints), max(iters)
        else:
            coef, intercept, n_iter = fit_logistic(X, codes, s, k, mode == "multinomial", p, rng, ctx)
        ctx.step(1, 1)
        self.classes_ = classes
        self.coef_ = coef
        self.intercept_ = intercept
        self.multi_class_ = mode
        self.n_iter_ = n_iter
        self.n_features_in_ = X.shape[1]
        return self

    def decision_function(self, X):
        X = check_predict_input(self, X, "coef_")
        return linear_scores(X, self.coef_, self.intercept_, binary=self.multi_class_ == "binary")

    def predict_proba(self, X):
        Z = self.decision_function(X)
        mode = self.multi_class_
        if mode == "binary":
            p1 = expit(Z)
            return np.column_stack([1.0 - p1, p1])
        if mode == "ovr":
            P = expit(Z)
            return P / P.sum(axis=1, keepdims=True)
        return softmax(Z, axis=1)

    def predict_log_proba(self, X):
        Z = self.decision_function(X)
        if self.multi_class_ == "binary":
            return np.column_stack([log_expit(-Z), log_expit(Z)])
        if self.multi_class_ == "ovr":
            return np.log(self.predict_proba(X))
        return Z - logsumexp(Z, axis=1, keepdims=True)

    def predict(self, X):
        if getattr(self, "multi_class_", None) == "binary" and is_one_clean_row(self, X, "coef_"):
            # one row (the service's single-row predict): linear_scores' product, its sum with the intercept in
            # Python floats (the same IEEE addition as NumPy's) and binary_labels' choice, without the
            # finiteness pass over X: a finite product means a finite row
            s = X.dot(self.coef_[0]).item()  # item(): the Python float, as float(...[0]) gives it, in one call
            if math.isfinite(s):
                k = 1 if s + self.intercept_.item(0) > 0 else 0
                return self.classes_[k:k + 1].copy()
        Z = self.decision_function(X)
        if self.multi_class_ == "binary":
            return binary_labels(self.classes_, Z)
        return self.classes_[np.argmax(Z, axis=1)]
