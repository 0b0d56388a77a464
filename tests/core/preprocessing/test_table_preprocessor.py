"""TablePreprocessor: exact numbers for imputation, scaling, one-hot and native codes; errors; pickling."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.impute import SimpleImputer
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, StandardScaler

from core.preprocessing import TablePreprocessor
from core.validation import DataError, NotFittedError

NAN = np.nan


def _table():
    cols = {
        "age": np.array([20.0, NAN, 40.0, 30.0, 30.0]),
        "color": np.array(["red", None, "blue", "red", "green"], dtype=object),
        "member": np.array([1.0, 0.0, NAN, 1.0, 1.0]),
        "size": np.array(["S", "M", "M", NAN, "L"], dtype=object),  # NaN float as missing
    }
    types = {"age": "numeric", "color": "categorical", "member": "boolean", "size": "categorical"}
    return cols, types


def test_one_hot_with_mean_imputation_exact():
    cols, types = _table()
    tp = TablePreprocessor().fit(cols, types)
    assert tp.feature_names_in_ == ["age", "color", "member", "size"]
    assert tp.categories_ == {"color": ["blue", "green", "red"], "size": ["L", "M", "S"]}
    assert tp.feature_names_out_ == [
        "age",
        "color=blue",
        "color=green",
        "color=red",
        "member",
        "size=L",
        "size=M",
        "size=S",
    ]
    assert tp.n_features_out_ == 8 and not tp.categorical_mask_.any()
    X = tp.transform(cols)
    assert X.dtype == np.float64 and X.flags.c_contiguous
    expected = np.array(
        [
            [20, 0, 0, 1, 1, 0, 0, 1],
            [30, 0, 0, 0, 0, 0, 1, 0],  # age imputed with mean 30; color missing -> zeros
            [40, 1, 0, 0, 0.75, 0, 1, 0],  # member imputed with mean 0.75
            [30, 0, 0, 1, 1, 0, 0, 0],  # size NaN -> zeros
            [30, 0, 1, 0, 1, 1, 0, 0],
        ],
        dtype=float,
    )
    assert_array_equal(X, expected)
    # same as scikit-learn's SimpleImputer + OneHotEncoder(handle_unknown="ignore")
    imp = SimpleImputer(strategy="mean").fit_transform(np.column_stack([cols["age"], cols["member"]]))
    assert_array_equal(X[:, [0, 4]], imp)
    color = np.array(["red", "__missing__", "blue", "red", "green"]).reshape(-1, 1)
    enc = OneHotEncoder(categories=[["blue", "green", "red"]], handle_unknown="ignore").fit(
        color[[0, 2, 3, 4]]
    )
    assert_array_equal(X[:, 1:4], enc.transform(color).toarray())


@pytest.mark.parametrize(
    "impute, age, member", [("median", 30.0, 1.0), ("most_frequent", 30.0, 1.0), ("mean", 30.0, 0.75)]
)
def test_imputation_strategies(impute, age, member):
    cols, types = _table()
    cols["age"] = np.array([20.0, NAN, 40.0, 30.0, 36.0])
    tp = TablePreprocessor(impute=impute).fit(cols, types)
    ref = SimpleImputer(strategy=impute).fit(np.column_stack([cols["age"], cols["member"]]))
    assert tp.statistics_["age"] == ref.statistics_[0]
    assert tp.statistics_["member"] == ref.statistics_[1] == member
    X = tp.transform(cols)
    assert X[1, 0] == ref.statistics_[0]


def test_most_frequent_tie_takes_smallest_and_all_missing_imputes_zero():
    cols = {"a": np.array([3.0, 1.0, 3.0, 1.0, NAN]), "b": np.array([NAN, NAN, NAN, NAN, NAN])}
    tp = TablePreprocessor(impute="most_frequent", scale=True).fit(cols, {"a": "numeric", "b": "numeric"})
    assert tp.statistics_ == {"a": 1.0, "b": 0.0}
    X = tp.transform(cols)
    assert_array_equal(X[:, 1], np.zeros(5))  # all-missing -> 0, constant -> scale 1


def test_standard_and_minmax_scaling_exact():
    cols, types = _table()
    tp = TablePreprocessor(scale=True).fit(cols, types)
    X = tp.transform(cols)
    num = SimpleImputer().fit_transform(np.column_stack([cols["age"], cols["member"]]))
    ref = StandardScaler().fit_transform(num)
    assert_allclose(X[:, [0, 4]], ref, rtol=0, atol=1e-15)
    assert tp.center_["age"] == 30.0 and tp.scale_["age"] == pytest.approx(np.sqrt(40.0), rel=1e-15)
    # one-hot columns are not scaled
    assert set(np.unique(X[:, [1, 2, 3, 5, 6, 7]])) <= {0.0, 1.0}
    mm = TablePreprocessor(scale=True, scale_method="minmax").fit(cols, types).transform(cols)
    assert_allclose(mm[:, [0, 4]], MinMaxScaler().fit_transform(num), rtol=0, atol=1e-15)
    # constant column: scale 1, centred
    c = {"k": np.full(4, 7.0)}
    assert_array_equal(TablePreprocessor(scale=True).fit(c, {"k": "numeric"}).transform(c), np.zeros((4, 1)))


def test_native_categorical_codes_and_missing():
    cols, types = _table()
    tp = TablePreprocessor(native_categorical=True).fit(cols, types)
    assert tp.feature_names_out_ == ["age", "color", "member", "size"]
    assert tp.categorical_mask_.tolist() == [False, True, False, True]
    X = tp.transform(cols)
    # color: blue=0, green=1, red=2; missing -> most frequent ("red" = 2)
    assert_array_equal(X[:, 1], [2, 2, 0, 2, 1])
    # size: L=0, M=1, S=2; the NaN -> most frequent ("M" = 1)
    assert_array_equal(X[:, 3], [2, 1, 1, 1, 0])
    new = {
        "age": np.array([1.0]),
        "member": np.array([0.0]),
        "color": np.array(["purple"], dtype=object),
        "size": np.array(["S"], dtype=object),
    }
    assert_array_equal(tp.transform(new), [[1.0, 2.0, 0.0, 2.0]])  # unknown -> most frequent
    tpn = TablePreprocessor(native_categorical=True, native_missing=True).fit(cols, types)
    Xn = tpn.transform(cols)
    assert_array_equal(Xn[:, 1], [2, NAN, 0, 2, 1])
    assert_array_equal(Xn[:, 3], [2, 1, 1, NAN, 0])
    assert np.isnan(Xn[1, 0]) and np.isnan(Xn[2, 2])  # numeric NaN kept
    assert np.isnan(tpn.transform(new)[0, 1])  # unknown -> NaN


def test_native_missing_with_scaling_ignores_nan():
    cols, types = _table()
    tp = TablePreprocessor(native_missing=True, scale=True).fit(cols, types)
    X = tp.transform(cols)
    present = np.array([20.0, 40.0, 30.0, 30.0])
    assert_allclose(X[[0, 2, 3, 4], 0], (present - present.mean()) / present.std(), rtol=0, atol=1e-15)
    assert np.isnan(X[1, 0])


def test_unknown_categories_one_hot_are_zeros():
    cols, types = _table()
    tp = TablePreprocessor().fit(cols, types)
    row = {
        "age": np.array([25.0]),
        "member": np.array([1.0]),
        "color": np.array(["purple"], dtype=object),
        "size": np.array([None], dtype=object),
    }
    assert_array_equal(tp.transform(row), [[25, 0, 0, 0, 1, 0, 0, 0]])


def test_single_row_equals_batch_row_and_batch_paths_agree():
    rng = np.random.default_rng(0)
    n = 500
    cats = np.array(["a", "b", "c", "d"])
    cols = {
        "x": rng.normal(size=n),
        "c": rng.choice(cats, n).astype(object),
        "flag": rng.integers(0, 2, n).astype(float),
    }
    cols["x"][::7] = NAN
    cols["c"][::11] = None
    types = {"x": "numeric", "c": "categorical", "flag": "boolean"}
    for kw in (
        {},
        {"scale": True},
        {"native_categorical": True},
        {"native_categorical": True, "native_missing": True},
    ):
        tp = TablePreprocessor(**kw).fit(cols, types)
        X = tp.transform(cols)
        for i in (0, 7, 11, 123):
            row = {k: v[i : i + 1] for k, v in cols.items()}
            assert_array_equal(tp.transform(row), X[i : i + 1])
        # numpy string arrays (vectorised searchsorted path) give the same codes as object arrays
        as_str = dict(cols, c=np.where(cols["c"] == None, "zzz-unknown", cols["c"]).astype(str))  # noqa: E711
        Xs = tp.transform(as_str)
        ok = cols["c"] != None  # noqa: E711
        assert_array_equal(Xs[ok], X[ok])
        # the unknown string behaves like a missing value
        assert_array_equal(Xs[~ok], X[~ok])


def test_errors_name_the_feature():
    cols, types = _table()
    with pytest.raises(NotFittedError):
        TablePreprocessor().transform(cols)
    tp = TablePreprocessor().fit(cols, types)
    missing = dict(cols)
    del missing["member"]
    with pytest.raises(DataError, match="required feature 'member' is missing"):
        tp.transform(missing)
    bad = dict(cols, age=np.array(["20", "x", None, "1", "2"], dtype=object))
    with pytest.raises(DataError, match="feature 'age' is numeric but holds non-numeric data \\(e.g. 'x'\\)"):
        tp.transform(bad)
    with pytest.raises(DataError, match="feature 'age' contains infinity"):
        tp.transform(dict(cols, age=np.array([1.0, np.inf, 1, 1, 1])))
    with pytest.raises(DataError, match="feature 'member' has 2 rows; expected 5"):
        tp.transform(dict(cols, member=np.array([1.0, 0.0])))
    with pytest.raises(DataError, match="unknown type 'text'"):
        TablePreprocessor().fit(cols, dict(types, age="text"))
    with pytest.raises(DataError, match="impute must be one of"):
        TablePreprocessor(impute="mode").fit(cols, types)
    # numbers given as strings or with None are accepted for numeric features
    ok = dict(cols, age=np.array(["20", None, "40", "30", "30"], dtype=object))
    assert_array_equal(tp.transform(ok), tp.transform(cols))


def test_pickle_round_trip_and_describe():
    cols, types = _table()
    tp = TablePreprocessor(scale=True, native_categorical=True).fit(cols, types)
    tp2 = pickle.loads(pickle.dumps(tp))
    assert_array_equal(tp2.transform(cols), tp.transform(cols))
    assert tp.describe_features() == [
        {"name": "age", "type": "numeric"},
        {"name": "color", "type": "categorical", "categories": ["blue", "green", "red"]},
        {"name": "member", "type": "boolean"},
        {"name": "size", "type": "categorical", "categories": ["L", "M", "S"]},
    ]
    # extra columns are ignored; feature order follows `types`
    reordered = {"member": "boolean", "age": "numeric"}
    tpr = TablePreprocessor().fit(cols, reordered)
    assert tpr.feature_names_out_ == ["member", "age"]
    assert_array_equal(tpr.transform(cols)[:, 1], [20, 30, 40, 30, 30])


def test_transform_matrix_equals_transform_for_numeric_tables():
    rng = np.random.default_rng(3)
    cols = {"a": rng.normal(size=20), "b": rng.normal(size=20), "c": (rng.random(20) > 0.5).astype(float)}
    cols["a"][[2, 5]] = np.nan
    types = {"a": "numeric", "b": "numeric", "c": "boolean"}
    for scale in (False, True):
        pre = TablePreprocessor(scale=scale).fit(cols, types)
        A = np.column_stack([cols["a"], cols["b"], cols["c"]])
        before = A.copy()
        np.testing.assert_array_equal(pre.transform_matrix(A), pre.transform(cols))
        np.testing.assert_array_equal(A, before)
    with_cat = TablePreprocessor().fit({"a": cols["a"], "k": np.array(["x", "y"] * 10, dtype=object)},
                                       {"a": "numeric", "k": "categorical"})
    assert not with_cat.all_numeric


def test_transform_matrix_after_refit_uses_the_new_fit():
    """The one-row facts cached by transform_matrix belong to one fit: a refit on other data of the same width
    must not keep the old centres and scales (nor pickle them)."""
    rng = np.random.default_rng(5)
    types = {"a": "numeric", "b": "numeric"}
    first = {"a": rng.normal(0, 1, 30), "b": rng.normal(0, 1, 30)}
    second = {"a": rng.normal(50, 9, 30), "b": rng.normal(-7, 3, 30)}
    pre = TablePreprocessor(scale=True).fit(first, types)
    row = np.array([[1.5, -2.0]])
    pre.transform_matrix(row)  # caches the first fit's facts
    pre.fit(second, types)
    for A in (row, np.column_stack([second["a"], second["b"]])):
        assert_array_equal(pre.transform_matrix(A), pre.transform({"a": A[:, 0], "b": A[:, 1]}))
    fresh = TablePreprocessor(scale=True).fit(second, types)
    assert pickle.dumps(pre) == pickle.dumps(fresh)  # the cached facts stay out of the bundle
    restored = pickle.loads(pickle.dumps(pre))
    assert_array_equal(restored.transform_matrix(row), pre.transform_matrix(row))


def test_lists_scalars_and_all_missing_categorical():
    cols, types = _table()
    tp = TablePreprocessor(native_categorical=True).fit(cols, types)
    row_scalars = {"age": 20.0, "color": "red", "member": 1.0, "size": "S"}
    row_lists = {"age": [20.0], "color": ["red"], "member": [1.0], "size": ["S"]}
    X = tp.transform(cols)
    assert_array_equal(tp.transform(row_scalars), X[:1])
    assert_array_equal(tp.transform(row_lists), X[:1])
    assert_array_equal(tp.transform({k: list(v) for k, v in cols.items()}), X)
    empty = {"e": np.array([None, None, NAN], dtype=object), "x": np.array([1.0, 2.0, 3.0])}
    t2 = {"e": "categorical", "x": "numeric"}
    assert TablePreprocessor().fit(empty, t2).feature_names_out_ == ["x"]
    assert_array_equal(
        TablePreprocessor(native_categorical=True).fit(empty, t2).transform(empty)[:, 0], [0, 0, 0]
    )
    nm = TablePreprocessor(native_categorical=True, native_missing=True).fit(empty, t2)
    assert np.isnan(nm.transform(empty)[:, 0]).all()


def test_label_encoder_round_trip():
    from core.preprocessing import LabelEncoder

    le = LabelEncoder().fit(["b", "a", "c", "a"])
    assert le.classes_.tolist() == ["a", "b", "c"]
    assert le.transform(["c", "a"]).tolist() == [2, 0]
    assert le.inverse_transform([1, 2]).tolist() == ["b", "c"]
    assert LabelEncoder().fit_transform([3, 1, 3]).tolist() == [1, 0, 1]
    with pytest.raises(DataError, match="label 'z' was not seen at fit"):
        le.transform(["a", "z"])
    le2 = pickle.loads(pickle.dumps(le))
    assert le2.transform(["b"]).tolist() == [1]


def test_output_layout_names_the_input_of_every_output_column():
    cols, types = _table()
    with pytest.raises(NotFittedError):
        TablePreprocessor().numeric_outputs  # noqa: B018 - the property raises
    one_hot = TablePreprocessor().fit(cols, types)
    assert one_hot.numeric_outputs == [("age", 0), ("member", 4)]
    assert one_hot.category_outputs == [("color", 1, 3), ("size", 5, 3)]
    native = TablePreprocessor(native_categorical=True).fit(cols, types)
    assert native.numeric_outputs == [("age", 0), ("member", 2)]
    assert native.category_outputs == [("color", 1, 1), ("size", 3, 1)]
