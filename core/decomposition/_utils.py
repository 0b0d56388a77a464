"""Shared helpers of the decomposition family.

Sign convention (all decompositions, docs/decisions/unsupervised.md): every component
(a row of ``components_``; for kernel PCA a column of ``eigenvectors_``) is flipped so that
its entry of largest absolute value is positive, as scikit-learn's ``svd_flip(u_based_decision=False)``.
"""

from __future__ import annotations

import numpy as np


def flip_rows(V: np.ndarray) -> np.ndarray:
    """Flip each row of ``V`` so that its largest-|value| entry is positive (in place, returned)."""
    if V.size == 0:
        return V
    idx = np.argmax(np.abs(V), axis=1)
    signs = np.sign(V[np.arange(V.shape[0]), idx])
    signs[signs == 0] = 1.0
    V *= signs[:, None]
    return V


def flip_columns(U: np.ndarray) -> np.ndarray:
    flip_rows(U.T)
    return U
