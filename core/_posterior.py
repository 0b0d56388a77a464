"""Classifiers whose scores are an unnormalised log posterior per class (naive Bayes, discriminant analysis):
probabilities by a softmax of the scores, labels by their argmax, written once."""

from __future__ import annotations

import numpy as np

from .base import Classifier

__all__ = ["LogPosteriorClassifier", "log_softmax", "softmax"]


def log_softmax(s: np.ndarray) -> np.ndarray:
    """``s - logsumexp(s)`` row-wise (rows of -inf stay finite where possible)."""
    m = np.max(s, axis=1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    z = s - m
    return z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))


def softmax(s: np.ndarray, *, copy: bool = True) -> np.ndarray:
    """``exp(s - logsumexp(s))`` row-wise (in place on ``s`` when ``copy=False``)."""
    m = np.max(s, axis=1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.subtract(s, m) if copy else np.subtract(s, m, out=s)
    np.exp(e, out=e)
    e /= np.sum(e, axis=1, keepdims=True)
    return e



class LogPosteriorClassifier(Classifier):
    """Base: a subclass implements ``_log_posterior(X)``, the checked input's unnormalised log posterior (n, K)."""

    def _log_posterior(self, X) -> np.ndarray:
        raise NotImplementedError

    def predict_log_proba(self, X) -> np.ndarray:
        return log_softmax(self._log_posterior(X))

    def predict_proba(self, X) -> np.ndarray:
        return softmax(self._log_posterior(X), copy=False)

    def predict(self, X):
        scores = self._log_posterior(X)  # first: it checks that the model is fitted
        return self.classes_[np.argmax(scores, axis=1)]
