import numpy as np
import pytest

from core.validation import DataError, check_target


def test_check_target():
    np.testing.assert_array_equal(check_target([1, 2], 2, numeric=True), [1.0, 2.0])
    assert check_target(np.array(["a", "b"]), 2).dtype.kind == "U"
    with pytest.raises(DataError, match="required"):
        check_target(None, 2)
    with pytest.raises(DataError, match="2 samples but y has 3"):
        check_target([1, 2, 3], 2)
    with pytest.raises(DataError, match="numeric"):
        check_target(["a", "b"], 2, numeric=True)
    with pytest.raises(DataError, match="NaN"):
        check_target([1.0, np.nan], 2, numeric=True)
