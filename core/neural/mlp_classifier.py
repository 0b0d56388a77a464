"""``mlp_classifier``: multi-layer perceptron with softmax / sigmoid output and cross-entropy.

[Passerini §13]: sigmoid output thresholded at 0.5 for two classes,
softmax over K units for K > 2, cross-entropy loss, back-propagation, mini-batch
optimisers, L1/L2 penalties, early stopping on a validation split, batch normalisation.
Engine and formulas: ``core.neural._mlp_engine``.
"""

from __future__ import annotations

import numpy as np

from ..base import Classifier
from ..registry import register
from ..validation import check_predict_input
from ._mlp_base import BaseMLP


def _accuracy(net, X, codes):
    out = net.forward(X)
    pred = (out[:, 0] > 0.5).astype(np.intp) if out.shape[1] == 1 else out.argmax(axis=1)
    return float(np.mean(pred == codes))


@register
class MLPClassifier(BaseMLP, Classifier):
    """Feed-forward neural network classifier trained by mini-batch back-propagation.

    Two classes: one logistic output unit, P(y=classes_[1]|x) = sigmoid(z), binary cross-entropy.
    K > 2 classes: softmax over K units, cross-entropy ``logsumexp(z) - z_y`` (stable).
    Fitted: ``coefs_``, ``intercepts_`` (BN shifts for normalised layers), ``loss_curve_``,
    ``validation_scores_`` (early stopping: accuracy), ``n_iter_``, ``classes_``.
    """

    name = "mlp_classifier"
    summary = "Multi-layer perceptron classifier (softmax/sigmoid output, cross-entropy, SGD/Adam/...)"
    _score = staticmethod(_accuracy)

    def _targets(self, y):
        classes, codes = self._encode_targets(y)
        k = len(classes)
        if k == 2:
            return codes.astype(np.float64)[:, None], "sigmoid", {"codes": codes}, {"classes_": classes}
        Y = np.zeros((y.shape[0], k))
        Y[np.arange(y.shape[0]), codes] = 1.0
        return Y, "softmax", {"codes": codes}, {"classes_": classes}

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
