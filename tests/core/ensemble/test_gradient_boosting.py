"""Histogram gradient boosting: losses, one-iteration hand computations, trees, missing values,
early stopping, sample weights, progress."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from core.context import FitCancelled, FitContext
from core.ensemble._hist_gradient_boosting.binning import BinMapper
from core.ensemble._hist_gradient_boosting.loss import (
    AbsoluteError,
    BinaryLogLoss,
    MultinomialLogLoss,
    SquaredError,
)
from core.ensemble.gradient_boosting_classifier import GradientBoostingClassifier
from core.ensemble.gradient_boosting_regressor import GradientBoostingRegressor
from core.params import ParamError
from core.validation import DataError


# -- losses ------------------------------------------------------------------------------
def _numeric_grad(loss_fn, raw, eps=1e-6):
    grad = np.zeros_like(raw)
    it = np.nditer(raw, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        up, dn = raw.copy(), raw.copy()
        up[i] += eps
        dn[i] -= eps
        grad[i] = (loss_fn(up) - loss_fn(dn)) / (2 * eps)
    return grad


@pytest.mark.parametrize("loss", [SquaredError(), BinaryLogLoss(), AbsoluteError()])
def test_gradients_match_finite_differences(loss):
    rng = np.random.default_rng(0)
    n = 7
    y = rng.integers(0, 2, n).astype(float) if isinstance(loss, BinaryLogLoss) else rng.normal(size=n)
    raw = rng.normal(size=n) + (0.3 if isinstance(loss, AbsoluteError) else 0.0)
    w = rng.uniform(0.5, 2.0, size=n)
    g, h = np.empty(n), np.empty(n)
    loss.grad_hess(y, raw, w, g, h)
    # loss() is the weighted mean; the per-sample gradient is d(sum_i w_i l_i)/d raw_i
    num = _numeric_grad(lambda r: loss.loss(y, r, w) * w.sum(), raw)
    np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-6)
    if isinstance(loss, BinaryLogLoss):
        num_h = _numeric_grad(lambda r: _grad(loss, y, r, w).sum(), raw)
        np.testing.assert_allclose(h, num_h, rtol=1e-4, atol=1e-6)
    elif isinstance(loss, SquaredError) and not isinstance(loss, AbsoluteError):
        np.testing.assert_allclose(h, w)


def test_binary_log_loss_sigmoid_matches_expit_to_a_few_ulps_over_the_whole_range():
    """The gradients' 1 / (1 + e^-raw) (NumPy's exp, faster than scipy.special.expit) agrees with expit
    to 4 ulps, saturates to exactly 0 and 1, and never warns on overflow."""
    from scipy.special import expit

    from core.ensemble._hist_gradient_boosting.loss import _sigmoid

    raw = np.concatenate([np.linspace(-745, 745, 20_001), [-1e308, -710.0, -709.0, 0.0, 37.0, 1e308]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = _sigmoid(raw)
    ref = expit(raw)
    assert p[raw == -1e308][0] == 0.0 and p[raw == 1e308][0] == 1.0 and p[raw == 0.0][0] == 0.5
    tiny = ref > 0
    assert np.all(np.abs(p - ref)[tiny] <= 4 * np.spacing(ref[tiny]))
    assert np.all(p[~tiny] == 0.0)


def _grad(loss, y, raw, w):
    g, h = np.empty_like(raw), np.empty_like(raw)
    loss.grad_hess(y, raw, w, g, h)
    return g


def test_multinomial_gradient_and_diagonal_hessian():
    rng = np.random.default_rng(1)
    n, K = 6, 3
    y = rng.integers(0, K, n)
    raw = rng.normal(size=(n, K))
    loss = MultinomialLogLoss(K)
    g, h = np.empty((K, n)), np.empty((K, n))
    loss.grad_hess(y, raw, None, g, h)
    num = _numeric_grad(lambda r: loss.loss(y, r, None) * n, raw)
    np.testing.assert_allclose(g.T, num, rtol=1e-5, atol=1e-7)
    p = np.exp(raw) / np.exp(raw).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(h.T, p * (1 - p))
    # baseline: centred log class priors
    base = loss.baseline(y, None)
    prior = np.bincount(y, minlength=K) / n
    np.testing.assert_allclose(np.exp(base) / np.exp(base).sum(), prior)


# -- one boosting iteration by hand -------------------------------------------------------
def test_regression_one_iteration_by_hand():
    X = np.array([[0.0], [1.0], [2.0], [3.0], [4.0], [5.0]])
    y = np.array([1.0, 2.0, 1.5, 7.0, 8.0, 9.0])
    lr, l2 = 0.3, 0.5
    est = GradientBoostingRegressor(
        max_iter=1, learning_rate=lr, l2_regularization=l2, max_leaf_nodes=2, min_samples_leaf=1
    ).fit(X, y)
    base = y.mean()
    g = base - y  # h = 1
    # best stump: evaluate every threshold by the gain formula
    gains = []
    for t in range(1, 6):
        GL, HL, GR, HR = g[:t].sum(), t, g[t:].sum(), 6 - t
        gains.append(GL**2 / (HL + l2) + GR**2 / (HR + l2))
    t = int(np.argmax(gains)) + 1
    assert t == 3
    left = base - lr * g[:t].sum() / (t + l2)
    right = base - lr * g[t:].sum() / (6 - t + l2)
    expected = np.where(X[:, 0] < t, left, right)
    np.testing.assert_allclose(est.predict(X), expected, rtol=1e-12)
    # threshold at the midpoint of 2 and 3
    np.testing.assert_allclose(est.predict([[2.49], [2.51]]), [left, right])


def test_binary_one_iteration_by_hand():
    X = np.array([[0.0], [1.0], [2.0], [3.0], [4.0], [5.0], [6.0]])
    y = np.array([0, 0, 1, 0, 1, 1, 1])
    lr, l2 = 0.5, 0.2
    est = GradientBoostingClassifier(
        max_iter=1, learning_rate=lr, l2_regularization=l2, max_leaf_nodes=2, min_samples_leaf=2
    ).fit(X, y)
    p0 = y.mean()
    f0 = np.log(p0 / (1 - p0))
    g = p0 - y
    h = np.full(7, p0 * (1 - p0))
    best = None
    for t in range(2, 6):  # min_samples_leaf = 2 on both sides
        G_L, H_L, G_R, H_R = g[:t].sum(), h[:t].sum(), g[t:].sum(), h[t:].sum()
        gain = G_L**2 / (H_L + l2) + G_R**2 / (H_R + l2)
        if best is None or gain > best[0]:
            best = (gain, t, G_L, H_L, G_R, H_R)
    _, t, G_L, H_L, G_R, H_R = best
    raw = np.where(np.arange(7) < t, f0 - lr * G_L / (H_L + l2), f0 - lr * G_R / (H_R + l2))
    np.testing.assert_allclose(est.decision_function(X), raw, rtol=1e-12)
    np.testing.assert_allclose(est.predict_proba(X)[:, 1], 1 / (1 + np.exp(-raw)), rtol=1e-12)


def test_multiclass_one_iteration_grows_one_tree_per_class():
    X = np.arange(9, dtype=float)[:, None]
    y = np.array(["a"] * 3 + ["b"] * 3 + ["c"] * 3)
    lr = 0.1
    est = GradientBoostingClassifier(max_iter=1, learning_rate=lr, max_leaf_nodes=2, min_samples_leaf=3)
    est.fit(X, y)
    assert est.n_trees_per_iteration_ == 3 and est._ensemble.n_trees == 3
    # uniform priors -> baseline 0, p = 1/3, g = 1/3 - [y=k], h = 2/9
    raw = est.decision_function(X)
    # class "a": the best split isolates the three "a" rows: leaf value -lr * G / H
    G_in, H_in = 3 * (1 / 3 - 1), 3 * 2 / 9
    np.testing.assert_allclose(raw[:3, 0], -lr * G_in / H_in)
    assert list(est.classes_) == ["a", "b", "c"]
    assert (est.predict(X) == y).all()


def test_absolute_error_leaves_are_median_residuals():
    X = np.array([[0.0], [1.0], [2.0], [3.0], [4.0], [5.0]])
    y = np.array([0.0, 1.0, 10.0, 20.0, 21.0, 50.0])
    est = GradientBoostingRegressor(
        loss="absolute_error", max_iter=1, learning_rate=1.0, max_leaf_nodes=2, min_samples_leaf=3
    ).fit(X, y)
    base = np.median(y)
    expected = np.where(X[:, 0] < 3, base + np.median(y[:3] - base), base + np.median(y[3:] - base))
    np.testing.assert_allclose(est.predict(X), expected)


# -- trees -------------------------------------------------------------------------------
def _leaves_and_depth(ens, t):
    lo, hi = ens.tree_slices[t]
    internal = ens.is_internal[lo:hi]
    return int((~internal).sum())


def test_tree_size_limits():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 5))
    y = np.sin(X[:, 0] * 2) + X[:, 1] ** 2 + 0.1 * rng.normal(size=600)
    est = GradientBoostingRegressor(max_iter=5, max_leaf_nodes=7, min_samples_leaf=5).fit(X, y)
    assert all(_leaves_and_depth(est._ensemble, t) <= 7 for t in range(5))
    assert _leaves_and_depth(est._ensemble, 0) == 7
    est = GradientBoostingRegressor(max_iter=5, max_leaf_nodes=None, max_depth=2, min_samples_leaf=5)
    est.fit(X, y)
    assert est._ensemble.max_depth == 2
    est = GradientBoostingRegressor(max_iter=1, min_samples_leaf=100).fit(X, y)
    # each leaf keeps at least 100 training rows (leaf values are distinct)
    _, counts = np.unique(est.predict(X), return_counts=True)
    assert len(counts) >= 3 and counts.min() >= 100


def test_binning_quantiles_and_missing_bin():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=1000), rng.integers(0, 5, 1000).astype(float)])
    X[::10, 0] = np.nan
    bm = BinMapper(16).fit(X, rng)
    Xb = bm.transform_T(X)
    assert Xb.dtype == np.uint8
    assert bm.n_bins_non_missing_.tolist() == [16, 5]
    assert bm.missing_bin_ == 16
    assert (Xb[0, ::10] == 16).all() and (Xb[0, 1::10] < 16).all()
    # bins are roughly equally populated
    counts = np.bincount(Xb[0][Xb[0] < 16], minlength=16)
    assert counts.min() > 0.8 * 900 / 16
    # bin b holds edges[b-1] < x <= edges[b]
    e = bm.edges_[1]
    np.testing.assert_allclose(e, [0.5, 1.5, 2.5, 3.5])
    assert (Xb[1] == X[:, 1]).all()


def test_single_row_equals_batch_prediction():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 6))
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) > 0).astype(int)
    est = GradientBoostingClassifier(max_iter=20, random_state=0).fit(X, y)
    batch = est.predict_proba(X)
    rows = np.vstack([est.predict_proba(X[i : i + 1]) for i in range(40)])
    np.testing.assert_allclose(rows, batch[:40], rtol=1e-12)
    # the binned (training) route and the raw-threshold route agree
    out = np.zeros((400, 1))
    est._ensemble.predict_raw(est._bin_mapper.transform_T(X), out, binned=True)
    np.testing.assert_allclose(out[:, 0] + est._baseline[0], est.decision_function(X), rtol=1e-12)


@pytest.mark.parametrize("max_leaf_nodes", [31, 60, None])
def test_batch_prediction_routes_agree(max_leaf_nodes):
    """Leaf-bitmask (QuickScorer) batch route == index partition == level-wise descent, with NaN,
    +-inf, categorical features and unseen/negative category codes; uint32 (<= 32 leaves),
    uint64 (<= 64) and unlimited leaves (no bitmask tables)."""
    rng = np.random.default_rng(1)
    n = 1500
    X = rng.normal(size=(n, 5))
    X[:, 2] = rng.integers(0, 7, n)
    y = (X[:, 0] + (X[:, 2] % 3 == 1) + 0.5 * rng.normal(size=n) > 0.5).astype(int) + (X[:, 1] > 1)
    X[rng.random(X.shape) < 0.1] = np.nan
    Xt = rng.normal(size=(3000, 5))
    Xt[:, 2] = rng.integers(-1, 10, 3000)
    Xt[rng.random(Xt.shape) < 0.1] = np.nan
    Xt[:5, 0], Xt[5:10, 0] = np.inf, -np.inf
    est = GradientBoostingClassifier(max_iter=10, early_stopping=False, max_leaf_nodes=max_leaf_nodes,
                                     min_samples_leaf=3, random_state=0)
    est.fit(X, y, categorical_features=[2])
    ens = est._ensemble
    tables = ens._bitmask_tables()
    assert (tables is None) == (max_leaf_nodes is None)
    if tables is not None:
        assert tables[0] == (np.uint32 if max_leaf_nodes <= 32 else np.uint64)
    outs = []
    for route in ("_predict_bitmask", "_predict_partition", "_predict_levels"):
        if route == "_predict_bitmask" and tables is None:
            continue
        out = np.zeros((len(Xt), 3))
        if route == "_predict_partition":
            ens._predict_partition(Xt, out, False)
        else:
            getattr(ens, route)(Xt, out)
        outs.append(out)
    for out in outs[1:]:
        np.testing.assert_allclose(out, outs[0], rtol=1e-12, atol=1e-12)


# -- missing values ----------------------------------------------------------------------
def test_missing_direction_is_learned():
    rng = np.random.default_rng(0)
    n = 600
    X = rng.normal(size=(n, 3))
    y = rng.integers(0, 2, n)
    # the label is carried only by missingness of feature 0
    X[y == 1, 0] = np.nan
    est = GradientBoostingClassifier(max_iter=10, random_state=0).fit(X, y)
    assert est.score(X, y) == 1.0
    Xt = rng.normal(size=(50, 3))
    Xt[:25, 0] = np.nan
    assert (est.predict(Xt[:25]) == 1).all() and (est.predict(Xt[25:]) == 0).all()


def test_missing_at_predict_only_goes_to_larger_child():
    X = np.arange(100, dtype=float)[:, None]
    y = (X[:, 0] >= 30).astype(float)
    est = GradientBoostingRegressor(max_iter=1, max_leaf_nodes=2, learning_rate=1.0).fit(X, y)
    # no NaN seen at fit: NaN follows the child with more samples (x >= 30, 70 rows)
    assert est.predict([[np.nan]])[0] == pytest.approx(est.predict([[80.0]])[0])


# -- early stopping ----------------------------------------------------------------------
def test_early_stopping_stops_and_auto_rule():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 5))
    y = (X[:, 0] + rng.normal(scale=2.0, size=1500) > 0).astype(int)  # noisy: overfits fast
    est = GradientBoostingClassifier(
        max_iter=300, early_stopping=True, n_iter_no_change=5, random_state=0
    ).fit(X, y)
    assert est.n_iter_ < 100
    assert len(est.validation_score_) == est.n_iter_ + 1
    best = int(np.argmax(est.validation_score_))
    assert est.n_iter_ - best >= 5  # stopped after 5 iterations without improvement
    auto = GradientBoostingClassifier(max_iter=15, random_state=0).fit(X, y)  # auto: off below 10000 rows
    assert auto.n_iter_ == 15 and auto.validation_score_.size == 0
    reg = GradientBoostingRegressor(max_iter=300, early_stopping=True, n_iter_no_change=3, random_state=1)
    reg.fit(X, X[:, 0] + rng.normal(size=1500))
    assert reg.n_iter_ < 300


# -- sample weights ----------------------------------------------------------------------
@pytest.mark.parametrize("cls", [GradientBoostingRegressor, GradientBoostingClassifier])
def test_integer_sample_weight_equals_repeated_rows(cls):
    rng = np.random.default_rng(0)
    X = rng.integers(0, 20, size=(120, 3)).astype(float)
    y = X[:, 0] - X[:, 1] + rng.normal(size=120)
    if cls is GradientBoostingClassifier:
        y = (y > 0).astype(int)
    w = rng.integers(1, 4, 120)
    kw = dict(max_iter=10, min_samples_leaf=1, max_leaf_nodes=8)
    a = cls(**kw).fit(X, y, sample_weight=w.astype(float))
    b = cls(**kw).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    fa = a.predict(X) if cls is GradientBoostingRegressor else a.decision_function(X)
    fb = b.predict(X) if cls is GradientBoostingRegressor else b.decision_function(X)
    np.testing.assert_allclose(fa, fb, rtol=1e-8, atol=1e-10)


def test_zero_weight_rows_are_ignored():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = X[:, 0] * 2.0
    w = np.ones(200)
    y_bad = y.copy()
    y_bad[:50] = 1000.0
    w[:50] = 0.0
    est = GradientBoostingRegressor(max_iter=30, min_samples_leaf=5).fit(X, y_bad, sample_weight=w)
    assert abs(est.predict(X[50:]) - y[50:]).max() < 3.0


# -- progress, errors --------------------------------------------------------------------
def test_one_progress_step_per_iteration_and_cancel():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    calls = []
    ctx = FitContext(on_progress=lambda f, m: calls.append((f, m)), min_interval=0.0)
    GradientBoostingClassifier(max_iter=12).fit(X, y, ctx=ctx)
    assert len(calls) == 12
    assert calls[-1][0] == 1.0 and calls[0][1]["iteration"] == 1
    n = [0]

    def cancel():
        n[0] += 1
        return n[0] > 3

    est = GradientBoostingClassifier(max_iter=50)
    with pytest.raises(FitCancelled):
        est.fit(X, y, ctx=FitContext(is_cancelled=cancel, cancel_interval=0.0))
    assert not hasattr(est, "n_iter_")


def test_errors():
    X = np.zeros((10, 2))
    with pytest.raises(ParamError, match="max_bins"):
        GradientBoostingRegressor(max_bins=256).fit(X, np.zeros(10))
    with pytest.raises(DataError):
        GradientBoostingClassifier().fit(X, np.zeros(10))
    with pytest.raises(DataError, match="infinity"):
        GradientBoostingRegressor().fit(np.full((10, 2), np.inf), np.zeros(10))
    Xr = np.random.default_rng(0).normal(size=(30, 2))
    est = GradientBoostingRegressor(max_iter=2).fit(Xr, np.arange(30.0))
    with pytest.raises(DataError, match="features"):
        est.predict(np.zeros((2, 3)))


# -- native categorical features ----------------------------------------------------------
def test_categorical_subset_split_in_one_stump():
    rng = np.random.default_rng(0)
    c = rng.integers(0, 12, 600).astype(float)
    y = np.isin(c, [1, 4, 6, 9]).astype(int)
    X = np.column_stack([c, rng.normal(size=600)])
    est = GradientBoostingClassifier(max_iter=1, max_leaf_nodes=2, min_samples_leaf=1, learning_rate=1.0)
    est.fit(X, y, categorical_features=[0])
    assert est.is_categorical_.tolist() == [True, False]
    ens = est._ensemble
    assert ens.feature[0] == 0 and ens.cat_index[0] == 0
    left = np.flatnonzero(ens.cat_table[0][:12])
    assert left.tolist() in ([1, 4, 6, 9], [0, 2, 3, 5, 7, 8, 10, 11])
    assert (est.predict(X) == y).all()
    # NaN and categories never seen in training follow the larger child (the 8 "other" categories)
    other = est.decision_function([[0.0, 0.0]])[0]
    for code in (np.nan, 12.0, 40.0, -3.0):
        assert est.decision_function([[code, 0.0]])[0] == pytest.approx(other)
    # ordinal thresholds cannot do it in one split
    ordinal = GradientBoostingClassifier(max_iter=1, max_leaf_nodes=2, min_samples_leaf=1).fit(X, y)
    assert ordinal.score(X, y) < 1.0


def test_categorical_missing_is_its_own_category_and_batch_equals_single_rows():
    rng = np.random.default_rng(1)
    c = rng.integers(0, 6, 800).astype(float)
    c[rng.random(800) < 0.2] = np.nan
    y = (np.isnan(c) | (c == 2)).astype(int)
    X = np.column_stack([c, rng.normal(size=800)])
    est = GradientBoostingClassifier(max_iter=5, min_samples_leaf=5)
    est.fit(X, y, categorical_features=[True, False])
    assert est.score(X, y) == 1.0
    batch = est.predict_proba(X)
    rows = np.vstack([est.predict_proba(X[i : i + 1]) for i in range(30)])
    np.testing.assert_allclose(rows, batch[:30], rtol=1e-12)
    with pytest.raises(DataError, match="categor"):
        GradientBoostingClassifier().fit(X + 0.5, y, categorical_features=[0])


def test_quantile_edges_match_numpy_percentile():
    from core.ensemble._hist_gradient_boosting.binning import _quantiles_sorted

    rng = np.random.default_rng(0)
    for n in (256, 300, 999, 12345):
        for data in (rng.normal(size=n), rng.integers(0, 500, n).astype(float)):
            ref = np.percentile(data, np.linspace(0, 100, 256)[1:-1], method="averaged_inverted_cdf")
            np.testing.assert_array_equal(_quantiles_sorted(np.sort(data), 255), ref)


def test_histograms_without_scipys_private_kernel_give_the_same_model(monkeypatch):
    """The np.bincount fallback (used when scipy.sparse._sparsetools.csc_matvecs is unavailable)."""
    import core.ensemble._hist_gradient_boosting.histogram as tree_mod
    from core import registry

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 5))
    X[::11, 2] = np.nan
    y = (X[:, 0] + np.nan_to_num(X[:, 2]) > 0).astype(int)
    cls = registry.get("gradient_boosting_classifier")
    fast = cls(max_iter=15, random_state=0, early_stopping=False).fit(X, y)
    monkeypatch.setattr(tree_mod, "_csc_matvecs", None)
    slow = cls(max_iter=15, random_state=0, early_stopping=False).fit(X, y)
    np.testing.assert_allclose(slow.predict_proba(X), fast.predict_proba(X), rtol=1e-9, atol=1e-12)


def _direct_hist(XbT, g, h, rows, n_bins):
    """(3, F, n_bins) sums of g, h and counts of ``rows`` by np.bincount, the reference."""
    return np.stack([np.stack([np.bincount(XbT[f, rows], w, n_bins) for f in range(len(XbT))])
                     for w in (g[rows], h[rows], None)])


def test_histograms_match_a_direct_count():
    import core.ensemble._hist_gradient_boosting.histogram as tree_mod

    rng = np.random.default_rng(1)
    n, F, n_bins = 10_000, 4, 8
    XbT = rng.integers(0, n_bins, size=(F, n)).astype(np.uint8)
    idx = np.sort(rng.choice(n, 9_000, replace=False))
    hb = tree_mod.HistogramBuilder(XbT, n_bins, constant_hessian=False)
    hb.g[0] = rng.normal(size=n)
    hb.h[0] = rng.uniform(0.1, 1.0, size=n)
    for rows in (None, idx, idx[:100]):
        r = np.arange(n) if rows is None else rows
        ref = _direct_hist(XbT, hb.g[0], hb.h[0], r, n_bins)
        np.testing.assert_allclose(hb(rows), ref, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("constant_hessian", [False, True])
@pytest.mark.parametrize("n_workers", [1, 2])
def test_root_histogram_with_cached_counts_matches_a_direct_count(constant_hessian, n_workers):
    """HistogramBuilder.root_hist: the sparse product carries g (and h) only; counts are cached; with two
    workers the forked process sums the second row part."""
    import core.ensemble._hist_gradient_boosting.histogram as tree_mod

    rng = np.random.default_rng(3)
    n, F, n_bins = 9_000, 3, 7  # >= _TWO_PARTS_MIN_ROWS: two row parts
    XbT = rng.integers(0, n_bins, size=(F, n)).astype(np.uint8)
    with tree_mod.HistogramBuilder(XbT, n_bins, constant_hessian, n_workers=n_workers) as hb:
        assert hb.two_parts and (hb._worker is not None) == (n_workers == 2)
        for _ in range(2):  # the second call reuses the cached counts with new gradients
            hb.g[0] = rng.normal(size=n)
            if not constant_hessian:
                hb.h[0] = rng.uniform(0.1, 1.0, size=n)
            hist = hb.root_hist(np.empty((3, F, n_bins)))
            h = np.ones(n) if constant_hessian else hb.h[0]
            ref = _direct_hist(XbT, hb.g[0], h, np.arange(n), n_bins)
            np.testing.assert_allclose(hist, ref, rtol=1e-12, atol=1e-9)


def _grow_by_hand(XbT, g, h, missing_bin, n_workers, cat_set):
    """Two trees of three splits each (the root, its left child, then that child's right child on a
    categorical rule), histogramming one side each time; the histograms and every leaf's rows."""
    import core.ensemble._hist_gradient_boosting.histogram as tree_mod

    out = []
    n = XbT.shape[1]
    with tree_mod.HistogramBuilder(XbT, missing_bin + 1, constant_hessian=False, n_workers=n_workers) as hb:
        assert (hb._worker is not None) == (n_workers == 2)
        hb.g[0], hb.h[0] = g, h
        for _ in range(2):  # the worker drops its rows at the end of each tree
            go = (XbT[1] <= 2) | (XbT[1] == missing_bin)
            left, right, hist = hb.split((None, None), (0, 1, 2), 1, 2, True, None, int(go.sum()), 0)
            out.append(hist.copy())
            rows1 = np.flatnonzero(go)
            go1 = XbT[0, rows1] <= 4
            ll, lr, hist = hb.split(left, (1, 3, 4), 0, 4, False, None, int(go1.sum()), 1)
            out.append(hist.copy())
            rows4 = rows1[~go1]
            go4 = cat_set[XbT[2, rows4]]
            a, b, hist = hb.split(lr, (4, 5, 6), 2, 0, False, cat_set, int(go4.sum()), None)
            assert hist is None
            out.append(hb.leaf_rows([(2, right, n - len(rows1)), (3, ll, int(go1.sum())),
                                     (5, a, int(go4.sum())), (6, b, len(rows4) - int(go4.sum()))]))
        assert hb.leaf_rows([(0, (None, None), n)]) == [(0, None)]  # a tree that never split
    return out


def test_split_partitions_rows_and_histograms_one_child_with_one_or_two_workers():
    """HistogramBuilder.split / leaf_rows: stable partitions of both row parts (the second one in the forked
    worker with two workers), the chosen child's histogram, and every leaf's rows in ascending order; the
    histograms of both modes are bit-identical."""
    rng = np.random.default_rng(2)
    n, F, missing_bin = 12_000, 3, 6
    XbT = rng.integers(0, missing_bin + 1, size=(F, n)).astype(np.uint8)
    g, h = rng.normal(size=n), rng.uniform(0.1, 1.0, size=n)
    cat_set = np.array([True, False, False, True, False, True, True])
    one = _grow_by_hand(XbT, g, h, missing_bin, 1, cat_set)
    two = _grow_by_hand(XbT, g, h, missing_bin, 2, cat_set)
    rows1 = np.flatnonzero((XbT[1] <= 2) | (XbT[1] == missing_bin))
    rows3 = rows1[XbT[0, rows1] <= 4]
    rows4 = rows1[XbT[0, rows1] > 4]
    expected = {2: np.setdiff1d(np.arange(n), rows1), 3: rows3, 5: rows4[cat_set[XbT[2, rows4]]],
                6: rows4[~cat_set[XbT[2, rows4]]]}
    for out in (one, two):
        for t in range(2):
            hist_left, hist_right, leaves = out[3 * t : 3 * t + 3]
            np.testing.assert_allclose(hist_left, _direct_hist(XbT, g, h, rows1, missing_bin + 1), rtol=1e-12,
                                       atol=1e-9)
            np.testing.assert_allclose(hist_right, _direct_hist(XbT, g, h, rows4, missing_bin + 1), rtol=1e-12,
                                       atol=1e-9)
            assert sorted(i for i, _ in leaves) == [2, 3, 5, 6]
            for i, rows in leaves:
                np.testing.assert_array_equal(rows, expected[i])
    for a, b in zip(one, two, strict=True):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)


def test_binning_fit_transform_shares_the_sort_and_matches_fit_then_transform():
    """BinMapper.fit_transform_T (one argsort per column) gives fit(X).transform_T(X)'s edges and bins."""
    from core.ensemble._hist_gradient_boosting.binning import BinMapper

    rng = np.random.default_rng(4)
    X = rng.normal(size=(3_000, 5))
    X[rng.random(X.shape) < 0.05] = np.nan
    X[:, 1] = np.round(X[:, 1] * 3)  # few distinct values: midpoints; NaN kept
    X[:, 2] = np.nan  # all missing
    X[:, 4] = rng.integers(0, 6, len(X))  # categorical codes
    cat = np.array([False, False, False, False, True])
    ref = BinMapper(255, cat).fit(X, np.random.default_rng(0))
    for n_threads in (1, 2):  # two threads take the columns in turn: the same edges and bins
        mapper = BinMapper(255, cat)
        XbT = mapper.fit_transform_T(X, np.random.default_rng(0), n_threads=n_threads)
        np.testing.assert_array_equal(XbT, ref.transform_T(X))
        assert mapper.missing_bin_ == ref.missing_bin_
        np.testing.assert_array_equal(mapper.n_bins_non_missing_, ref.n_bins_non_missing_)
        for a, b in zip(mapper.edges_, ref.edges_, strict=True):
            np.testing.assert_array_equal(a, b)
        assert (XbT[2] == mapper.missing_bin_).all() and (XbT[0][np.isnan(X[:, 0])] == mapper.missing_bin_).all()


def test_binning_on_two_threads_reports_the_first_bad_categorical_column():
    """A bad categorical column fails the fit on two threads as on one: the first such column is named."""
    from core.ensemble._hist_gradient_boosting.binning import BinMapper
    from core.validation import DataError

    X = np.random.default_rng(0).integers(0, 4, size=(500, 6)).astype(float)
    X[7, 2] = -1.0
    X[9, 4] = 0.5
    cat = np.array([False, True, True, False, True, False])
    for n_threads in (1, 2):
        with pytest.raises(DataError, match="categorical feature 2 must hold non-negative integer"):
            BinMapper(255, cat).fit_transform_T(X, np.random.default_rng(0), n_threads=n_threads)


def test_split_finder_without_missing_values_skips_the_missing_direction_with_the_same_splits():
    """SplitFinder(may_have_missing=False), used when no training row is missing, gives the same splits."""
    import core.ensemble._hist_gradient_boosting.histogram as tree_mod
    import core.ensemble._hist_gradient_boosting.splitting as splitting

    rng = np.random.default_rng(5)
    F, n_bins = 4, 9
    XbT = rng.integers(0, n_bins - 1, size=(F, 500)).astype(np.uint8)  # the last (missing) bin is empty
    assert not tree_mod.HistogramBuilder(XbT, n_bins, constant_hessian=False).has_missing
    XbT[2, ::7] = n_bins - 1
    assert tree_mod.HistogramBuilder(XbT, n_bins, constant_hessian=False).has_missing
    for k in (1, 2):
        hist = rng.uniform(0.5, 2.0, size=(k, 3, F, n_bins))
        hist[:, 0] -= 1.25  # gradients of both signs
        hist[:, 2] = np.round(hist[:, 2] * 5)
        hist[..., -1] = 0.0  # no missing values
        cum = np.cumsum(hist, axis=-1)
        G, H, C = (list(cum[:, j, 0, -1]) for j in range(3))
        for l2, check_hessian in ((0.0, False), (1.0, True)):
            args = (F, n_bins, None, l2, 2, check_hessian)
            with np.errstate(divide="ignore", invalid="ignore"):  # as the grower calls it
                full = splitting.SplitFinder(*args)(cum, G, H, C)
                fast = splitting.SplitFinder(*args, may_have_missing=False)(cum, G, H, C)
            assert fast == full
            assert any(s is not None for s in full)



def test_histogram_pair_buffers_consolidated_or_not_give_the_same_trees():
    """grow_tree's pair buffers: the children own the halves (no copies); without a free buffer two
    half-held ones are consolidated.  Trees match those grown with plenty of free buffers (no
    consolidation), each buffer is returned once, and few are allocated."""
    import core.ensemble._hist_gradient_boosting.grower as grower
    import core.ensemble._hist_gradient_boosting.histogram as tree_mod

    rng = np.random.default_rng(6)
    n, F, missing_bin = 4_000, 6, 15
    XbT = rng.integers(0, missing_bin + 1, size=(F, n)).astype(np.uint8)
    gs = [rng.normal(size=n) for _ in range(3)]
    hs = [rng.uniform(0.1, 1.0, size=n) for _ in range(3)]
    kw = dict(constant_hessian=False, valid_bins=np.ones((F, missing_bin), dtype=bool), missing_bin=missing_bin,
              learning_rate=0.1, l2=0.0, max_depth=None, min_samples_leaf=5)

    def grow(n_seeded, max_leaf_nodes):
        hb = tree_mod.HistogramBuilder(XbT, missing_bin + 1, constant_hessian=False)
        hb.hist_buffers.extend(np.empty((2, 3, F, missing_bin + 1)) for _ in range(n_seeded))
        trees = []
        for g, h in zip(gs, hs, strict=True):  # buffers are reused from one tree to the next
            hb.g[0], hb.h[0] = g, h
            trees.append(grower.grow_tree(hb, hb.g[0], hb.h[0], max_leaf_nodes=max_leaf_nodes, **kw)[0])
        return trees, hb.hist_buffers

    for max_leaf_nodes in (31, None):
        trees, buffers = grow(0, max_leaf_nodes)
        assert len({id(b) for b in buffers}) == len(buffers)  # no buffer returned twice
        if max_leaf_nodes is not None:
            assert len(buffers) <= max_leaf_nodes // 2 + 2
        assert trees == grow(400, max_leaf_nodes)[0]
        assert len(trees[0]["feature"]) > 40


def test_blocked_cumulative_sum_matches_numpy_on_contiguous_and_strided_histograms():
    """_cumsum_bins (blocked matmuls for multiples of 16 bins, np.cumsum otherwise) equals np.cumsum."""
    from core.ensemble._hist_gradient_boosting.splitting import cumsum_bins as _cumsum_bins

    rng = np.random.default_rng(2)
    for n_bins in (256, 64, 17):
        contiguous = rng.normal(size=(3, 5, n_bins))
        strided = rng.normal(size=(5, n_bins, 3)).transpose(2, 0, 1)  # HistogramBuilder's accumulation layout
        for hist in (contiguous, strided):
            np.testing.assert_allclose(_cumsum_bins(hist), np.cumsum(hist, axis=-1), rtol=1e-12, atol=1e-12)
            out = np.empty(hist.shape)
            assert _cumsum_bins(hist, out=out) is out
