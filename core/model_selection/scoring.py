"""Named scorers used by cross-validation, search and feature selection.

A scorer returns the metric's own value (log_loss, mse, rmse and mae are
losses, reported as positive numbers); ``greater_is_better`` tells the ranking
which way is better (scikit-learn negates losses instead: ``neg_log_loss``...;
the ``neg_*`` spellings are accepted as aliases and mean the same metric).
"""

from __future__ import annotations

import numpy as np

from .. import metrics as M
from ..params import ParamError

__all__ = ["Scorer", "SCORERS", "get_scorer", "check_scoring", "default_scoring"]


class Scorer:
    """``scorer(estimator, X, y) -> float`` for one named metric."""

    def __init__(self, name: str, task: str, greater_is_better: bool, needs: str):
        self.name = name
        self.task = task
        self.greater_is_better = greater_is_better
        self.needs = needs  # "predict" | "proba"

    def __call__(self, est, X, y) -> float:
        if self.needs == "proba":
            if not callable(getattr(est, "predict_proba", None)):
                raise ParamError(
                    "scoring",
                    f"'{self.name}' needs predict_proba, which {type(est).__name__} does not provide",
                )
            return _score_proba(self.name, est.predict_proba(X), y, est.classes_)
        return _score_pred(self.name, est.predict(X), y)

    def sign(self) -> float:
        """+1 when greater is better, -1 otherwise (rank by ``sign * value``, descending)."""
        return 1.0 if self.greater_is_better else -1.0

    def __repr__(self) -> str:
        return f"Scorer({self.name!r})"

    def __reduce__(self):
        return (get_scorer, (self.name,))


def _score_pred(name, pred, y) -> float:
    if name == "accuracy":
        return M.accuracy_score(y, pred)
    if name == "balanced_accuracy":
        return M.balanced_accuracy_score(y, pred)
    if name.startswith(("f1_", "precision_", "recall_")):
        kind, avg = name.split("_")
        i = {"precision": 0, "recall": 1, "f1": 2}[kind]
        return M.precision_recall_fscore_support(y, pred, average=avg, zero_division=0.0)[i]
    if name == "r2":
        return M.r2_score(y, pred)
    if name == "mse":
        return M.mean_squared_error(y, pred)
    if name == "rmse":
        return M.root_mean_squared_error(y, pred)
    if name == "mae":
        return M.mean_absolute_error(y, pred)
    raise ParamError("scoring", f"unknown scoring '{name}'")  # pragma: no cover


def _score_proba(name, proba, y, classes) -> float:
    classes = np.asarray(classes)
    if name == "log_loss":
        return M.log_loss(y, proba, labels=classes)
    if name == "roc_auc":
        if len(classes) == 2:
            return M.roc_auc_score(np.asarray(y) == classes[1], proba[:, 1])
        return M.roc_auc_score(y, proba, labels=classes)
    raise ParamError("scoring", f"unknown scoring '{name}'")  # pragma: no cover


SCORERS: dict[str, Scorer] = {
    s.name: s
    for s in [
        Scorer("accuracy", "classification", True, "predict"),
        Scorer("balanced_accuracy", "classification", True, "predict"),
        Scorer("f1_macro", "classification", True, "predict"),
        Scorer("f1_micro", "classification", True, "predict"),
        Scorer("f1_weighted", "classification", True, "predict"),
        Scorer("precision_macro", "classification", True, "predict"),
        Scorer("recall_macro", "classification", True, "predict"),
        Scorer("log_loss", "classification", False, "proba"),
        Scorer("roc_auc", "classification", True, "proba"),
        Scorer("r2", "regression", True, "predict"),
        Scorer("mse", "regression", False, "predict"),
        Scorer("rmse", "regression", False, "predict"),
        Scorer("mae", "regression", False, "predict"),
    ]
}
_ALIASES = {
    "neg_log_loss": "log_loss",
    "neg_mean_squared_error": "mse",
    "neg_root_mean_squared_error": "rmse",
    "neg_mean_absolute_error": "mae",
    "f1": "f1_macro",
}


def get_scorer(name: str) -> Scorer:
    """The scorer called ``name`` (ParamError 'scoring' listing the valid names otherwise)."""
    key = _ALIASES.get(name, name)
    if key not in SCORERS:
        raise ParamError("scoring", f"unknown scoring '{name}'; valid: {sorted(SCORERS)}")
    return SCORERS[key]


def default_scoring(estimator) -> list[str]:
    return ["r2"] if getattr(estimator, "task", "") == "regression" else ["accuracy"]


def check_scoring(estimator, scoring) -> list[Scorer]:
    """Scorers for ``scoring`` (a name, a list of names, or None = the task's default)."""
    if scoring is None:
        names = default_scoring(estimator)
    elif isinstance(scoring, str):
        names = [scoring]
    else:
        names = list(scoring)
    if not names:
        raise ParamError("scoring", "at least one scoring name is required")
    scorers = [get_scorer(n) for n in names]
    task = getattr(estimator, "task", "")
    for s in scorers:
        if task in ("classification", "regression") and s.task != task:
            raise ParamError("scoring", f"'{s.name}' is a {s.task} metric but the estimator does {task}")
    return scorers
