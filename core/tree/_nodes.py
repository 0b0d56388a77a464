"""Node kinds and the one index helper shared by the tree arrays (_tree.py) and the predictor (_predictor.py)."""

from __future__ import annotations

import numpy as np

LEAF, NUMERIC, CATEGORICAL = 0, 1, 2


def ranges(counts: np.ndarray) -> np.ndarray:
    """concatenate(arange(c) for c in counts), vectorised."""
    counts = np.asarray(counts, dtype=np.intp)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.intp)
    ends = np.cumsum(counts)
    return np.arange(total, dtype=np.intp) - np.repeat(ends - counts, counts)
