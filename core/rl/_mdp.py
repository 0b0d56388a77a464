"""Finite MDPs from transition tables, and the tables' validation (shared by every tabular RL estimator).

A table is a mapping of column name -> 1-d array (what the service hands over), a NumPy structured
array, or a pandas DataFrame.  States and actions are labels of any hashable type; numbers that are
integral floats (how a numeric CSV column arrives) are the same label as the integer.

Representation: ``P`` is one ``scipy.sparse.csr_matrix`` of shape ``(n_actions * n_states, n_states)``,
row ``a * S + s`` holding ``P(. | s, a)``; ``Rw`` has the same sparsity pattern and holds ``r(s, a, s')``;
``R[a, s] = sum_s' P(s'|s,a) r(s,a,s')`` is the expected reward; ``avail[a, s]`` says whether action ``a``
is defined in ``s``; terminal states have no actions and value 0.  One sparse mat-vec ``P @ V`` therefore
gives every ``E[V(s') | s, a]`` at once ([Passerini §15], [da Silva Neto §4]).

Rewards are ``r(s, a, s')`` [Sutton & Barto §3.1]; the notes' ``R(s)`` form ([Passerini §15],
seed erratum: l.3249 defines R(s,a,s'), l.3269 then uses R(s)) is the special case of a reward that
depends on ``s`` only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..params import ParamError, Str
from ..validation import DataError

PROB_TOL = 1e-6
"""Tolerance on ``|sum_s' P(s'|s,a) - 1|`` for every (state, action) of a transition table."""

COLUMN_PARAMS = {
    "state_column": Str("state", min_length=1, doc="Column holding the state."),
    "action_column": Str("action", min_length=1, doc="Column holding the action."),
    "next_state_column": Str("next_state", min_length=1, doc="Column holding the next state."),
    "probability_column": Str("probability", min_length=1, doc="Column holding P(next_state | state, action)."),
    "reward_column": Str("reward", min_length=1, doc="Column holding the reward r(state, action, next_state)."),
    "terminal_column": Str("terminal", min_length=1,
                           doc="Optional boolean column marking terminal states (of the state column)."),
    "done_column": Str("done", min_length=1, doc="Logged data: column that is true when the episode ended."),
    "episode_column": Str("episode", min_length=1, doc="Logged data: optional column identifying the episode."),
}


# ------------------------------------------------------------------------------------------------
# tables and labels
# ------------------------------------------------------------------------------------------------
def as_columns(X) -> dict[str, np.ndarray]:
    """The table ``X`` as a dict of 1-d arrays (no copy when it already is one)."""
    if isinstance(X, Mapping):
        return {str(k): (v if isinstance(v, np.ndarray) else np.asarray(v)) for k, v in X.items()}
    if isinstance(X, np.ndarray) and X.dtype.names:
        return {n: X[n] for n in X.dtype.names}
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):  # a DataFrame
        return {str(c): X[c].to_numpy() for c in X.columns}
    raise DataError("reinforcement estimators take a table: a mapping of column name to values, "
                    "a structured array or a DataFrame")


def n_rows(cols: Mapping[str, np.ndarray]) -> int:
    lengths = {len(v) for v in cols.values()}
    if len(lengths) > 1:
        raise DataError(f"the table's columns have different lengths {sorted(lengths)}")
    return lengths.pop() if lengths else 0


def require(cols: Mapping, names: dict[str, str], what: str) -> None:
    """DataError naming every missing column (``names``: role -> column name)."""
    missing = [c for c in names.values() if c not in cols]
    if missing:
        have = ", ".join(sorted(cols)) or "none"
        raise DataError(f"{what} lacks the column(s) {', '.join(repr(m) for m in missing)} "
                        f"(it needs {', '.join(repr(c) for c in names.values())}; it has {have})")


def norm_label(v):
    """One canonical Python value per label: NumPy scalars unwrapped, integral floats as int."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _is_missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def label_list(arr: np.ndarray, column: str) -> list:
    """The column's values as canonical labels; DataError naming the column on a missing value."""
    arr = np.asarray(arr)
    if arr.dtype.kind == "f":
        if np.isnan(arr).any():
            raise DataError(f"column {column!r} has missing values")
        if np.all(np.mod(arr, 1) == 0):
            return arr.astype(np.int64).tolist()
        return arr.tolist()
    if arr.dtype.kind in "iub":
        return arr.tolist()
    if arr.dtype.kind == "U":
        return arr.tolist()
    out = [norm_label(v) for v in arr.tolist()]
    if any(_is_missing(v) for v in out):
        raise DataError(f"column {column!r} has missing values")
    return out


def label_array(values: list) -> np.ndarray:
    """Labels as a 1-d object array (keeps each label's own type)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def sorted_labels(values) -> list:
    uniq = list(dict.fromkeys(values))
    try:
        uniq.sort()
    except TypeError:
        uniq.sort(key=lambda v: (type(v).__name__, str(v)))
    return uniq


def _label_values(arr: np.ndarray, column: str) -> np.ndarray:
    """A label column as a homogeneous array (int64, float64 or str) when possible, else an object array."""
    arr = np.asarray(arr)
    if arr.dtype.kind == "f":
        if np.isnan(arr).any():
            raise DataError(f"column {column!r} has missing values")
        return arr.astype(np.int64) if np.all(np.mod(arr, 1) == 0) else arr
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    if arr.dtype.kind in "UbS":
        return arr
    vals = label_list(arr, column)
    if vals and all(type(v) is str for v in vals):
        return np.asarray(vals, dtype=str)
    return label_array(vals)


def encode_together(arrays: list[np.ndarray], columns: list[str], extra: list | None = None
                    ) -> tuple[list, list[np.ndarray]]:
    """One sorted label set for several columns (and ``extra`` labels) and each column's codes.

    Vectorised (``np.unique``) when the columns share a type; labels of mixed types go through Python.
    """
    vals = [_label_values(a, c) for a, c in zip(arrays, columns, strict=True)]
    ext = [norm_label(v) for v in (extra or [])]
    kinds = {v.dtype.kind for v in vals}
    ext_ok = all((type(e) is int and kinds <= {"i"}) or (type(e) is str and kinds <= {"U"}) for e in ext)
    if len(kinds) == 1 and kinds <= {"i", "U", "f"} and ext_ok:
        parts = vals + ([np.asarray(ext)] if ext else [])
        flat = np.concatenate(parts)
        lo, hi = (int(flat.min()), int(flat.max())) if kinds == {"i"} and len(flat) else (0, -1)
        if kinds == {"i"} and len(flat) and hi - lo <= 4 * len(flat) + 1024:
            # integer labels over a compact range: a lookup table instead of a sort
            present = np.zeros(hi - lo + 1, dtype=bool)
            present[flat - lo] = True
            uniq = np.flatnonzero(present) + lo
            inv = (np.cumsum(present) - 1)[flat - lo]
        else:
            uniq, inv = np.unique(flat, return_inverse=True)
        codes, start = [], 0
        for v in vals:
            codes.append(inv[start:start + len(v)].astype(np.intp))
            start += len(v)
        return uniq.tolist(), codes
    lists = [v.tolist() for v in vals]
    labels = sorted_labels([x for lst in lists for x in lst] + ext)
    idx = LabelIndex(labels)
    return labels, [idx.encode(lst, c) for lst, c in zip(lists, columns, strict=True)]


class LabelIndex:
    """label -> 0..n-1; also finds a label sent as text ("3") or as a number (3) for the other form."""

    def __init__(self, labels: list):
        self.labels = list(labels)
        self.index = {v: i for i, v in enumerate(self.labels)}
        self._text = {str(v): i for i, v in enumerate(self.labels)}

    def __len__(self) -> int:
        return len(self.labels)

    def get(self, v, default=-1) -> int:
        v = norm_label(v)
        i = self.index.get(v)
        if i is None:
            i = self._text.get(str(v), default)
        return i

    def encode(self, values: list, column: str, what: str = "state") -> np.ndarray:
        out = np.fromiter((self.get(v) for v in values), dtype=np.intp, count=len(values))
        if (out < 0).any():
            bad = [values[i] for i in np.flatnonzero(out < 0)[:5]]
            raise DataError(f"column {column!r} holds {what}(s) the model does not know: "
                            f"{', '.join(repr(b) for b in bad)}")
        return out


def float_column(cols: Mapping, column: str) -> np.ndarray:
    try:
        arr = np.asarray(cols[column], dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"column {column!r} must be numeric") from None
    if not np.isfinite(arr).all():
        raise DataError(f"column {column!r} must hold finite numbers (found a missing, NaN or infinite value)")
    return arr


def bool_column(cols: Mapping, column: str) -> np.ndarray:
    arr = np.asarray(cols[column])
    if arr.dtype == bool:
        return arr
    if arr.dtype.kind in "iuf":
        a = arr.astype(np.float64)
        if np.isnan(a).any() or not np.isin(a, (0.0, 1.0)).all():
            raise DataError(f"column {column!r} must be boolean (true/false or 0/1)")
        return a == 1.0
    out = []
    for v in arr.tolist():
        s = str(v).strip().lower()
        if s in ("true", "1", "yes", "1.0"):
            out.append(True)
        elif s in ("false", "0", "no", "0.0"):
            out.append(False)
        else:
            raise DataError(f"column {column!r} must be boolean (true/false or 0/1), got {v!r}")
    return np.asarray(out, dtype=bool)


def check_gamma(gamma: float, horizon, has_terminal: bool) -> None:
    """gamma in [0, 1] is the spec's job; gamma = 1 needs a horizon or terminal states."""
    if gamma >= 1.0 and horizon is None and not has_terminal:
        raise ParamError("gamma", "gamma = 1 needs a finite horizon or terminal states (the sum of rewards "
                                  "would not be defined); use gamma < 1")


# ------------------------------------------------------------------------------------------------
# the MDP
# ------------------------------------------------------------------------------------------------
@dataclass
class MDP:
    states: list
    actions: list
    P: sp.csr_matrix          # (A*S, S)
    Rw: sp.csr_matrix         # (A*S, S), same pattern as P: r(s, a, s')
    R: np.ndarray             # (A, S) expected reward
    avail: np.ndarray         # (A, S) bool
    terminal: np.ndarray      # (S,) bool

    @property
    def n_states(self) -> int:
        return len(self.states)

    @property
    def n_actions(self) -> int:
        return len(self.actions)

    def q_values(self, V: np.ndarray, gamma: float, out_of_range: float = -np.inf) -> np.ndarray:
        """``Q[a, s] = R[a, s] + gamma E[V(s') | s, a]``; unavailable actions get ``out_of_range``."""
        Q = self.R + gamma * (self.P @ V).reshape(self.n_actions, self.n_states)
        if not self.avail.all():
            Q[~self.avail] = out_of_range
        return Q

    def policy_matrix(self, policy: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
        """``P_pi`` (S, S) and ``r_pi`` (S,) of a deterministic policy (action index per state; terminal: any)."""
        S = self.n_states
        a = np.maximum(policy, 0)
        rows = a * S + np.arange(S)
        return self.P[rows], np.where(self.terminal, 0.0, self.R[a, np.arange(S)])

    def sampler(self) -> Sampler:
        return Sampler(self)


def build_mdp(cols: Mapping, p: Mapping, *, terminal_states=None) -> MDP:
    """Validate a transition table and build the MDP.  DataError messages name the column."""
    names = {k: p[f"{k}_column"] for k in ("state", "action", "next_state", "probability", "reward")}
    require(cols, names, "the transition table")
    n = n_rows(cols)
    if n == 0:
        raise DataError("the transition table has no rows")
    prob = float_column(cols, names["probability"])
    rew = float_column(cols, names["reward"])
    if (prob < 0).any():
        i = int(np.flatnonzero(prob < 0)[0])
        raise DataError(f"column {names['probability']!r} has a negative probability ({prob[i]}) in row {i}")
    if (prob > 1 + PROB_TOL).any():
        i = int(np.flatnonzero(prob > 1 + PROB_TOL)[0])
        raise DataError(f"column {names['probability']!r} has a probability above 1 ({prob[i]}) in row {i}")

    term_col = p.get("terminal_column", "terminal")
    all_labels, (s, ns) = encode_together([cols[names["state"]], cols[names["next_state"]]],
                                          [names["state"], names["next_state"]], list(terminal_states or []))
    is_term = np.zeros(len(all_labels), dtype=bool)
    if terminal_states:
        lab = LabelIndex(all_labels)
        is_term[[lab.get(v) for v in terminal_states]] = True
    if term_col in cols:
        is_term[s[bool_column(cols, term_col)]] = True
    seen = np.zeros(len(all_labels), dtype=bool)
    seen[s] = True
    seen |= is_term
    if not seen[ns].all():
        unknown = [all_labels[i] for i in dict.fromkeys(ns[~seen[ns]].tolist())]
        raise DataError(f"column {names['next_state']!r} holds value(s) never seen as a state and not declared "
                        f"terminal: {', '.join(repr(u) for u in unknown[:5])} (add rows for them, or mark them "
                        f"terminal with the 'terminal' column or the terminal_states parameter)")
    state_labels = all_labels
    S = len(state_labels)
    terminal = is_term
    keep = ~terminal[s]  # rows leaving a terminal state are ignored (terminal states have value 0)
    if not keep.any():
        raise DataError("every row of the transition table leaves a terminal state; there is nothing to solve")
    action_labels, (a,) = encode_together([np.asarray(cols[names["action"]])[keep]], [names["action"]])
    s, ns, prob, rew = s[keep], ns[keep], prob[keep], rew[keep]
    A = len(action_labels)
    row = a * S + s
    # merge duplicate (s, a, s') rows: probabilities add, the reward is their probability-weighted mean
    key = row.astype(np.int64) * S + ns
    uniq, inv = np.unique(key, return_inverse=True)
    p_u = np.bincount(inv, weights=prob, minlength=len(uniq))
    pr_u = np.bincount(inv, weights=prob * rew, minlength=len(uniq))
    cnt = np.bincount(inv, minlength=len(uniq))
    r_sum = np.bincount(inv, weights=rew, minlength=len(uniq))
    r_u = np.where(p_u > 0, pr_u / np.where(p_u > 0, p_u, 1.0), r_sum / cnt)
    row_u = (uniq // S).astype(np.intp)
    ns_u = (uniq % S).astype(np.intp)
    sums = np.bincount(row_u, weights=p_u, minlength=A * S)
    present = np.bincount(row_u, minlength=A * S) > 0
    bad = present & (np.abs(sums - 1.0) > PROB_TOL)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise DataError(f"column {names['probability']!r}: the probabilities of state {state_labels[k % S]!r}, "
                        f"action {action_labels[k // S]!r} sum to {sums[k]:.6g}, not 1 (tolerance {PROB_TOL:g})")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(row_u, minlength=A * S))])
    P = sp.csr_matrix((p_u, ns_u, indptr), shape=(A * S, S))
    Rw = sp.csr_matrix((r_u, ns_u.copy(), indptr.copy()), shape=(A * S, S))
    R = np.bincount(row_u, weights=p_u * r_u, minlength=A * S).reshape(A, S)
    avail = present.reshape(A, S)
    no_action = ~terminal & ~avail.any(axis=0)
    if no_action.any():  # cannot happen (every state comes from a row or is terminal); kept as a guard
        raise DataError(f"state {state_labels[int(np.flatnonzero(no_action)[0])]!r} has no action")
    return MDP(state_labels, action_labels, P, Rw, R, avail, terminal)


class Sampler:
    """Vectorised draws of ``(s', r)`` for many ``(s, a)`` pairs at once, from the CSR rows."""

    def __init__(self, mdp: MDP):
        P = mdp.P
        self.S = mdp.n_states
        self.indptr = P.indptr
        self.indices = P.indices
        self.rdata = mdp.Rw.data
        self.cum = np.cumsum(P.data)
        cum0 = np.concatenate([[0.0], self.cum])
        self.base = cum0[P.indptr[:-1]]
        self.total = cum0[P.indptr[1:]] - self.base

    def draw(self, s: np.ndarray, a: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        row = a * self.S + s
        target = self.base[row] + rng.random(len(row)) * self.total[row]
        j = np.searchsorted(self.cum, target, side="right")
        j = np.minimum(np.maximum(j, self.indptr[row]), self.indptr[row + 1] - 1)
        return self.indices[j], self.rdata[j]


# ------------------------------------------------------------------------------------------------
# dynamic programming
# ------------------------------------------------------------------------------------------------
def greedy(Q: np.ndarray, avail: np.ndarray) -> np.ndarray:
    """Greedy action per state (first maximiser); -1 where no action exists.  ``Q``: (A, S)."""
    pol = np.argmax(np.where(avail, Q, -np.inf), axis=0)
    return np.where(avail.any(axis=0), pol, -1)


def state_values(Q: np.ndarray, avail: np.ndarray) -> np.ndarray:
    has = avail.any(axis=0)
    return np.where(has, np.max(np.where(avail, Q, -np.inf), axis=0, initial=-np.inf), 0.0)


def evaluate_policy_linear(mdp: MDP, policy: np.ndarray, gamma: float) -> np.ndarray | None:
    """``V^pi`` by the sparse solve of ``(I - gamma P_pi) V = r_pi``; None when singular ([da Silva Neto §4])."""
    import warnings

    from scipy.sparse.linalg import MatrixRankWarning, spsolve

    P_pi, r_pi = mdp.policy_matrix(policy)
    M = (sp.identity(mdp.n_states, format="csc") - gamma * P_pi.tocsc()).tocsc()
    with warnings.catch_warnings():
        warnings.simplefilter("error", MatrixRankWarning)
        try:
            V = spsolve(M, r_pi)
        except (MatrixRankWarning, RuntimeError):
            return None
    V = np.atleast_1d(np.asarray(V, dtype=np.float64))
    if not np.isfinite(V).all():
        return None
    scale = 1.0 + float(np.max(np.abs(r_pi), initial=0.0))
    if np.max(np.abs(M @ V - r_pi), initial=0.0) > 1e-8 * scale * (1.0 + np.max(np.abs(V), initial=0.0)) \
            or np.max(np.abs(V), initial=0.0) > 1e12 * scale:
        return None  # numerically singular: an improper policy under gamma = 1
    return V


def proper_policy(mdp: MDP) -> np.ndarray:
    """A policy that reaches a terminal state with probability 1 from every state that can reach one.

    Grows the set of states that reach a terminal: a state joins with an action that moves into the set with
    positive probability, so following the policy gets closer with positive probability at every step.  States
    that cannot reach a terminal keep their first action.  (Policy iteration with gamma = 1 needs a proper start.)
    """
    S = mdp.n_states
    has = mdp.avail.any(axis=0)
    pol = np.where(has, np.argmax(mdp.avail, axis=0), -1)
    reach = mdp.terminal.copy()
    while True:
        hit = ((mdp.P @ reach.astype(np.float64)) > 0).reshape(mdp.n_actions, S) & mdp.avail
        new = hit.any(axis=0) & ~reach
        if not new.any():
            return pol
        pol[new] = np.argmax(hit[:, new], axis=0)
        reach |= new


def evaluate_policy_iterative(mdp: MDP, policy: np.ndarray, gamma: float, *, tol: float, max_iter: int,
                              V0: np.ndarray | None = None) -> np.ndarray:
    """``V^pi`` by repeated backups ``V <- r_pi + gamma P_pi V`` (large state spaces; gamma = 1 with terminals)."""
    P_pi, r_pi = mdp.policy_matrix(policy)
    V = np.zeros(mdp.n_states) if V0 is None else V0.copy()
    for _ in range(max_iter):
        V_new = r_pi + gamma * (P_pi @ V)
        if np.max(np.abs(V_new - V), initial=0.0) < tol:
            return V_new
        V = V_new
    return V


def evaluate_policy(mdp: MDP, policy: np.ndarray, gamma: float, horizon=None, *, tol=1e-10,
                    max_iter=100_000) -> np.ndarray:
    """Exact ``V^pi`` of a stationary deterministic policy (linear solve; backups when singular or finite horizon)."""
    if horizon is not None:
        P_pi, r_pi = mdp.policy_matrix(policy)
        V = np.zeros(mdp.n_states)
        for _ in range(horizon):
            V = r_pi + gamma * (P_pi @ V)
        return V
    V = evaluate_policy_linear(mdp, policy, gamma) if mdp.n_states <= 50_000 else None
    if V is None:
        V = evaluate_policy_iterative(mdp, policy, gamma, tol=tol, max_iter=max_iter)
    return V


def solve_optimal(mdp: MDP, gamma: float, horizon=None, *, tol=1e-10, max_iter=100_000) -> np.ndarray:
    """Optimal ``Q*`` (A, S) by value iteration (backward induction for a finite horizon): a reference."""
    V = np.zeros(mdp.n_states)
    n = horizon if horizon is not None else max_iter
    Q = mdp.q_values(V, gamma)
    for _ in range(n):
        Q = mdp.q_values(V, gamma)
        V_new = state_values(Q, mdp.avail)
        if horizon is None and np.max(np.abs(V_new - V), initial=0.0) < tol:
            V = V_new
            Q = mdp.q_values(V, gamma)
            break
        V = V_new
    return Q


def align(mdp: MDP, states: list, actions: list) -> tuple[np.ndarray, np.ndarray]:
    """Index of each of the model's ``states``/``actions`` in ``mdp`` (-1 where the table lacks it)."""
    si, ai = LabelIndex(mdp.states), LabelIndex(mdp.actions)
    return (np.array([si.get(s) for s in states], dtype=np.intp),
            np.array([ai.get(a) for a in actions], dtype=np.intp))
