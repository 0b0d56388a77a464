"""Cross-validation, the paired t-test over shared folds, learning curves.

[Passerini §4]: k-fold estimate ``S = (1/k) sum_i S_i``
with ``Var(S) ~ 1/(k(k-1)) sum_i (S_i - S)^2``; two algorithms are compared on the
same folds with a paired t-test on the per-fold differences (k-1 degrees of freedom).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence

import numpy as np

from ..base import clone
from ..context import NULL_CONTEXT, FitContext
from ..params import ParamError
from ..random import check_random_state
from ..validation import DataError, column_or_1d
from .scoring import Scorer, check_scoring
from .split import KFold, StratifiedKFold

__all__ = [
    "check_cv",
    "cross_validate",
    "paired_ttest",
    "compare_estimators",
    "learning_curve",
    "summarize_scores",
    "is_classifier",
    "as_array",
]


class FixedSplits:
    """A splitter replaying a fixed list of ``(train, test)`` index pairs."""

    def __init__(self, folds):
        self.folds = [(np.asarray(tr, dtype=np.intp), np.asarray(te, dtype=np.intp)) for tr, te in folds]
        self.n_splits = len(self.folds)

    def split(self, X=None, y=None):
        yield from self.folds


def is_classifier(est) -> bool:
    """Whether ``est`` is a classifier (its ``task``), which decides stratified folds and the default scorer."""
    return getattr(est, "task", "") == "classification"


def check_cv(
    cv, X, y=None, *, classifier: bool = False, stratify: bool = True, shuffle: bool = True, random_state=None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Materialise the folds: ``cv`` is an int (k), a splitter with ``split(X, y)``, or a list of folds.

    An int gives a stratified k-fold for classifiers when ``stratify`` (shuffled with
    ``random_state`` when ``shuffle``), else a k-fold.
    """
    if isinstance(cv, (int, np.integer)) and not isinstance(cv, bool):
        k = int(cv)
        if k < 2:
            raise ParamError("cv", "the number of folds must be at least 2")
        rs = random_state if shuffle else None
        if classifier and stratify and y is not None:
            y = column_or_1d(y)
            splitter = StratifiedKFold(k, shuffle=shuffle, random_state=rs)
        else:
            splitter = KFold(k, shuffle=shuffle, random_state=rs)
        return list(splitter.split(X, y))
    if hasattr(cv, "split") and not isinstance(cv, (str, bytes)):
        return [(np.asarray(tr), np.asarray(te)) for tr, te in cv.split(X, y)]
    if isinstance(cv, Sequence) and not isinstance(cv, (str, bytes)):
        return FixedSplits(cv).folds
    raise ParamError("cv", f"expected an int, a splitter with split(X, y) or a list of folds, got {cv!r}")


def shared_folds(cv, X, y, estimator, *, stratify: bool, shuffle: bool, random_state) -> FixedSplits:
    """The folds every candidate (or both sides of a comparison) is scored on, drawn once.

    Shuffling without ``random_state`` draws one seed here, so all candidates still see the same splits.
    """
    if random_state is None and shuffle:
        random_state = int(check_random_state(None).integers(0, 2**31 - 1))
    return FixedSplits(
        check_cv(
            cv, X, y, classifier=is_classifier(estimator), stratify=stratify, shuffle=shuffle, random_state=random_state
        )
    )


def _fold_fit_params(fit_params: dict | None, train: np.ndarray, n: int) -> dict:
    if not fit_params:
        return {}
    out = dict(fit_params)
    sw = out.get("sample_weight")
    if sw is not None:
        sw = np.asarray(sw)
        if sw.ndim != 1 or sw.shape[0] != n:
            raise DataError(f"sample_weight has shape {sw.shape}, expected ({n},)")
        out["sample_weight"] = sw[train]
    return out


def summarize_scores(values) -> dict:
    """``mean``, sample ``std`` (ddof=1) and ``sem = sqrt(1/(k(k-1)) sum (S_i - S)^2)`` ([Passerini §4 (k-fold CV)])."""
    v = np.asarray(values, dtype=np.float64)
    ok = v[~np.isnan(v)]
    k = ok.size
    mean = float(ok.mean()) if k else float("nan")
    std = float(ok.std(ddof=1)) if k > 1 else (0.0 if k == 1 else float("nan"))
    sem = std / math.sqrt(k) if k > 1 else float("nan")
    return {"mean": mean, "std": std, "sem": sem}


def as_array(X):
    """``X`` as a NumPy array, without copying one (the search and resampling helpers index it by fold)."""
    return X if isinstance(X, np.ndarray) else np.asarray(X)


def cross_validate(
    estimator,
    X,
    y=None,
    *,
    cv=5,
    stratify: bool = True,
    shuffle: bool = True,
    scoring=None,
    random_state=None,
    fit_params: dict | None = None,
    return_train_score: bool = False,
    return_estimators: bool = False,
    ctx: FitContext = NULL_CONTEXT,
) -> dict:
    """k-fold cross-validation of a fresh clone of ``estimator`` per fold.

    ``scoring``: a name or list of names from ``core.model_selection.scoring.SCORERS``
    (default: accuracy for classifiers, r2 for regressors).  ``fit_params`` go to every
    ``fit`` (``sample_weight`` is sliced to the training fold).  Progress: one
    ``ctx.step(fold + 1, k)`` per fold; each fold's fit runs under ``ctx.child``.

    Returns ``{"n_splits", "scoring", "greater_is_better": {name: bool},
    "folds": [{"fold", "n_train", "n_test", "fit_time", "score_time", "test": {name: v},
    "train"?: {...}}], "scores": {name: [per fold]}, "mean": {name}, "std": {name}
    (ddof=1), "sem": {name}}`` (+ ``"train_scores"``, ``"train_mean"`` and
    ``"estimators"`` when asked).
    """
    X = as_array(X)
    scorers = check_scoring(estimator, scoring)
    folds = check_cv(
        cv,
        X,
        y,
        classifier=is_classifier(estimator),
        stratify=stratify,
        shuffle=shuffle,
        random_state=random_state,
    )
    k = len(folds)
    n = X.shape[0]
    y_arr = None if y is None else column_or_1d(y)
    fold_rows = []
    estimators = []
    for i, (train, test) in enumerate(folds):
        est = clone(estimator)
        fp = _fold_fit_params(fit_params, train, n)
        t0 = time.perf_counter()
        est.fit(X[train], None if y_arr is None else y_arr[train], ctx=ctx.child(i / k, (i + 1) / k), **fp)
        t1 = time.perf_counter()
        test_scores = {s.name: float(s(est, X[test], y_arr[test])) for s in scorers}
        t2 = time.perf_counter()
        row = {
            "fold": i,
            "n_train": int(len(train)),
            "n_test": int(len(test)),
            "fit_time": t1 - t0,
            "score_time": t2 - t1,
            "test": test_scores,
        }
        if return_train_score:
            row["train"] = {s.name: float(s(est, X[train], y_arr[train])) for s in scorers}
        fold_rows.append(row)
        if return_estimators:
            estimators.append(est)
        ctx.step(i + 1, k, fold=i, **{s.name: test_scores[s.name] for s in scorers})
    names = [s.name for s in scorers]
    scores = {nm: [r["test"][nm] for r in fold_rows] for nm in names}
    summary = {nm: summarize_scores(scores[nm]) for nm in names}
    out = {
        "n_splits": k,
        "scoring": names,
        "greater_is_better": {s.name: s.greater_is_better for s in scorers},
        "folds": fold_rows,
        "scores": scores,
        "mean": {nm: summary[nm]["mean"] for nm in names},
        "std": {nm: summary[nm]["std"] for nm in names},
        "sem": {nm: summary[nm]["sem"] for nm in names},
    }
    if return_train_score:
        out["train_scores"] = {nm: [r["train"][nm] for r in fold_rows] for nm in names}
        out["train_mean"] = {nm: float(np.mean(out["train_scores"][nm])) for nm in names}
    if return_estimators:
        out["estimators"] = estimators
    return out


def paired_ttest(scores_a, scores_b, alpha: float = 0.05, *, greater_is_better: bool = True) -> dict:
    """Paired t-test on per-fold scores of two algorithms ([Passerini §4.5, eq. 4.7-4.8]).

    ``delta_i = a_i - b_i``, ``mean = (1/k) sum delta_i``,
    ``Var = 1/(k(k-1)) sum (delta_i - mean)^2``, ``T = mean / sqrt(Var)`` with ``k-1``
    degrees of freedom; two-sided ``p = 2 sf(|T|)`` from ``scipy.stats.t``; H0 (equal
    performance) is rejected when ``|T| > t_{1-alpha/2, k-1}`` (equivalently ``p < alpha``).
    Identical differences (up to 1e-12 relative) give T = 0, p = 1 when they are all zero, else
    T = +-inf, p = 0.  ``verdict``: "a_better", "b_better" or "no_significant_difference"
    (which side is better uses ``greater_is_better``).
    """
    a = np.asarray(scores_a, dtype=np.float64).ravel()
    b = np.asarray(scores_b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise DataError(f"the two score lists differ in length ({a.size} vs {b.size}); they must share folds")
    k = a.size
    if k < 2:
        raise DataError("a paired t-test needs at least 2 paired scores")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise DataError("scores must be finite")
    if not 0.0 < alpha < 1.0:
        raise ParamError("alpha", "must be in (0, 1)")
    from scipy import stats  # imported here: scipy.stats costs ~0.5 s of start-up and only this test needs it

    d = a - b
    mean = float(d.mean())
    var = float(((d - mean) ** 2).sum() / (k * (k - 1)))
    df = k - 1
    # differences equal up to rounding (e.g. a constant shift) count as identical
    if var > 0 and np.ptp(d) > 1e-12 * max(float(np.abs(d).max()), 1e-300):
        t = mean / math.sqrt(var)
        p = float(2.0 * stats.t.sf(abs(t), df))
    elif mean == 0:
        t, p, var = 0.0, 1.0, 0.0
    else:
        t, p, var = math.copysign(math.inf, mean), 0.0, 0.0
    crit = float(stats.t.ppf(1.0 - alpha / 2.0, df))
    reject = bool(abs(t) > crit)
    if not reject:
        verdict = "no_significant_difference"
    else:
        a_higher = mean > 0
        verdict = "a_better" if a_higher == bool(greater_is_better) else "b_better"
    return {
        "k": k,
        "differences": d.tolist(),
        "mean_difference": mean,
        "std_error": math.sqrt(var),
        "statistic": float(t),
        "df": df,
        "p_value": p,
        "alpha": float(alpha),
        "critical_value": crit,
        "reject_null": reject,
        "verdict": verdict,
    }


def compare_estimators(
    est_a,
    est_b,
    X,
    y,
    *,
    cv=5,
    metric: str | None = None,
    alpha: float = 0.05,
    stratify: bool = True,
    shuffle: bool = True,
    random_state=None,
    fit_params: dict | None = None,
    ctx: FitContext = NULL_CONTEXT,
) -> dict:
    """Cross-validate two estimators on the SAME folds and run ``paired_ttest`` on ``metric``.

    Returns ``{"metric", "greater_is_better", "a": {"scores", "mean", "std"},
    "b": {...}, "test": paired_ttest(...)}``.
    """
    X = as_array(X)
    scorer: Scorer = check_scoring(est_a, metric)[0]
    check_scoring(est_b, scorer.name)
    folds = shared_folds(cv, X, y, est_a, stratify=stratify, shuffle=shuffle, random_state=random_state)
    res = []
    for j, est in enumerate((est_a, est_b)):
        r = cross_validate(
            est,
            X,
            y,
            cv=folds,
            scoring=[scorer.name],
            fit_params=fit_params,
            ctx=ctx.child(j / 2, (j + 1) / 2),
        )
        res.append(
            {"scores": r["scores"][scorer.name], "mean": r["mean"][scorer.name], "std": r["std"][scorer.name]}
        )
    test = paired_ttest(res[0]["scores"], res[1]["scores"], alpha, greater_is_better=scorer.greater_is_better)
    return {
        "metric": scorer.name,
        "greater_is_better": scorer.greater_is_better,
        "n_splits": folds.n_splits,
        "a": res[0],
        "b": res[1],
        "test": test,
    }


def learning_curve(
    estimator,
    X,
    y,
    *,
    train_sizes=(0.1, 0.325, 0.55, 0.775, 1.0),
    cv=5,
    scoring: str | None = None,
    stratify: bool = True,
    shuffle: bool = True,
    random_state=None,
    fit_params: dict | None = None,
    ctx: FitContext = NULL_CONTEXT,
) -> dict:
    """Train and validation score against the number of training samples.

    ``train_sizes``: fractions in (0, 1] of the largest training fold, or absolute
    counts (ints).  For each fold, the first ``m`` of a random permutation of its
    training indices are used (the permutation is fixed per fold, so the subsets are
    nested).  A fit that fails on a small subset (e.g. one class only) scores nan.
    Returns ``{"metric", "greater_is_better", "train_sizes", "train_scores", "test_scores"
    (lists per size, per fold), "train_mean", "train_std", "test_mean", "test_std"}``.
    """
    X = as_array(X)
    scorer = check_scoring(estimator, scoring)[0]
    y_arr = column_or_1d(y)
    folds = check_cv(
        cv,
        X,
        y_arr,
        classifier=is_classifier(estimator),
        stratify=stratify,
        shuffle=shuffle,
        random_state=random_state,
    )
    max_train = min(len(tr) for tr, _ in folds)
    sizes = np.asarray(train_sizes)
    if sizes.dtype.kind == "f":
        if (sizes <= 0).any() or (sizes > 1).any():
            raise ParamError("train_sizes", "fractions must be in (0, 1]")
        abs_sizes = np.maximum(1, np.floor(sizes * max_train).astype(int))
    else:
        abs_sizes = sizes.astype(int)
        if (abs_sizes < 1).any() or (abs_sizes > max_train).any():
            raise ParamError("train_sizes", f"counts must be in [1, {max_train}]")
    abs_sizes = np.unique(abs_sizes)
    rng = check_random_state(random_state)
    perms = [rng.permutation(tr) for tr, _ in folds]
    n_sizes, k = len(abs_sizes), len(folds)
    train_scores = np.full((n_sizes, k), np.nan)
    test_scores = np.full((n_sizes, k), np.nan)
    total = n_sizes * k
    for si, m in enumerate(abs_sizes):
        for fi, (perm, (_, test)) in enumerate(zip(perms, folds, strict=True)):
            sub = perm[:m]
            done = si * k + fi
            est = clone(estimator)
            try:
                est.fit(
                    X[sub],
                    y_arr[sub],
                    ctx=ctx.child(done / total, (done + 1) / total),
                    **_fold_fit_params(fit_params, sub, X.shape[0]),
                )
            except DataError:
                ctx.step(done + 1, total)
                continue
            train_scores[si, fi] = scorer(est, X[sub], y_arr[sub])
            test_scores[si, fi] = scorer(est, X[test], y_arr[test])
            ctx.step(done + 1, total, train_size=int(m))

    def _nan(v):
        return [None if not np.isfinite(x) else float(x) for x in v]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-nan rows (every fit failed)
        out = {
            "metric": scorer.name,
            "greater_is_better": scorer.greater_is_better,
            "train_sizes": abs_sizes.tolist(),
            "train_scores": [_nan(r) for r in train_scores],
            "test_scores": [_nan(r) for r in test_scores],
            "train_mean": _nan(np.nanmean(train_scores, axis=1)),
            "train_std": _nan(np.nanstd(train_scores, axis=1)),
            "test_mean": _nan(np.nanmean(test_scores, axis=1)),
            "test_std": _nan(np.nanstd(test_scores, axis=1)),
        }
    return out
