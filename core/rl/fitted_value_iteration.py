"""Fitted value iteration over continuous states with a linear value function ([da Silva Neto §4], §4.2.3).

``V(x) = max_a Q(x, a)``, ``Q(x, a) = theta_a^T phi(x)`` with ``phi`` one of the linear models' basis
expansions (``core/linear/basis.py``) plus an intercept.  From logged transitions
``(x, a, r, x', done)`` each iteration sets ``y_i = r_i + gamma (1 - done_i) max_a theta_a^T phi(x'_i)`` and
refits every ``theta_a`` by ridge least squares on the rows that took ``a`` (``theta = 0`` at the start,
seed T50).  This is the notes' Algorithm 6 with the one observed successor as its ``k = 1`` sample
(the notes sample ``x'`` from a model; seed errata: the missing ``y_i = max_a q(a)`` line is restored and
the sum runs over the m samples), i.e. fitted Q iteration.  Stops when ``max |y_new - y| < tol``.
Like every fitted value iteration with a non-averaging approximator it can diverge: bases that extrapolate
(high-degree polynomials, narrow RBFs) beyond the sampled states are the usual cause; bounded bases
(``sigmoid``) behave.  Non-finite values raise an error naming the remedies.

Data: columns ``x_*`` (state), ``action``, ``reward``, ``x_next_*``, ``done``.  Predict takes rows of
states (``x_*`` columns or a matrix) and returns the greedy action, V and Q.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from ..base import Reinforcement
from ..context import NULL_CONTEXT
from ..linear.basis import BASIS_PARAMS, make_basis
from ..params import Float, Int, ParamError, Seed, Str
from ..random import check_random_state
from ..registry import register
from ..validation import DataError, check_is_fitted
from . import _continuous as C
from . import _mdp as M
from . import _specs


@register
class FittedValueIteration(Reinforcement):
    name = "fitted_value_iteration"
    summary = "Fitted value iteration: continuous states, linear value function over basis features."
    reports_progress = True
    params = {
        "gamma": _specs.GAMMA,
        **{k: v for k, v in BASIS_PARAMS.items() if k not in ("n_centers", "width")},
        "width": Float(None, gt=0.0, le=1e6, nullable=True,
                       doc="Width s of the RBF/sigmoid basis functions (null: chosen from the data)."),
        "n_centers": Int(10, ge=1, le=10_000, doc="Centres for basis='gaussian_rbf' (total) or 'sigmoid' "
                                                   "(per feature)."),
        "ridge": Float(1e-6, ge=0.0, le=1e6, doc="L2 penalty of each least-squares fit (not on the intercept)."),
        "tol": Float(1e-6, gt=0.0, le=1.0, doc="Stop when the targets change by less than tol."),
        "max_iter": Int(200, ge=1, le=100_000, doc="Maximum number of iterations."),
        "state_prefix": Str("x_", min_length=1, doc="Prefix of the state columns."),
        "next_state_prefix": Str("x_next_", min_length=1, doc="Prefix of the next-state columns."),
        "action_column": M.COLUMN_PARAMS["action_column"],
        "reward_column": M.COLUMN_PARAMS["reward_column"],
        "done_column": M.COLUMN_PARAMS["done_column"],
        "random_state": Seed(),
    }

    def _load(self, X, p):
        cols = M.as_columns(X)
        xs = C.group(cols, p["state_prefix"], p["next_state_prefix"])
        xn = C.group(cols, p["next_state_prefix"])
        names = {k: p[f"{k}_column"] for k in ("action", "reward", "done")}
        missing = [c for c in names.values() if c not in cols]
        missing += [f"{pre}0" for pre, g in ((p["state_prefix"], xs), (p["next_state_prefix"], xn)) if not g]
        if missing:
            raise DataError(f"the logged data lacks the column(s) {', '.join(repr(m) for m in missing)} "
                            f"(fitted_value_iteration needs {p['state_prefix']}*, action, reward, "
                            f"{p['next_state_prefix']}*, done)")
        if len(xs) != len(xn):
            raise DataError(f"the data has {len(xs)} state columns but {len(xn)} next-state columns")
        a_lab = M.label_list(cols[names["action"]], names["action"])
        return (C.matrix(cols, xs), a_lab, M.float_column(cols, names["reward"]), C.matrix(cols, xn),
                M.bool_column(cols, names["done"]), xs)

    def validate_input(self, X) -> None:
        """Every check of ``fit`` that needs no fitting (DataError / ParamError naming the column or param)."""
        p = self._validated_params()
        self._check(p, *self._load(X, p))

    @staticmethod
    def _check(p, Xs, a_lab, r, Xn, done, names):
        if p["gamma"] >= 1.0 and not done.any():
            raise ParamError("gamma", "gamma = 1 needs episodes that end (a true 'done' value); use gamma < 1")

    def fit(self, X, y=None, *, ctx=NULL_CONTEXT):
        p = self._validated_params()
        loaded = self._load(X, p)
        self._check(p, *loaded)
        Xs, a_lab, r, Xn, done, names = loaded
        rng = check_random_state(p["random_state"])
        basis = make_basis(p, np.vstack([Xs, Xn]), random_state=rng)
        F = self._features(basis, Xs)
        Fn = self._features(basis, Xn)
        actions = M.sorted_labels(a_lab)
        a = M.LabelIndex(actions).encode(a_lab, p["action_column"], "action")
        k = F.shape[1]
        pen = np.full(k, p["ridge"])
        pen[0] = 0.0
        solvers = []
        for j in range(len(actions)):
            rows = np.flatnonzero(a == j)
            G = F[rows].T @ F[rows] + np.diag(pen) + 1e-12 * np.eye(k)
            solvers.append((rows, cho_factor(G)))
        theta = np.zeros((len(actions), k))
        y_old = np.full(len(r), np.inf)
        converged = False
        it = 0
        for it in range(1, p["max_iter"] + 1):
            vnext = (Fn @ theta.T).max(axis=1)
            y_new = r + p["gamma"] * np.where(done, 0.0, vnext)
            for j, (rows, fac) in enumerate(solvers):
                theta[j] = cho_solve(fac, F[rows].T @ y_new[rows])
            change = float(np.max(np.abs(y_new - y_old)))
            if not np.isfinite(theta).all() or not np.isfinite(y_new).all():
                raise DataError("fitted value iteration diverged: the basis extrapolates beyond the sampled states "
                                "(try basis='sigmoid' or 'none', a smaller gamma, or a larger ridge)")
            y_old = y_new
            ctx.step(it, p["max_iter"], change=change)
            if change < p["tol"]:
                converged = True
                break
        self.basis_ = basis
        self.theta_ = theta
        self.actions_ = M.label_array(actions)
        self.n_iter_ = it
        self.converged_ = converged
        self.n_states_ = Xs.shape[1]
        self.state_columns_ = names
        return self

    @staticmethod
    def _features(basis, X) -> np.ndarray:
        Z = basis.transform(X)
        return np.hstack([np.ones((len(Z), 1)), Z])

    def predict_q(self, X) -> np.ndarray:
        check_is_fitted(self, ["theta_"])
        p = self.get_params()
        Xs = C.state_matrix(X, p["state_prefix"], p["next_state_prefix"], self.n_states_)
        return self._features(self.basis_, Xs) @ self.theta_.T

    def predict_value(self, X) -> np.ndarray:
        return self.predict_q(X).max(axis=1)

    def predict(self, X) -> np.ndarray:
        Q = self.predict_q(X)
        return self.actions_[np.argmax(Q, axis=1)]

    def predict_all(self, X) -> dict:
        Q = self.predict_q(X)
        acts = [str(v) for v in self.actions_.tolist()]
        return {"predictions": self.actions_[np.argmax(Q, axis=1)].tolist(), "values": Q.max(axis=1).tolist(),
                "q_values": [dict(zip(acts, row, strict=True)) for row in Q.tolist()]}

    def evaluate(self, X) -> dict:
        """RMS of the Bellman errors ``r + gamma (1 - done) V(x') - Q(x, a)`` on logged transitions."""
        check_is_fitted(self, ["theta_"])
        p = self._validated_params()
        Xs, a_lab, r, Xn, done, _ = self._load(X, p)
        idx = M.LabelIndex(self.actions_.tolist())
        a = np.array([idx.get(v) for v in a_lab], dtype=np.intp)
        Q = self._features(self.basis_, Xs) @ self.theta_.T
        q = np.where(a >= 0, Q[np.arange(len(a)), np.maximum(a, 0)], 0.0)
        vn = (self._features(self.basis_, Xn) @ self.theta_.T).max(axis=1)
        err = r + p["gamma"] * np.where(done, 0.0, vn) - q
        return {"bellman_residual": float(np.sqrt(np.mean(err**2))), "mean_reward": float(r.mean()),
                "n_transitions": int(len(r))}
