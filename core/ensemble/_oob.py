"""Out-of-bag scores, shared by the forests and bagging: each row is predicted by the members that did not see
it (``total``: the sum of those members' outputs, ``n_oob``: how many), then scored like ``score``."""

from __future__ import annotations

import numpy as np


def oob_classification(total: np.ndarray, n_oob: np.ndarray, y_codes: np.ndarray) -> dict:
    """The out-of-bag vote (mean of the members' class probabilities or one-hot votes) and its accuracy over the
    rows at least one member left out (NaN when there is none)."""
    ok = n_oob > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        dec = np.where(ok[:, None], total / np.maximum(n_oob, 1)[:, None], np.nan)
    hit = np.argmax(dec[ok], axis=1) == y_codes[ok]
    return {"oob_decision_function_": dec, "oob_score_": float(np.mean(hit)) if ok.any() else np.nan}


def oob_regression(total: np.ndarray, n_oob: np.ndarray, y: np.ndarray) -> dict:
    """The out-of-bag mean prediction and its R^2 over the rows at least one member left out: NaN with fewer
    than two such rows; on a constant target 1.0 when every prediction is exact, else 0.0 (scikit-learn's
    ``r2_score`` convention)."""
    ok = n_oob > 0
    pred = np.where(ok, total / np.maximum(n_oob, 1), np.nan)
    if ok.sum() < 2:
        return {"oob_prediction_": pred, "oob_score_": np.nan}
    yt = y[ok]
    ss_res = float(np.sum((yt - pred[ok]) ** 2))
    ss_tot = float(np.sum((yt - yt.mean()) ** 2))
    score = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    return {"oob_prediction_": pred, "oob_score_": score}
