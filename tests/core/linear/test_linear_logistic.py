"""logistic_regression / softmax_regression: solvers agree, sklearn parity, penalties, weights."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.linear_model import LogisticRegression as SkLogistic
from sklearn.multiclass import OneVsRestClassifier
from sklearn.preprocessing import StandardScaler

from core import registry
from core.model_selection.split import StratifiedKFold
from core.params import ParamError

LR = registry.get("logistic_regression")
Softmax = registry.get("softmax_regression")


def _scaled(loader, n=None):
    X, y = loader(return_X_y=True)
    if n is not None:
        idx = np.random.default_rng(0).permutation(len(y))[:n]
        X, y = X[idx], y[idx]
    return StandardScaler().fit_transform(X), y


def test_binary_loss_gradient_match_finite_differences():
    from core.linear._logistic import _Problem

    rng = np.random.default_rng(0)
    X = np.hstack([rng.normal(size=(30, 3)), np.ones((30, 1))])
    for multinomial, k, codes in ((False, 1, rng.integers(0, 2, 30)), (True, 3, rng.integers(0, 3, 30))):
        prob = _Problem(X, codes, rng.uniform(0.5, 2, 30), k, multinomial, 0.7, 1.0, True)
        th = rng.normal(size=k * 4)
        f, g = prob.loss_grad(th)
        eps = 1e-6
        num = np.array([(prob.loss_grad(th + eps * e)[0] - prob.loss_grad(th - eps * e)[0]) / (2 * eps)
                        for e in np.eye(len(th))])
        np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)
        H = prob.hessian(th)
        numH = np.array([(prob.grad(th + eps * e) - prob.grad(th - eps * e)) / (2 * eps)
                         for e in np.eye(len(th))])
        np.testing.assert_allclose(H, numH, rtol=1e-5, atol=1e-7)


def test_extreme_logits_stay_finite():
    X = np.array([[-1000.0], [-999.0], [999.0], [1000.0]])
    m = LR(penalty="none", max_iter=50).fit(X, [0, 0, 1, 1])
    P = m.predict_proba(np.array([[-1e6], [1e6]]))
    assert np.all(np.isfinite(P))
    np.testing.assert_allclose(P, [[1, 0], [0, 1]], atol=1e-12)
    assert np.all(np.isfinite(m.predict_log_proba(np.array([[-1e6], [1e6]]))))


@pytest.mark.parametrize("loader", [load_breast_cancer, load_iris])
def test_irls_equals_lbfgs(loader):
    X, y = _scaled(loader)
    a = LR(solver="lbfgs", tol=1e-10, max_iter=5000).fit(X, y)
    b = LR(solver="newton", tol=1e-10).fit(X, y)
    scale = np.abs(a.coef_).max()
    np.testing.assert_allclose(b.coef_, a.coef_, atol=1e-5 * scale)
    np.testing.assert_allclose(b.intercept_, a.intercept_, atol=1e-5 * scale)
    assert b.n_iter_ < 30  # Newton converges in few steps


@pytest.mark.parametrize("solver", ["gd", "sgd"])
def test_first_order_solvers_approach_optimum(solver):
    X, y = _scaled(load_iris)
    ref = LR(solver="newton", tol=1e-10).fit(X, y)
    kw = {"tol": 1e-9, "max_iter": 20000} if solver == "gd" else {"max_iter": 300, "random_state": 0}
    m = LR(solver=solver, **kw).fit(X, y)
    rel = np.abs(m.coef_ - ref.coef_).max() / np.abs(ref.coef_).max()
    assert rel < (1e-5 if solver == "gd" else 0.35)
    assert np.mean(m.predict(X) == ref.predict(X)) >= 0.97


@pytest.mark.parametrize("loader", [load_breast_cancer, load_wine, load_iris])
@pytest.mark.parametrize("C", [0.1, 1.0])
def test_l2_coefficients_match_sklearn(loader, C):
    X, y = _scaled(loader)
    ours = LR(C=C, tol=1e-10, max_iter=5000).fit(X, y)
    ref = SkLogistic(C=C, tol=1e-10, max_iter=5000).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-4, atol=1e-4 * np.abs(ref.coef_).max())
    tol = 1e-4 * np.abs(ref.coef_).max()
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=1e-4, atol=tol)
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-5)


def test_class_and_sample_weight_match_sklearn():
    X, y = _scaled(load_wine)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(y))
    for cw in ("balanced", {0: 2.0, 1: 1.0, 2: 0.5}):
        ours = LR(class_weight=cw if cw == "balanced" else {str(k): v for k, v in cw.items()},
                  tol=1e-10).fit(X, y, sample_weight=w)
        ref = SkLogistic(class_weight=cw, tol=1e-10, max_iter=5000).fit(X, y, sample_weight=w)
        np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-4, atol=1e-4 * np.abs(ref.coef_).max())


def test_no_penalty_and_no_intercept_match_sklearn():
    X, y = _scaled(load_breast_cancer)
    X = X[:, :5]
    ours = LR(penalty="none", tol=1e-10, max_iter=5000).fit(X, y)
    ref = SkLogistic(C=np.inf, tol=1e-10, max_iter=5000).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-4)
    ours = LR(fit_intercept=False, solver="newton", tol=1e-10).fit(X, y)
    ref = SkLogistic(fit_intercept=False, tol=1e-10, max_iter=5000).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-4)
    assert np.all(ours.intercept_ == 0)


@pytest.mark.parametrize("penalty,l1_ratio", [("l1", 1.0), ("elasticnet", 0.5)])
def test_l1_and_elasticnet_match_sklearn_saga(penalty, l1_ratio):
    X, y = _scaled(load_breast_cancer)
    ours = LR(penalty=penalty, l1_ratio=l1_ratio, C=0.1, solver="gd", tol=1e-10, max_iter=50000).fit(X, y)
    ref = SkLogistic(l1_ratio=l1_ratio, C=0.1, solver="saga", tol=1e-10, max_iter=50000).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, atol=1e-4 * np.abs(ref.coef_).max())
    if penalty == "l1":
        assert np.sum(ours.coef_ == 0) >= 10  # sparse, exactly zero
        assert np.array_equal(ours.coef_ == 0, np.abs(ref.coef_) < 1e-8)


def test_l1_needs_a_proximal_solver():
    X, y = _scaled(load_iris)
    with pytest.raises(ParamError) as info:
        LR(penalty="l1").fit(X, y)
    assert info.value.param == "solver"
    with pytest.raises(ParamError) as info:
        LR(class_weight={"nope": 1.0}).fit(X, y)
    assert info.value.param == "class_weight"


def test_ovr_matches_sklearn_one_vs_rest():
    X, y = _scaled(load_iris)
    ours = LR(multi_class="ovr", tol=1e-10).fit(X, y)
    ref = OneVsRestClassifier(SkLogistic(tol=1e-10, max_iter=5000)).fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-5)


def test_string_labels_and_softmax_entry():
    X, y = _scaled(load_iris)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    a = Softmax(tol=1e-10).fit(X, names)
    b = LR(tol=1e-10).fit(X, y)
    assert list(a.classes_) == list(names[[0, 50, 100]])
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), atol=1e-8)
    assert a.multi_class_ == "multinomial"
    # two classes: softmax keeps K weight vectors, logistic one
    yb = (y == 2).astype(int)
    s2 = Softmax(tol=1e-10).fit(X, yb)
    assert s2.coef_.shape == (2, 4)
    # penalised K-vector softmax on 2 classes = sigmoid model with w = w1 - w0 and C doubled
    l2 = LR(C=2.0, tol=1e-10).fit(X, yb)
    np.testing.assert_allclose(s2.coef_[1] - s2.coef_[0], l2.coef_[0], rtol=1e-4)


def _cv_accuracy(make_ours, make_ref, X, y):
    a, b = [], []
    for tr, te in StratifiedKFold(5, shuffle=True, random_state=0).split(X, y):
        a.append(np.mean(make_ours().fit(X[tr], y[tr]).predict(X[te]) == y[te]))
        b.append(np.mean(make_ref().fit(X[tr], y[tr]).predict(X[te]) == y[te]))
    return np.mean(a), np.mean(b)


@pytest.mark.parametrize("loader,n", [(load_iris, None), (load_wine, None), (load_breast_cancer, None),
                                      (load_digits, 600)])
def test_cv_accuracy_parity(loader, n):
    X, y = _scaled(loader, n)
    X = np.nan_to_num(X)
    a, b = _cv_accuracy(lambda: LR(), lambda: SkLogistic(max_iter=1000), X, y)
    assert abs(a - b) <= 0.01
    a, b = _cv_accuracy(lambda: LR(solver="newton"), lambda: SkLogistic(max_iter=1000), X, y)
    assert abs(a - b) <= 0.01
    a, b = _cv_accuracy(lambda: Softmax(), lambda: SkLogistic(max_iter=1000), X, y)
    assert abs(a - b) <= 0.01


def test_binary_single_row_predictions_match_the_batch_and_are_copies():
    """One row takes a shortcut (a slice of classes_, no NumPy comparison): the same labels as the batch path,
    row by row, on both sides of the boundary; never a view that could alter classes_."""
    X, y = _scaled(load_breast_cancer)
    labels = np.array(["malignant", "benign"], dtype=object)[y]
    m = LR().fit(X, labels)
    batch = m.predict(X)
    assert set(batch) == {"malignant", "benign"}
    single = np.concatenate([m.predict(X[i:i + 1]) for i in range(len(X))])
    assert single.dtype == batch.dtype and np.array_equal(single, batch)
    one = m.predict(X[:1])
    one[0] = "changed"
    assert "changed" not in m.classes_


@pytest.mark.parametrize("name", ["logistic_regression", "perceptron", "least_squares_classifier"])
def test_binary_linear_classifiers_label_single_rows_as_the_batch(name):
    """The shared label choice (core.linear._common.binary_labels) for every binary linear classifier: one row
    at a time gives the batch's labels; a NaN score gives the first class, as ``z > 0`` does."""
    from core.linear._common import binary_labels

    X, y = _scaled(load_breast_cancer)
    labels = np.array(["malignant", "benign"], dtype=object)[y]
    m = registry.get(name)().fit(X, labels)
    batch = m.predict(X)
    assert len(set(batch)) == 2
    assert np.array_equal(np.concatenate([m.predict(X[i:i + 1]) for i in range(0, len(X), 7)]), batch[::7])
    assert binary_labels(m.classes_, np.array([np.nan]))[0] == m.classes_[0]
    neg, pos = m.classes_
    assert list(binary_labels(m.classes_, np.array([np.nan, 1.0, -1.0]))) == [neg, pos, neg]


def test_one_row_predict_equals_the_batch_path_and_checks_the_same():
    """A single clean row takes predict's one-row path: the same label as the batch path's for every row, and
    rows with NaN or infinities still refused by the input check."""
    from core.validation import DataError

    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    labels = np.where(y == 1, "benign", "malignant")
    est = registry.get("logistic_regression")().fit(X, labels)
    batch = est.predict(X)
    one = [est.predict(np.ascontiguousarray(X[i:i + 1]))[0] for i in range(len(X))]
    assert one == batch.tolist()
    scores = est.decision_function(X)
    assert all((s > 0) == (lab == est.classes_[1]) for s, lab in zip(scores, one, strict=True))
    for bad in (np.nan, np.inf, -np.inf):
        row = X[:1].copy()
        row[0, 3] = bad
        with pytest.raises(DataError):
            est.predict(row)
    huge = np.full((1, X.shape[1]), 1e300)  # a finite row whose score overflows: predicted as before
    assert est.predict(huge).tolist() == est.predict(np.vstack([huge, huge]))[:1].tolist()


def test_one_row_predict_adds_the_intercept():
    """Uncentred data (the boundary at x0 = 6, far from the origin): the intercept decides most rows' labels, and
    a single row is labelled as the batch labels it."""
    rng = np.random.default_rng(11)
    X = rng.normal(6.0, 1.0, size=(300, 2))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=300) > 6.0, "high", "low")
    est = registry.get("logistic_regression")().fit(X, y)
    assert abs(est.intercept_[0]) > 1.0  # a large intercept
    batch = est.predict(X)
    assert 0.3 < np.mean(batch == "high") < 0.7
    without = np.where(X @ est.coef_[0] > 0, est.classes_[1], est.classes_[0])
    assert (without != batch).sum() > 50  # the intercept changes many labels
    assert [est.predict(np.ascontiguousarray(X[i:i + 1]))[0] for i in range(len(X))] == batch.tolist()
