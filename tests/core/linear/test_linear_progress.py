"""Every iterative solver of the linear family reports progress and can be cancelled."""

from __future__ import annotations

import numpy as np
import pytest

from core import registry
from core.context import FitCancelled, FitContext

CASES = [
    ("linear_regression", {"solver": "gd"}),
    ("linear_regression", {"solver": "sgd", "random_state": 0}),
    ("ridge_regression", {"solver": "gd"}),
    ("lasso_regression", {"alpha": 0.01}),
    ("elastic_net", {"alpha": 0.01}),
    ("bayesian_linear_regression", {}),
    ("logistic_regression", {"solver": "lbfgs"}),
    ("logistic_regression", {"solver": "newton"}),
    ("logistic_regression", {"solver": "gd", "penalty": "l1"}),
    ("logistic_regression", {"solver": "sgd", "penalty": "elasticnet", "random_state": 0}),
    ("logistic_regression", {"multi_class": "ovr"}),
    ("softmax_regression", {"solver": "newton"}),
    ("poisson_regression", {}),
    ("poisson_regression", {"solver": "lbfgs"}),
    ("perceptron", {"multi_class": "ovo", "random_state": 0}),
]


def _data(task):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    if task == "classification":
        return X, np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.5, 0.5])
    return X, np.exp(0.3 * X[:, 0]) + 0.1 * rng.normal(size=80) + 1.0


@pytest.mark.parametrize("name,params", CASES)
def test_progress_and_cancel(name, params):
    cls = registry.get(name)
    X, y = _data(cls.task)
    seen = []
    ctx = FitContext(on_progress=lambda f, m: seen.append(f), min_interval=0.0)
    cls(**params).fit(X, y, ctx=ctx)
    assert len(seen) >= 2 and seen == sorted(seen) and seen[-1] == 1.0
    est = cls(**params)
    with pytest.raises(FitCancelled):
        est.fit(X, y, ctx=FitContext(is_cancelled=lambda: True, cancel_interval=0.0))
    assert not hasattr(est, "coef_")
