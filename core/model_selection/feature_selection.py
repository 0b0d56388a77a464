"""Forward and backward sequential feature selection (wrapper methods).

[da Silva Neto §1.6.4]: start from the empty set, repeatedly add the single
feature that most improves held-out performance, stop when adding a feature hurts.
[Colombo §3.3.2] describes best-subset search, which costs 2^M fits; the
greedy forward/backward stepwise versions here cost O(M^2) CV runs.  Held-out
performance is the k-fold CV mean of ``scoring`` on the SAME folds for every subset.
"""

from __future__ import annotations

import numpy as np

from ..context import NULL_CONTEXT, FitContext
from ..params import ParamError
from ..validation import DataError, check_categorical_features
from .scoring import check_scoring
from .validation import as_array, cross_validate, shared_folds

__all__ = ["sequential_feature_selection"]


def sequential_feature_selection(
    estimator,
    X,
    y,
    *,
    direction: str = "forward",
    n_features: int | str = "auto",
    tol: float = 0.0,
    cv=5,
    scoring: str | None = None,
    stratify: bool = True,
    shuffle: bool = True,
    random_state=None,
    feature_names=None,
    fit_params: dict | None = None,
    ctx: FitContext = NULL_CONTEXT,
) -> dict:
    """Greedy stepwise feature selection by cross-validated score.

    ``direction``: "forward" (start empty, add) or "backward" (start full, remove).
    ``n_features``: the number of features to end with, or "auto": forward stops when the
    best addition does not improve the score by more than ``tol`` (the notes' "stop
    when adding a feature hurts"); backward stops when every removal lowers the score by
    more than ``tol``.  The forward start (no feature) scores as -inf, so at least one
    feature is selected.

    Returns ``{"direction", "metric", "greater_is_better", "selected": [column indices in
    selection order], "support": [bool per column], "selected_names"?, "score": CV score of
    the selected set, "history": [{"step", "action": "add"|"remove", "feature", "name"?,
    "score", "n_features", "candidates": {feature: score}}]}``.
    """
    if direction not in ("forward", "backward"):
        raise ParamError("direction", "must be 'forward' or 'backward'")
    X = as_array(X)
    if X.ndim != 2 or X.shape[1] < 1:
        raise DataError("X must be 2-dimensional with at least one feature")
    M = X.shape[1]
    if n_features != "auto":
        if not isinstance(n_features, (int, np.integer)) or not 1 <= int(n_features) <= M:
            raise ParamError("n_features", f"must be 'auto' or an integer in [1, {M}]")
        n_features = int(n_features)
    names = None if feature_names is None else [str(n) for n in feature_names]
    if names is not None and len(names) != M:
        raise DataError(f"feature_names has {len(names)} entries but X has {M} columns")
    scorer = check_scoring(estimator, scoring)[0]
    sign = scorer.sign()
    folds = shared_folds(cv, X, y, estimator, stratify=stratify, shuffle=shuffle, random_state=random_state)

    def cv_score(cols: list[int], sub_ctx: FitContext) -> float:
        cols = sorted(cols)
        res = cross_validate(
            estimator,
            X[:, cols],
            y,
            cv=folds,
            scoring=[scorer.name],
            fit_params=_subset_fit_params(fit_params, cols, M),
            ctx=sub_ctx,
        )
        return float(res["mean"][scorer.name])

    forward = direction == "forward"
    current: list[int] = [] if forward else list(range(M))
    # progress: the worst case is M + (M-1) + ... evaluations
    total_evals = M * (M + 1) // 2 + (0 if forward else 1)
    done = 0
    if forward:
        current_score = -np.inf  # in "sign * score" units
    else:
        current_score = sign * cv_score(current, ctx.child(0, 1 / total_evals))
        done += 1
    history = []
    target = n_features
    step = 0
    while True:
        if forward and (len(current) == M or (target != "auto" and len(current) >= target)):
            break
        if not forward and (len(current) == 1 or (target != "auto" and len(current) <= target)):
            break
        pool = [j for j in range(M) if j not in current] if forward else list(current)
        cand_scores = {}
        for j in pool:
            cols = current + [j] if forward else [c for c in current if c != j]
            cand_scores[j] = cv_score(cols, ctx.child(done / total_evals, (done + 1) / total_evals))
            done += 1
            ctx.step(done, total_evals)
        # best candidate: highest signed score; ties -> lowest column index
        best_j = min(
            pool, key=lambda j: (-(sign * cand_scores[j]) if np.isfinite(cand_scores[j]) else np.inf, j)
        )
        best = sign * cand_scores[best_j]
        if target == "auto":
            if forward and not best > current_score + tol:
                break
            if not forward and best < current_score - tol:
                break
        step += 1
        if forward:
            current.append(best_j)
        else:
            current.remove(best_j)
        current_score = best
        entry = {
            "step": step,
            "action": "add" if forward else "remove",
            "feature": int(best_j),
            "score": float(cand_scores[best_j]),
            "n_features": len(current),
            "candidates": {int(j): float(s) for j, s in cand_scores.items()},
        }
        if names is not None:
            entry["name"] = names[best_j]
        history.append(entry)
    ctx.step(1, 1)
    support = np.zeros(M, dtype=bool)
    support[current] = True
    out = {
        "direction": direction,
        "metric": scorer.name,
        "greater_is_better": scorer.greater_is_better,
        "selected": [int(j) for j in current],
        "support": support.tolist(),
        "score": float(sign * current_score) if np.isfinite(current_score) else None,
        "history": history,
    }
    if names is not None:
        out["selected_names"] = [names[j] for j in current]
    return out


def _subset_fit_params(fit_params: dict | None, cols: list[int], M: int) -> dict | None:
    """Remap ``categorical_features`` (bool mask or column indices) to the selected columns."""
    if not fit_params or fit_params.get("categorical_features") is None:
        return fit_params
    mask = check_categorical_features(fit_params["categorical_features"], M)
    return {**fit_params, "categorical_features": mask[cols]}
