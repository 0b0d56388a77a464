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



@pytest.mark.parametrize("n", [1, 30, 256, 257, 5000])
def test_check_array_finiteness_is_exact_for_small_and_large_arrays(n):
    """The small-array shortcut (a Python sum) must agree with the exact scan: a finite sum proves
    finiteness; overflowing finite values are still accepted; NaN/inf anywhere are still refused."""
    from core.validation import check_array

    big = np.full((1, n), 1e308)  # finite, but its sum overflows to inf
    assert check_array(big) is big
    for bad_value in (np.nan, np.inf, -np.inf):
        X = np.ones((1, n))
        X[0, n // 2] = bad_value
        with pytest.raises(DataError, match="NaN or infinity"):
            check_array(X)
    X = np.ones((1, n))
    X[0, 0] = np.nan
    assert check_array(X, allow_nan=True) is X
    X[0, -1] = np.inf if n > 1 else X[0, -1]
    if n > 1:
        with pytest.raises(DataError, match="infinity"):
            check_array(X, allow_nan=True)
    mixed = np.full((1, n), 1e308)
    mixed[0, 0] = -np.inf  # an infinity hidden among overflowing finite values
    with pytest.raises(DataError):
        check_array(mixed)


class _Fitted:
    def __init__(self, n_features):
        self.coef_ = np.ones(n_features)
        self.n_features_in_ = n_features


@pytest.mark.parametrize("n", [1, 3, 300])  # 300 values: past the short path
def test_check_predict_input_short_path_keeps_every_check(n):
    """check_predict_input = check_is_fitted + check_array + check_n_features, short path included:
    the same array back when it is already clean, the same errors otherwise."""
    from core.validation import NotFittedError, check_predict_input

    est = _Fitted(n)
    X = np.arange(float(n)).reshape(1, n)
    assert check_predict_input(est, X, "coef_") is X
    with pytest.raises(NotFittedError, match="not fitted"):
        check_predict_input(object(), X, "coef_")
    with pytest.raises(DataError, match=f"X has {n + 1} features, but the model was fitted with {n}"):
        check_predict_input(est, np.ones((1, n + 1)), "coef_")
    for bad in (np.nan, np.inf):
        Y = X.copy()
        Y[0, -1] = bad
        with pytest.raises(DataError, match="NaN or infinity"):
            check_predict_input(est, Y, "coef_")
    big = np.full((1, n), 1e308)  # finite values whose sum overflows: accepted by the full check
    assert check_predict_input(est, big, "coef_") is big
    with pytest.raises(DataError, match="2-dimensional"):
        check_predict_input(est, np.ones(n), "coef_")
    F = np.asfortranarray(np.ones((2, n)))  # not C-contiguous: converted
    out = check_predict_input(est, F, "coef_")
    assert out.flags.c_contiguous and np.array_equal(out, F)
    ints = check_predict_input(est, np.ones((1, n), dtype=np.int64), "coef_")  # converted to float64
    assert ints.dtype == np.float64
    with pytest.raises(DataError, match="0 samples"):
        check_predict_input(est, np.ones((0, n)), "coef_")


def test_categorical_features_from_a_mask_indices_or_none():
    from core.validation import check_categorical_features

    assert check_categorical_features(None, 3).tolist() == [False, False, False]
    assert check_categorical_features(None, 3, default=True).tolist() == [True, True, True]
    assert check_categorical_features([], 3).tolist() == [False, False, False]
    assert check_categorical_features([2, 0], 3).tolist() == [True, False, True]
    mask = np.array([False, True, False])
    out = check_categorical_features(mask, 3)
    assert out.tolist() == [False, True, False] and out is not mask


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.array([True, False]), "mask has shape"),
        ([0, 3], r"indices must lie in \[0, 3\)"),
        ([-1], r"indices must lie in \[0, 3\)"),
        (["a"], "boolean mask or a list of column indices"),
    ],
)
def test_categorical_features_refused_with_a_sentence(bad, message):
    from core.validation import check_categorical_features

    with pytest.raises(DataError, match=message):
        check_categorical_features(bad, 3)


@pytest.mark.parametrize(
    "name", ["decision_tree_classifier", "gradient_boosting_classifier", "categorical_nb",
             "bayesian_network_classifier", "bagging_classifier", "adaboost_classifier"],
)
def test_every_native_categorical_estimator_refuses_an_out_of_range_index(name):
    from core.registry import get

    X = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 0.0], [1.0, 1.0]] * 3)
    y = np.array([0, 1, 0, 1] * 3)
    with pytest.raises(DataError, match="categorical_features"):
        get(name)().fit(X, y, categorical_features=[5])


@pytest.mark.parametrize(
    "name, params",
    [("pca", {"n_components": 2}), ("ica", {"n_components": 2, "random_state": 0}),
     ("kernel_pca", {"n_components": 2, "fit_inverse_transform": True})],
)
def test_inverse_transform_checks_its_input_in_one_place(name, params):
    from core.registry import get
    from core.validation import NotFittedError

    X = np.random.default_rng(0).normal(size=(40, 4))
    with pytest.raises(NotFittedError):
        get(name)(**params).inverse_transform(np.zeros((1, 2)))
    est = get(name)(**params).fit(X)
    Z = est.transform(X[:3])
    assert est.inverse_transform(Z).shape == (3, 4)
    with pytest.raises(DataError, match="has 3 columns, but the model has 2 components"):
        est.inverse_transform(np.zeros((1, 3)))
    with pytest.raises(DataError, match="NaN"):
        est.inverse_transform(np.array([[np.nan, 0.0]]))


def test_class_weights_one_rule_for_every_classifier():
    from sklearn.utils.class_weight import compute_class_weight

    from core.params import ParamError
    from core.validation import class_weight_vector

    classes = np.array(["a", "b", "c"])
    codes = np.array([0, 0, 0, 1, 2, 2])
    np.testing.assert_array_equal(class_weight_vector(None, classes, codes), np.ones(3))
    np.testing.assert_allclose(class_weight_vector("balanced", classes, codes),
                               compute_class_weight("balanced", classes=classes, y=classes[codes]))
    sw = np.array([1.0, 1.0, 1.0, 0.0, 2.0, 2.0])  # class "b" carries no weight: 0, not a division by zero
    np.testing.assert_allclose(class_weight_vector("balanced", classes, codes, sw), [7 / 9, 0.0, 7 / 12])
    np.testing.assert_array_equal(class_weight_vector({"b": 3, "c": "0.5"}, classes, codes), [1.0, 3.0, 0.5])
    with pytest.raises(ParamError, match="'z' is not a class of y"):
        class_weight_vector({"z": 1}, classes, codes)
