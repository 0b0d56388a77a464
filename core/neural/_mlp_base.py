"""What the multi-layer perceptron classifier and regressor share: parameters, capabilities and ``fit``.

The twins differ by two hooks: ``_targets`` (the output layer's targets and activation, and the fitted
attributes the target encoding adds) and ``_score`` (the early-stopping score on the validation split).
"""

from __future__ import annotations

import numpy as np

from ..context import NULL_CONTEXT
from ..memory import mlp_fit
from ..validation import check_sample_weight, check_X_y
from ._mlp_engine import common_params, fit_network, set_fitted


class BaseMLP:
    fit_memory = mlp_fit()  # peak memory model (core/memory.py)
    params = common_params()
    supports_sample_weight = True
    reports_progress = True
    needs_scaling = True
    numeric_target = False

    def _targets(self, y: np.ndarray) -> tuple[np.ndarray, str, dict, dict]:
        """``(Y, output activation, keyword arguments of fit_network, fitted attributes)`` for target ``y``."""
        raise NotImplementedError

    @staticmethod
    def _score(net, X, Y) -> float:
        raise NotImplementedError

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y, y_numeric=self.numeric_target)
        Y, output, fit_kwargs, fitted = self._targets(y)
        sw = None if sample_weight is None else check_sample_weight(sample_weight, X.shape[0])
        net, info = fit_network(p, X, Y, sw, output=output, ctx=ctx, score_fn=self._score, **fit_kwargs)
        for name, value in fitted.items():
            setattr(self, name, value)
        set_fitted(self, net, info, X.shape[1])
        return self
