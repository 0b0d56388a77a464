"""``mlp_regressor``: multi-layer perceptron with identity output and squared error.

[Passerini §13]: identity output f(x) = o(x), loss ½(y - f(x))²,
back-propagation with mini-batch optimisers.  Engine and formulas: ``core.neural._mlp_engine``.
"""

from __future__ import annotations

import numpy as np

from ..base import Regressor
from ..context import NULL_CONTEXT
from ..memory import mlp_fit
from ..registry import register
from ..validation import check_predict_input, check_sample_weight, check_X_y
from ._mlp_engine import common_params, fit_network, set_fitted


def _r2(net, X, y):
    pred = net.forward(X)[:, 0]
    ss_res = float(np.sum((y[:, 0] - pred) ** 2))
    ss_tot = float(np.sum((y[:, 0] - y[:, 0].mean()) ** 2))
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else 0.0


@register
class MLPRegressor(Regressor):
    """Feed-forward neural network regressor: identity output, loss mean ½(f(x) - y)² (+ penalties).

    The target is used as given (like scikit-learn); standardise it yourself for large scales.
    Early stopping monitors R² on the validation split.
    """

    name = "mlp_regressor"
    fit_memory = mlp_fit()  # peak memory model (core/memory.py)
    summary = "Multi-layer perceptron regressor (identity output, squared error, SGD/Adam/...)"
    params = common_params()
    supports_sample_weight = True
    reports_progress = True
    needs_scaling = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y, y_numeric=True)
        sw = None if sample_weight is None else check_sample_weight(sample_weight, X.shape[0])
        Y = y.astype(np.float64)[:, None]
        net, info = fit_network(p, X, Y, sw, output="identity", ctx=ctx, score_fn=_r2)
        set_fitted(self, net, info, X.shape[1])
        return self

    def predict(self, X):
        X = check_predict_input(self, X, "net_")
        with np.errstate(over="ignore", under="ignore"):
            return self.net_.forward(X)[:, 0].copy()
