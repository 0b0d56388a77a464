"""Random-state handling: every estimator draws randomness only from here."""

from __future__ import annotations

import numpy as np

__all__ = ["check_random_state", "spawn_seeds"]


def check_random_state(seed) -> np.random.Generator:
    """Turn ``None``, an int or a Generator into a ``np.random.Generator``.

    The global NumPy RNG is never used: ``None`` gives a freshly seeded
    generator from OS entropy.
    """
    if seed is None or isinstance(seed, (int, np.integer)):
        return np.random.default_rng(seed)
    if isinstance(seed, np.random.Generator):
        return seed
    raise TypeError(f"random_state must be None, an int or a Generator, got {seed!r}")


def spawn_seeds(rng: np.random.Generator, n: int) -> list[int]:
    """``n`` integer seeds for sub-estimators, drawn from the parent generator."""
    return [int(s) for s in rng.integers(0, 2**32 - 1, size=n, dtype=np.uint64)]
