"""``mlp_regressor``: multi-layer perceptron with identity output and squared error.

[Passerini §13]: identity output f(x) = o(x), loss ½(y - f(x))²,
back-propagation with mini-batch optimisers.  Engine and formulas: ``core.neural._mlp_engine``.
"""

from __future__ import annotations

import numpy as np

from ..base import Regressor
from ..registry import register
from ..validation import check_predict_input
from ._mlp_base import BaseMLP


def _r2(net, X, y):
    pred = net.forward(X)[:, 0]
    ss_res = float(np.sum((y[:, 0] - pred) ** 2))
    ss_tot = float(np.sum((y[:, 0] - y[:, 0].mean()) ** 2))
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else 0.0


@register
class MLPRegressor(BaseMLP, Regressor):
    """Feed-forward neural network regressor: identity output, loss mean ½(f(x) - y)² (+ penalties).

    The target is used as given (like scikit-learn); standardise it yourself for large scales.
    Early stopping monitors R² on the validation split.
    """

    name = "mlp_regressor"
    summary = "Multi-layer perceptron regressor (identity output, squared error, SGD/Adam/...)"
    numeric_target = True
    _score = staticmethod(_r2)

    def _targets(self, y):
        return y.astype(np.float64)[:, None], "identity", {}, {}

    def predict(self, X):
        X = check_predict_input(self, X, "net_")
        with np.errstate(over="ignore", under="ignore"):
            return self.net_.forward(X)[:, 0].copy()
