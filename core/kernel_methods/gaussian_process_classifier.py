"""Gaussian process classification by the Laplace approximation (``gaussian_process_classifier``).

Binary model [Rasmussen & Williams §3.3-3.4]: latent f ~ GP(0, k_theta), p(y_i = 1 | f_i) = sigma(f_i)
(logistic).  The posterior p(f | X, y) is approximated by a Gaussian at its mode f^ with
covariance (K^-1 + W)^-1, W = diag(pi (1 - pi)), pi = sigma(f^).

* Mode: Newton's method [Rasmussen & Williams Alg. 3.1] with B = I + W^1/2 K W^1/2 = L L^T
  (well conditioned, eigenvalues in [1, 1 + n max K / 4]; no inverse of K):
      b = W f + (y - pi),  a = b - W^1/2 L^-T L^-1 W^1/2 K b,  f = K a,
  until the approximate log marginal likelihood
      log q(y | X, theta) = -1/2 a^T f + sum_i log sigma(y~_i f_i) - sum_i log L_ii   (y~ = 2y - 1)
  improves by less than 1e-10 (at most ``max_iter_predict`` steps, from f = 0).
* Hyperparameters: log q and its gradient [Rasmussen & Williams Alg. 5.1] (explicit term plus the
  implicit dependence of f^ on theta), maximised by L-BFGS-B with restarts, exactly as the regressor
  (``maximise_evidence``: the same kernel expressions, bounds and ``random_state`` draws).
* Prediction [Rasmussen & Williams Alg. 3.2]: latent mean f*_mean = k*^T (y - pi), variance
  V = k(x*, x*) - ||L^-1 W^1/2 k*||^2; the averaged predictive probability
  pi* = integral sigma(z) N(z | f*_mean, V) dz.  Departure from the book, which leaves line 7 to
  numerical integration or the probit approximation sigma(z) ~ Phi(z sqrt(pi / 8)) (eq. 3.25): as
  scikit-learn, sigma is approximated by a combination of five error functions [Williams & Barber]
  (within 5e-4 of sigma everywhere), whose Gaussian integrals are closed form.
* Multiclass: one binary problem per class (class vs rest), each with its own hyperparameters;
  probabilities are the binary ones normalised to sum to 1 (scikit-learn's one-vs-rest).

Unlike scikit-learn, whose default kernel ``1.0 * RBF(1.0)`` is fixed, the default ``constant*rbf``
is fitted by maximising the evidence (docs/decisions/kernels.md).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, cho_solve, cholesky, solve_triangular
from scipy.special import erf, expit

from ..base import Classifier
from ..context import NULL_CONTEXT
from ..memory import kernel_fit
from ..params import Choice, Int, ParamError, Seed
from ..random import check_random_state
from ..registry import register
from ..validation import DataError, check_predict_input, check_X_y
from .gaussian_process_regressor import maximise_evidence
from .gp_kernels import GPKernelSpec, build_gp_kernel

__all__ = ["GaussianProcessClassifier", "laplace_log_marginal_likelihood"]

# sigma(z) ~ sum_j c_j (1 + erf(lambda_j z)) / 2 [Williams & Barber] (scikit-learn's coefficients), and
# E[erf(lambda z)] under N(z | m, V) = erf(lambda m / sqrt(1 + 2 lambda^2 V))
_LAMBDAS = np.array([0.41, 0.4, 0.37, 0.44, 0.39])[:, None]
_COEFS = np.array([-1854.8214151, 3516.89893646, 221.29346712, 128.12323805, -2010.49422654])[:, None]


def _posterior_mode(K, y, max_iter):
    """Newton iterations for the mode of p(f | X, y) [Rasmussen & Williams Alg. 3.1].

    Returns (log q(y | X, theta), (pi, W^1/2, L, a)); ``y`` in {0, 1}."""
    n = y.shape[0]
    f = np.zeros(n)
    sign = 2.0 * y - 1.0
    lml = -np.inf
    for _ in range(max_iter):
        pi = expit(f)
        W = pi * (1.0 - pi)
        sW = np.sqrt(W)
        sWK = sW[:, None] * K
        B = sWK * sW[None, :]
        B.flat[:: n + 1] += 1.0
        L = cholesky(B, lower=True, check_finite=False)
        b = W * f + (y - pi)
        a = b - sW * cho_solve((L, True), sWK @ b, check_finite=False)
        f = K @ a
        new = -0.5 * float(a @ f) - float(np.logaddexp(0.0, -sign * f).sum()) - float(np.log(np.diag(L)).sum())
        if new - lml < 1e-10:
            break
        lml = new
    return lml, (pi, sW, L, a)


def laplace_log_marginal_likelihood(kernel, X, y, max_iter=100, eval_gradient=False):
    """Laplace approximation of log p(y | X, theta) and its gradient [Rasmussen & Williams Alg. 5.1]."""
    if not eval_gradient:
        try:
            return _posterior_mode(kernel(X), y, max_iter)[0]
        except (LinAlgError, ValueError):
            return -np.inf
    K, dK = kernel(X, eval_gradient=True)
    try:
        lml, (pi, sW, L, a) = _posterior_mode(K, y, max_iter)
    except (LinAlgError, ValueError):
        return -np.inf, np.zeros(kernel.n_dims)
    n = y.shape[0]
    # R = W^1/2 (I + W^1/2 K W^1/2)^-1 W^1/2
    R = sW[:, None] * cho_solve((L, True), np.diag(sW), check_finite=False)
    C = solve_triangular(L, sW[:, None] * K, lower=True, check_finite=False)
    # s2 = -1/2 diag((K^-1 + W)^-1) * d^3 log p(y | f) / df^3
    s2 = -0.5 * (np.diag(K) - np.einsum("ij,ij->j", C, C)) * (pi * (1.0 - pi) * (1.0 - 2.0 * pi))
    dKf = dK.reshape(n * n, -1)
    s1 = 0.5 * np.einsum("i,ijq,j->q", a, dK, a) - 0.5 * (R.T.reshape(-1) @ dKf)
    Bq = np.einsum("ijq,j->iq", dK, y - pi)  # dK/dtheta_q (y - pi), one column per q
    s3 = Bq - K @ (R @ Bq)
    return lml, s1 + s2 @ s3


@register
class GaussianProcessClassifier(Classifier):
    name = "gaussian_process_classifier"
    lazy_learner = True
    summary = ("Gaussian process classification (Laplace approximation, logistic likelihood); "
               "kernel fitted by maximising the evidence; multiclass one-vs-rest.")
    fit_memory = kernel_fit(10, "covariance")  # n x n matrices as the regressor's (core/memory.py)
    params = {
        "kernel": GPKernelSpec(
            "constant*rbf",
            doc="GP covariance of the latent function: an expression over rbf, constant, white, linear, poly "
                "with '+', '*' and positive numbers, e.g. 'constant*rbf', or an object "
                "{'name': 'rbf', 'length_scale': 2.0, 'length_scale_bounds': [1e-2, 1e3] | 'fixed'}, "
                "{'sum': [...]}, {'product': [...]}.",
        ),
        "optimizer": Choice(
            "fmin_l_bfgs_b", choices=("fmin_l_bfgs_b", "none"), nullable=True,
            doc="'fmin_l_bfgs_b' maximises the (Laplace) log marginal likelihood; 'none' (or null) keeps "
                "the kernel.",
        ),
        "n_restarts_optimizer": Int(0, ge=0, le=100,
                                    doc="Extra optimiser starts drawn log-uniformly within the bounds."),
        "max_iter_predict": Int(100, ge=1, le=10_000,
                                doc="Maximum Newton iterations for the posterior mode."),
        "random_state": Seed(),
    }
    reports_progress = True
    needs_scaling = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y, min_samples=2)
        classes, codes = self._encode_targets(y)
        try:
            kernel0 = build_gp_kernel(p["kernel"], X.shape[1])
        except ValueError as exc:
            raise ParamError("kernel", str(exc)) from None
        rng = check_random_state(p["random_state"])
        optimise = p["optimizer"] not in (None, "none") and kernel0.n_dims > 0
        targets = [codes == 1] if len(classes) == 2 else [codes == c for c in range(len(classes))]
        problems = []
        for j, t in enumerate(targets):
            yt = t.astype(np.float64)
            sub = ctx.child(j / len(targets), (j + 1) / len(targets))
            kernel = kernel0
            if optimise:
                kernel = maximise_evidence(
                    kernel0,
                    lambda k, yt=yt: laplace_log_marginal_likelihood(k, X, yt, p["max_iter_predict"], True),
                    p["n_restarts_optimizer"], rng, sub,
                )
            try:
                lml, (pi, sW, L, _) = _posterior_mode(kernel(X), yt, p["max_iter_predict"])
            except (LinAlgError, ValueError):
                raise DataError(f"the kernel matrix {kernel!r} is not positive semi-definite") from None
            problems.append({"kernel": kernel, "resid": yt - pi, "sW": sW, "L": L, "lml": lml})
            sub.step(1, 1)
        self.classes_ = classes
        self.kernels_ = [q["kernel"] for q in problems]
        self.kernel_ = self.kernels_[0]
        self.kernel_params_ = [k.get_params() for k in self.kernels_]
        self.log_marginal_likelihood_value_ = float(np.mean([q["lml"] for q in problems]))
        self._problems = problems
        self.X_train_ = X.copy()
        self.n_features_in_ = X.shape[1]
        return self

    def _binary_proba(self, q, X):
        """pi* = E[sigma(f*)] under the Laplace posterior [Rasmussen & Williams Alg. 3.2]."""
        Ks = q["kernel"](self.X_train_, X)
        f_mean = Ks.T @ q["resid"]
        v = solve_triangular(q["L"], q["sW"][:, None] * Ks, lower=True, check_finite=False)
        var = np.maximum(q["kernel"].diag(X) - np.einsum("ij,ij->j", v, v), 1e-300)
        alpha = 1.0 / (2.0 * var)
        gamma = _LAMBDAS * f_mean
        integrals = (np.sqrt(np.pi / alpha) * erf(gamma * np.sqrt(alpha / (alpha + _LAMBDAS**2)))
                     / (2.0 * np.sqrt(var * 2.0 * np.pi)))
        pi = (_COEFS * integrals).sum(axis=0) + 0.5 * _COEFS.sum()
        return np.clip(pi, 0.0, 1.0)

    def predict_proba(self, X):
        X = check_predict_input(self, X, "_problems")
        if len(self.classes_) == 2:
            p1 = self._binary_proba(self._problems[0], X)
            return np.column_stack([1.0 - p1, p1])
        P = np.column_stack([self._binary_proba(q, X) for q in self._problems])
        s = P.sum(axis=1, keepdims=True)
        return np.divide(P, s, out=np.full_like(P, 1.0 / P.shape[1]), where=s > 0)

    def decision_function(self, X):
        """Latent posterior mean f*_mean (binary: one column for classes_[1]; else one per class)."""
        X = check_predict_input(self, X, "_problems")
        F = np.column_stack([q["kernel"](X, self.X_train_) @ q["resid"] for q in self._problems])
        return F[:, 0] if len(self.classes_) == 2 else F
