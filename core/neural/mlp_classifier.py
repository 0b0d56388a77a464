"""``mlp_classifier``: multi-layer perceptron with softmax / sigmoid output and cross-entropy.

[Passerini §13]: sigmoid output thresholded at 0.5 for two classes,
softmax over K units for K > 2, cross-entropy loss, back-propagation, mini-batch
optimisers, L1/L2 penalties, early stopping on a validation split, batch normalisation.
Engine and formulas: ``core.neural._mlp_engine``.
"""

from __future__ import annotations

import numpy as np

from ..base import Classifier
from ..context import NULL_CONTEXT
from ..memory import mlp_fit
from ..registry import register
from ..validation import check_predict_input, check_sample_weight, check_X_y
from ._mlp_engine import common_params, fit_network, set_fitted


def _accuracy(net, X, codes):
    out = net.forward(X)
    pred = (out[:, 0] > 0.5).astype(np.intp) if out.shape[1] == 1 else out.argmax(axis=1)
    return float(np.mean(pred == codes))


@register
class MLPClassifier(Classifier):
    """Feed-forward neural network classifier trained by mini-batch back-propagation.

    Two classes: one logistic output unit, P(y=classes_[1]|x) = sigmoid(z), binary cross-entropy.
    K > 2 classes: softmax over K units, cross-entropy ``logsumexp(z) - z_y`` (stable).
    Fitted: ``coefs_``, ``intercepts_`` (BN shifts for normalised layers), ``loss_curve_``,
    ``validation_scores_`` (early stopping: accuracy), ``n_iter_``, ``classes_``.
    """

    name = "mlp_classifier"
    fit_memory = mlp_fit()  # peak memory model (core/memory.py)
    summary = "Multi-layer perceptron classifier (softmax/sigmoid output, cross-entropy, SGD/Adam/...)"
    params = common_params()
    supports_sample_weight = True
    reports_progress = True
    needs_scaling = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y)
        classes, codes = self._encode_targets(y)
        sw = None if sample_weight is None else check_sample_weight(sample_weight, X.shape[0])
        k = len(classes)
        if k == 2:
            Y = codes.astype(np.float64)[:, None]
            output = "sigmoid"
        else:
            Y = np.zeros((X.shape[0], k))
            Y[np.arange(X.shape[0]), codes] = 1.0
            output = "softmax"
        net, info = fit_network(p, X, Y, sw, output=output, ctx=ctx, codes=codes, score_fn=_accuracy)
        self.classes_ = classes
        set_fitted(self, net, info, X.shape[1])
        return self

    def predict_proba(self, X):
        X = check_predict_input(self, X, "net_")
        with np.errstate(over="ignore", under="ignore"):
            out = self.net_.forward(X)
        if out.shape[1] == 1:
            return np.hstack([1.0 - out, out])
        return out

    def predict_log_proba(self, X):
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))
