"""The common tests' per-algorithm parameters and data live in tests/core/example_params.py, not on the classes."""

from __future__ import annotations

import numpy as np
import pytest

from core import registry
from tests.core.example_params import EXAMPLE_DATA, EXAMPLE_PARAMS, example_data


@pytest.mark.parametrize("table", [EXAMPLE_PARAMS, EXAMPLE_DATA], ids=["params", "data"])
def test_every_entry_names_a_registered_algorithm(table):
    # a renamed algorithm would otherwise fall back silently to its defaults or its task's data
    assert sorted(set(table) - set(registry.names())) == []


def test_no_estimator_carries_test_examples():
    for name in registry.names():
        for klass in registry.get(name).__mro__:
            assert not {"_example_data", "_example_params"} & set(vars(klass)), (name, klass)


def test_example_data_depends_only_on_the_generator():
    for name in registry.names():
        X1, y1 = example_data(name, np.random.default_rng(3))
        X2, y2 = example_data(name, np.random.default_rng(3))
        assert X1.tobytes() == X2.tobytes(), name
        assert (y1 is None) == (y2 is None) and (y1 is None or np.array_equal(y1, y2)), name
