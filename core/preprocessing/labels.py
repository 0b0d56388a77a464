"""Label encoding of targets (estimators encode labels themselves via core.base.encode_labels;
this object form is for the service's model bundle: a stored label <-> code mapping)."""

from __future__ import annotations

import numpy as np

from ..base import encode_labels
from ..validation import DataError, NotFittedError, column_or_1d

__all__ = ["LabelEncoder"]


class LabelEncoder:
    """Map labels (any hashable: strings, ints...) to codes 0..k-1 in sorted label order."""

    def fit(self, y) -> LabelEncoder:
        classes, _ = encode_labels(y)
        self.classes_ = classes
        self._index = {v: i for i, v in enumerate(classes.tolist())}
        return self

    def fit_transform(self, y) -> np.ndarray:
        classes, codes = encode_labels(y)
        self.classes_ = classes
        self._index = {v: i for i, v in enumerate(classes.tolist())}
        return codes

    def transform(self, y) -> np.ndarray:
        """Codes of ``y``; DataError naming the first label not seen at fit."""
        if not hasattr(self, "_index"):
            raise NotFittedError("this LabelEncoder is not fitted yet; call fit before using it")
        values = column_or_1d(y).tolist()
        get = self._index.get
        codes = np.fromiter((get(v, -1) for v in values), dtype=np.intp, count=len(values))
        if (codes < 0).any():
            bad = values[int(np.flatnonzero(codes < 0)[0])]
            raise DataError(f"label {bad!r} was not seen at fit; known labels: {self.classes_.tolist()[:20]}")
        return codes

    def inverse_transform(self, codes) -> np.ndarray:
        if not hasattr(self, "_index"):
            raise NotFittedError("this LabelEncoder is not fitted yet; call fit before using it")
        codes = np.asarray(codes)
        if codes.size and (codes.min() < 0 or codes.max() >= len(self.classes_)):
            raise DataError(f"codes must be in [0, {len(self.classes_) - 1}]")
        return self.classes_[codes.astype(np.intp)]
