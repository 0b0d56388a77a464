"""Discrete-time linear quadratic regulator ([da Silva Neto §4], §4.5, Algorithm 7).

Dynamics ``x' = A x + B u + w`` (``w ~ N(0, W)``), cost ``sum_t gamma^t (x^T Q x + u^T R u)`` (the notes'
reward ``-(s^T U s + a^T V a)`` with ``U = Q``, ``V = R``; their value matrix ``Phi = -P``).  The Riccati
recursion in cost form,

    K_t = (R + gamma B^T P_{t+1} B)^{-1} gamma B^T P_{t+1} A,
    P_t = Q + gamma A^T P_{t+1} (A - B K_t),          c_t = gamma (c_{t+1} + tr(W P_{t+1})),

starts from ``P_T = Q_final`` (default ``Q``; the notes' ``Phi_T = -U``, ``Psi_T = 0``) and gives the policy
``u_t = -K_t x_t``.  Errata of [da Silva Neto §4]: the notes' gain has the wrong
sign, the transposes ``A^T ... A`` and ``B^T P`` are missing, and the constant is ``Psi_t = Psi_{t+1} +
tr(Sigma_w Phi_{t+1})`` (with ``Phi = -P`` this is ``+ tr(W P)`` in cost form).  The infinite horizon
iterates the recursion until ``P`` stops changing; it equals ``scipy.linalg.solve_discrete_are``.

``A`` and ``B`` come from the params, or are estimated from a table of ``x_*``, ``u_*``, ``x_next_*``
columns by least squares ``min ||x' - A x - B u||^2`` ([da Silva Neto §4]); ``W`` is then the
residual covariance.
"""

from __future__ import annotations

import numpy as np

from ..base import Reinforcement
from ..context import NULL_CONTEXT
from ..params import Float, Int, ListOf, ParamError, Str
from ..registry import register
from ..validation import DataError, check_is_fitted
from . import _continuous as C
from . import _mdp as M


def _matrix_spec(doc: str):
    return ListOf(ListOf(Float(ge=-1e12, le=1e12), min_items=1), None, nullable=True, min_items=1, doc=doc)


def _as_matrix(name: str, value, shape: tuple[int, int]) -> np.ndarray:
    widths = {len(r) for r in value}
    if len(widths) != 1:
        raise ParamError(name, "rows of different lengths; give a rectangular matrix (a list of rows)")
    M_ = np.asarray(value, dtype=np.float64)
    if M_.shape != shape:
        raise ParamError(name, f"must be {shape[0]} x {shape[1]}, got {M_.shape[0]} x {M_.shape[1]}")
    return M_


@register
class LQR(Reinforcement):
    name = "lqr"
    summary = "Linear quadratic regulator by Riccati recursion (finite or infinite horizon); A, B given or fitted."
    reports_progress = True
    params = {
        "A": _matrix_spec("State transition matrix (n x n); null: estimated from the data."),
        "B": _matrix_spec("Control matrix (n x d); null: estimated from the data."),
        "Q": _matrix_spec("State cost (n x n, symmetric positive semi-definite); null: identity."),
        "R": _matrix_spec("Control cost (d x d, symmetric positive definite); null: identity."),
        "Q_final": _matrix_spec("Terminal state cost of a finite horizon; null: Q."),
        "horizon": Int(None, ge=1, le=100_000, nullable=True, doc="Finite horizon T; null: infinite."),
        "gamma": Float(1.0, gt=0.0, le=1.0, doc="Discount factor."),
        "tol": Float(1e-10, gt=0.0, le=1.0, doc="Infinite horizon: stop when P changes by less (relative)."),
        "max_iter": Int(100_000, ge=1, le=10_000_000, doc="Infinite horizon: maximum Riccati iterations."),
        "state_prefix": Str("x_", min_length=1, doc="Data: prefix of the state columns."),
        "action_prefix": Str("u_", min_length=1, doc="Data: prefix of the control columns."),
        "next_state_prefix": Str("x_next_", min_length=1, doc="Data: prefix of the next-state columns."),
    }

    # -- fit ---------------------------------------------------------------------------------------
    def _system(self, X, p):
        if (p["A"] is None) != (p["B"] is None):
            raise ParamError("B" if p["B"] is None else "A", "give both A and B, or neither (then they are "
                                                              "estimated from the data)")
        if p["A"] is not None:
            n = len(p["A"])
            A = _as_matrix("A", p["A"], (n, n))
            d = len(p["B"][0])
            B = _as_matrix("B", p["B"], (n, d))
            return A, B, None, None
        if X is None:
            raise DataError("lqr needs the matrices A and B as params, or data with x_*, u_* and x_next_* "
                            "columns to estimate them")
        cols = M.as_columns(X)
        xs = C.group(cols, p["state_prefix"], p["next_state_prefix"])
        us = C.group(cols, p["action_prefix"])
        xn = C.group(cols, p["next_state_prefix"])
        missing = [f"{pre}0" for pre, g in ((p["state_prefix"], xs), (p["action_prefix"], us),
                                            (p["next_state_prefix"], xn)) if not g]
        if missing:
            raise DataError(f"the data lacks the column(s) {', '.join(repr(m) for m in missing)} (lqr needs "
                            f"state columns {p['state_prefix']}*, controls {p['action_prefix']}* and next "
                            f"states {p['next_state_prefix']}*)")
        if len(xn) != len(xs):
            raise DataError(f"the data has {len(xs)} state columns but {len(xn)} next-state columns")
        Xs, U, Xn = C.matrix(cols, xs), C.matrix(cols, us), C.matrix(cols, xn)
        n, d = Xs.shape[1], U.shape[1]
        if len(Xs) < n + d:
            raise DataError(f"estimating A and B needs at least {n + d} rows, the data has {len(Xs)}")
        Z = np.hstack([Xs, U])
        coef, *_ = np.linalg.lstsq(Z, Xn, rcond=None)
        A, B = coef[:n].T, coef[n:].T
        resid = Xn - Z @ coef
        W = resid.T @ resid / max(len(Xs) - n - d, 1)
        return A, B, W, xs

    def validate_input(self, X=None) -> None:
        """Every check of ``fit`` short of the Riccati recursion (matrices' sizes and definiteness, columns)."""
        p = self._validated_params()
        A, B, _, _ = self._system(X, p)
        self._costs(p, *B.shape)

    @staticmethod
    def _costs(p, n, d):
        Q = np.eye(n) if p["Q"] is None else _as_matrix("Q", p["Q"], (n, n))
        R = np.eye(d) if p["R"] is None else _as_matrix("R", p["R"], (d, d))
        Qf = Q if p["Q_final"] is None else _as_matrix("Q_final", p["Q_final"], (n, n))
        for nm, Mx, pd in (("Q", Q, False), ("R", R, True), ("Q_final", Qf, False)):
            if not np.allclose(Mx, Mx.T, atol=1e-10 * (1 + np.abs(Mx).max())):
                raise ParamError(nm, "must be symmetric")
            ev = np.linalg.eigvalsh(Mx)
            if (pd and ev.min() <= 0) or ev.min() < -1e-10 * (1 + np.abs(ev).max()):
                raise ParamError(nm, "must be positive definite" if pd else "must be positive semi-definite")
        return Q, R, Qf

    def fit(self, X=None, y=None, *, ctx=NULL_CONTEXT):
        p = self._validated_params()
        A, B, W, names = self._system(X, p)
        n, d = B.shape
        Q, R, Qf = self._costs(p, n, d)
        g = p["gamma"]
        W0 = np.zeros((n, n)) if W is None else W
        P = Qf.copy()
        c = 0.0
        gains = []
        converged = True
        steps = p["horizon"] if p["horizon"] is not None else p["max_iter"]
        it = 0
        for it in range(1, steps + 1):
            BtP = B.T @ P
            K = np.linalg.solve(R + g * BtP @ B, g * BtP @ A)
            P_new = Q + g * A.T @ P @ (A - B @ K)
            P_new = 0.5 * (P_new + P_new.T)
            c = g * (c + float(np.trace(W0 @ P)))
            if p["horizon"] is not None:
                gains.append(K)
                P = P_new
                ctx.step(it, steps)
                continue
            change = float(np.max(np.abs(P_new - P)) / (1.0 + np.max(np.abs(P_new))))
            P = P_new
            if not np.isfinite(P).all():
                raise DataError("the Riccati recursion diverged: (A, B) is not stabilisable for this cost")
            ctx.step(it, steps, change=change)
            if change < p["tol"]:
                break
        else:
            converged = p["horizon"] is not None
        if p["horizon"] is None:
            BtP = B.T @ P
            K = np.linalg.solve(R + g * BtP @ B, g * BtP @ A)
            gains_arr = K[None]
        else:
            gains_arr = np.asarray(gains[::-1])  # gains_[t] for t = 0..T-1
        self.A_, self.B_, self.Q_, self.R_ = A, B, Q, R
        self.noise_cov_ = W
        self.P_ = P
        self.K_ = gains_arr[0]
        self.gains_ = gains_arr
        self.value_offset_ = c
        self.n_iter_ = it
        self.converged_ = converged
        self.n_states_, self.n_controls_ = n, d
        self.state_columns_ = names or [f"{p['state_prefix']}{i}" for i in range(n)]
        return self

    # -- predict / evaluate ------------------------------------------------------------------------
    def _states(self, X) -> np.ndarray:
        check_is_fitted(self, ["K_"])
        p = self.get_params()
        return C.state_matrix(X, p["state_prefix"], p["next_state_prefix"], self.n_states_)

    def predict(self, X) -> np.ndarray:
        """The optimal control ``u = -K x`` per row (``K`` of step 0 for a finite horizon)."""
        return -self._states(X) @ self.K_.T

    def predict_value(self, X) -> np.ndarray:
        """Expected cost-to-go ``x^T P x + c`` (the notes' value is its negative)."""
        Xs = self._states(X)
        return np.einsum("ij,jk,ik->i", Xs, self.P_, Xs) + self.value_offset_

    def evaluate(self, X=None) -> dict:
        check_is_fitted(self, ["K_"])
        p = self._validated_params()
        A, B, Q, R, P, g = self.A_, self.B_, self.Q_, self.R_, self.P_, p["gamma"]
        BtP = B.T @ P
        K = np.linalg.solve(R + g * BtP @ B, g * BtP @ A)
        residual = float(np.max(np.abs(Q + g * A.T @ P @ (A - B @ K) - P))) if p["horizon"] is None else 0.0
        closed = A - B @ self.K_
        out = {"bellman_residual": residual,
               "closed_loop_spectral_radius": float(np.max(np.abs(np.linalg.eigvals(closed))))}
        if X is not None:
            cols = M.as_columns(X)
            xs = C.group(cols, p["state_prefix"], p["next_state_prefix"])
            us = C.group(cols, p["action_prefix"])
            xn = C.group(cols, p["next_state_prefix"])
            if len(xs) == self.n_states_ and len(xn) == self.n_states_ and len(us) == self.n_controls_:
                Xs, U, Xn = C.matrix(cols, xs), C.matrix(cols, us), C.matrix(cols, xn)
                out["dynamics_mse"] = float(np.mean((Xn - Xs @ A.T - U @ B.T) ** 2))
                out["mean_stage_cost"] = float(np.mean(np.einsum("ij,jk,ik->i", Xs, Q, Xs)
                                                       + np.einsum("ij,jk,ik->i", U, R, U)))
            elif xs:
                Xs = C.matrix(cols, xs)
                if Xs.shape[1] == self.n_states_:
                    out["mean_cost_to_go"] = float(np.mean(self.predict_value(Xs)))
        return out
