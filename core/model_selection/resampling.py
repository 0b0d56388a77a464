"""Bootstrap estimates: out-of-bag / .632 metric estimate and bias-variance decomposition.

[Passerini §16.1.1]: a bootstrap sample draws N of the N instances with
replacement; about 1/e = 36.8% are left out ("out of bag") and estimate the model's
test performance.  [da Silva Neto §1.6] / [Passerini §4]: expected squared error decomposes as
bias^2 + variance (+ noise), estimated here by refitting on bootstrap samples.
"""

from __future__ import annotations

import numpy as np

from ..base import clone
from ..context import NULL_CONTEXT, FitContext
from ..params import ParamError
from ..random import check_random_state
from ..validation import DataError, column_or_1d
from .scoring import check_scoring
from .split import bootstrap_indices, train_test_split_indices
from .validation import as_array, is_classifier

__all__ = ["bootstrap_estimate", "bias_variance_decomposition"]


def bootstrap_estimate(
    estimator,
    X,
    y,
    *,
    n_bootstrap: int = 50,
    scoring: str | None = None,
    random_state=None,
    confidence: float = 0.95,
    ctx: FitContext = NULL_CONTEXT,
) -> dict:
    """Out-of-bag bootstrap estimate of a metric (and Efron's .632 estimate).

    For b = 1..B: fit on a bootstrap sample, score on its out-of-bag rows (the
    resubstitution score on the sample is kept too).  ``oob_mean`` is the mean OOB score,
    ``estimate_632 = 0.368 * train_mean + 0.632 * oob_mean``; ``interval`` is the
    percentile interval of the OOB scores at ``confidence``.  Rounds with an empty OOB
    set or a failed fit (e.g. a one-class sample) are skipped and counted in ``n_skipped``.
    """
    B = int(n_bootstrap)
    if B < 2:
        raise ParamError("n_bootstrap", "must be at least 2")
    if not 0 < confidence < 1:
        raise ParamError("confidence", "must be in (0, 1)")
    X = as_array(X)
    y = column_or_1d(y)
    n = X.shape[0]
    if n != y.shape[0]:
        raise DataError(f"X has {n} samples but y has {y.shape[0]}")
    scorer = check_scoring(estimator, scoring)[0]
    rng = check_random_state(random_state)
    oob_scores, train_scores = [], []
    skipped = 0
    for b in range(B):
        idx, oob = bootstrap_indices(n, rng)
        if oob.size == 0:
            skipped += 1
            ctx.step(b + 1, B)
            continue
        est = clone(estimator)
        if "random_state" in getattr(est, "params", {}):
            est.set_params(random_state=int(rng.integers(0, 2**31 - 1)))
        try:
            est.fit(X[idx], y[idx], ctx=ctx.child(b / B, (b + 1) / B))
            s_oob = float(scorer(est, X[oob], y[oob]))
            s_train = float(scorer(est, X[idx], y[idx]))
        except DataError:
            skipped += 1
            ctx.step(b + 1, B)
            continue
        oob_scores.append(s_oob)
        train_scores.append(s_train)
        ctx.step(b + 1, B, **{scorer.name: s_oob})
    if not oob_scores:
        raise DataError("every bootstrap round failed or had no out-of-bag rows")
    oob = np.asarray(oob_scores)
    tr = np.asarray(train_scores)
    q = (1 - confidence) / 2
    return {
        "metric": scorer.name,
        "greater_is_better": scorer.greater_is_better,
        "n_bootstrap": B,
        "n_skipped": skipped,
        "oob_scores": oob.tolist(),
        "oob_mean": float(oob.mean()),
        "oob_std": float(oob.std(ddof=1)) if oob.size > 1 else 0.0,
        "train_mean": float(tr.mean()),
        "estimate_632": float(0.368 * tr.mean() + 0.632 * oob.mean()),
        "interval": [float(np.quantile(oob, q)), float(np.quantile(oob, 1 - q))],
        "confidence": confidence,
    }


def bias_variance_decomposition(
    estimator,
    X,
    y,
    *,
    X_test=None,
    y_test=None,
    test_size: float = 0.3,
    n_rounds: int = 30,
    random_state=None,
    ctx: FitContext = NULL_CONTEXT,
) -> dict:
    """Bootstrap bias-variance decomposition of the expected loss on a test set.

    The estimator is refitted on ``n_rounds`` bootstrap samples of the training set and
    predicts the test set (given, or a ``test_size`` hold-out of ``X, y``):
    ``P[r, i] = f_r(x_i)``, main prediction ``m_i = mean_r P[r, i]``.

    Regression (squared loss): ``expected_loss = mean_{r,i} (P - y)^2``,
    ``bias_squared = mean_i (m_i - y_i)^2``, ``variance = mean_{i} mean_r (P - m)^2``, so
    ``expected_loss = bias_squared + variance`` exactly (the noise term is folded into
    the bias, since the true regression function is unknown).

    Classification (0-1 loss, Domingos 2000): ``m_i`` = the most frequent prediction,
    ``bias = mean_i 1[m_i != y_i]``, ``variance = mean_{r,i} 1[P != m_i]``,
    ``expected_loss = mean_{r,i} 1[P != y_i]`` (no additive identity).
    """
    R = int(n_rounds)
    if R < 2:
        raise ParamError("n_rounds", "must be at least 2")
    X = as_array(X)
    y = column_or_1d(y)
    rng = check_random_state(random_state)
    if X_test is None:
        strat = y if is_classifier(estimator) else None
        tr, te = train_test_split_indices(
            X.shape[0], test_size, stratify=strat, random_state=int(rng.integers(0, 2**31 - 1))
        )
        X_train, y_train, X_test, y_test = X[tr], y[tr], X[te], y[te]
    else:
        if y_test is None:
            raise DataError("y_test is required with X_test")
        X_train, y_train = X, y
        X_test = as_array(X_test)
        y_test = column_or_1d(y_test)
    n = X_train.shape[0]
    classification = is_classifier(estimator)
    preds = []
    for r in range(R):
        idx, _ = bootstrap_indices(n, rng)
        est = clone(estimator)
        if "random_state" in getattr(est, "params", {}):
            est.set_params(random_state=int(rng.integers(0, 2**31 - 1)))
        try:
            est.fit(X_train[idx], y_train[idx], ctx=ctx.child(r / R, (r + 1) / R))
        except DataError:
            ctx.step(r + 1, R)
            continue
        preds.append(np.asarray(est.predict(X_test)))
        ctx.step(r + 1, R)
    if len(preds) < 2:
        raise DataError("fewer than two bootstrap fits succeeded")
    P = np.stack(preds)
    out = {
        "loss": "0-1" if classification else "squared",
        "n_rounds": R,
        "n_used": int(P.shape[0]),
        "n_test": int(len(y_test)),
    }
    if classification:
        main = []
        for i in range(P.shape[1]):
            vals, counts = np.unique(P[:, i], return_counts=True)
            main.append(vals[np.argmax(counts)])
        main = np.asarray(main, dtype=P.dtype)
        out["expected_loss"] = float(np.mean(P != y_test[None, :]))
        out["bias"] = float(np.mean(main != y_test))
        out["variance"] = float(np.mean(P != main[None, :]))
        return out
    P = P.astype(np.float64)
    yt = y_test.astype(np.float64)
    m = P.mean(axis=0)
    out["expected_loss"] = float(np.mean((P - yt[None, :]) ** 2))
    out["bias_squared"] = float(np.mean((m - yt) ** 2))
    out["variance"] = float(np.mean((P - m[None, :]) ** 2))
    return out
