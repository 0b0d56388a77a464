"""Shared machinery of the decision-tree estimators (and of the forests built on them).

Parameter resolution (scikit-learn semantics), class weights, post-pruning:

* reduced-error pruning ([Passerini §2.3.1]): grow on
  ``1 - validation_fraction`` of the data; repeatedly replace by a leaf the
  internal node whose removal gives the best validation improvement, while
  that improvement is >= 0 (a tie prunes: the smaller tree wins; the notes
  leave ties open, see docs/decisions/trees.md);
* minimal cost-complexity pruning (``ccp_alpha``, as scikit-learn): with
  R(t) = W_t / W_root * impurity(t), repeatedly prune the weakest link
  argmin_t (R(t) - R(T_t)) / (|leaves(T_t)| - 1) while it is <= ccp_alpha.
"""

from __future__ import annotations

import math

import numpy as np

from ..base import encode_targets
from ..context import NULL_CONTEXT
from ..model_selection.split import train_test_split_indices
from ..params import Choice, DictOf, Float, Int, OneOf, ParamError, Seed
from ..random import check_random_state
from ..validation import (
    DataError,
    check_array,
    check_categorical_features,
    check_predict_input,
    check_sample_weight,
    check_target,
    class_weight_vector,
)
from ._binning import (
    AUTO_HIST_MIN_SAMPLES,
    apply_category_groups,
    bin_features,
    group_categories,
)
from ._grower import grow_tree
from ._predictor import NodeTable
from ._pruning import cost_complexity_prune, reduced_error_prune

__all__ = ["Fraction", "tree_params", "group_rare", "regroup", "MIN_CATEGORY_COUNT",
           "resolve_tree_settings", "fit_one_tree",
           "reduced_error_prune", "cost_complexity_prune", "max_features_spec", "FitTarget",
           "classifier_target", "regressor_target", "BaseDecisionTree"]


class Fraction(Float):
    """A float fraction; rejects Python ints so that ``OneOf([Fraction, Int])`` reads 1.0 as 100%
    and 1 as one item (scikit-learn's convention)."""

    def _validate(self, value, name):
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            raise ParamError(name, f"must be a float fraction, got the integer {value!r}")
        return super()._validate(value, name)


MIN_CATEGORY_COUNT = Int(
    1, ge=1, le=1_000_000,
    doc="Categories of a categorical feature seen fewer times than this at fit share one 'other' category "
        "(so do categories first seen at predict time); 1: no grouping.",
)


def max_features_spec(default):
    return OneOf(
        default,
        options=[Choice("sqrt", choices=("sqrt", "log2")), Fraction(gt=0.0, le=1.0), Int(ge=1, le=1_000_000)],
        nullable=True,
        doc="Features considered per split: 'sqrt', 'log2', an int, a fraction, or null (all).",
    )


def tree_params(criteria: tuple[str, ...], default_criterion: str, *, max_features_default=None,
                classifier: bool = True, pruning: bool = True) -> dict:
    p = {
        "criterion": Choice(default_criterion, choices=criteria, doc="Split quality measure."),
        "splitter": Choice(
            "auto", choices=("auto", "exact", "hist"),
            doc=f"'exact': thresholds at midpoints of all distinct values; 'hist': at most max_bins "
                f"quantile bins per feature (fast on large data); 'auto': hist when n_samples > "
                f"{AUTO_HIST_MIN_SAMPLES}.",
        ),
        "max_bins": Int(255, ge=2, le=65535, doc="Bins per numeric feature in hist mode."),
        "max_depth": Int(None, ge=1, le=1_000, doc="Maximum depth (null: unlimited)."),
        "min_samples_split": OneOf(2, options=[Fraction(gt=0.0, le=1.0), Int(ge=2, le=1_000_000_000)],
                                   doc="Minimum samples to split a node (int or fraction)."),
        "min_samples_leaf": OneOf(1, options=[Fraction(gt=0.0, lt=1.0), Int(ge=1, le=1_000_000_000)],
                                  doc="Minimum samples in each child (int or fraction)."),
        "min_impurity_decrease": Float(0.0, ge=0.0, le=1e12, doc="Split only if W_t/W * gain >= this."),
        "max_features": max_features_spec(max_features_default),
        "min_category_count": MIN_CATEGORY_COUNT,
    }
    if pruning:
        p["pruning"] = Choice("none", choices=("none", "reduced_error"),
                              doc="Post-pruning on a held-out validation split.")
        p["validation_fraction"] = Float(0.2, gt=0.0, lt=1.0,
                                         doc="Held-out fraction for reduced-error pruning.")
    p["ccp_alpha"] = Float(0.0, ge=0.0, le=1e12, doc="Minimal cost-complexity pruning strength.")
    if classifier:
        p["class_weight"] = OneOf(
            None, options=[Choice("balanced", choices=("balanced",)), DictOf(Float(ge=0.0, le=1e12))],
            nullable=True, doc="null, 'balanced', or {label: weight}.",
        )
    p["random_state"] = Seed()
    return p


def resolve_max_features(mf, n_features: int) -> int:
    if mf is None:
        return n_features
    if mf == "sqrt":
        return max(1, int(math.sqrt(n_features)))
    if mf == "log2":
        return max(1, int(math.log2(n_features))) if n_features > 1 else 1
    if isinstance(mf, int):
        if mf > n_features:
            raise ParamError("max_features", f"must be <= n_features ({n_features}), got {mf}")
        return mf
    return max(1, int(mf * n_features))


def resolve_tree_settings(p: dict, n_samples: int, n_features: int) -> dict:
    mss = p["min_samples_split"]
    if isinstance(mss, float):
        mss = max(2, math.ceil(mss * n_samples))
    msl = p["min_samples_leaf"]
    if isinstance(msl, float):
        msl = max(1, math.ceil(msl * n_samples))
    return {
        "max_depth": p["max_depth"],
        "min_samples_split": float(mss),
        "min_samples_leaf": float(msl),
        "min_impurity_decrease": p["min_impurity_decrease"],
        "max_features": resolve_max_features(p["max_features"], n_features),
    }


def use_hist(p: dict, n_samples: int) -> bool:
    sp = p["splitter"]
    return sp == "hist" or (sp == "auto" and n_samples > AUTO_HIST_MIN_SAMPLES)


def prepare_X(X, categorical_features, *, name="X"):
    X = check_array(X, allow_nan=True, name=name)
    is_cat = check_categorical_features(categorical_features, X.shape[1])
    return X, is_cat


def group_rare(X, is_cat, p, max_categories=None):
    """Fit-time category grouping (``min_category_count``): ``(X grouped, the groups or None)``; the
    estimator keeps the groups for :func:`regroup`."""
    X, maps = group_categories(X, is_cat, p.get("min_category_count", 1), max_categories)
    return X, maps or None


def regroup(X, category_maps):
    """Predict-time: the fitted category groups (None: none) applied to a checked ``X``."""
    return apply_category_groups(X, category_maps)


def fit_one_tree(X, y, w, is_cat, p, *, regression: bool, n_classes: int, rng, y_raw=None,
                 stratify=None, binned=None):
    """Bin (unless ``binned`` is given, e.g. by AdaBoost across rounds), grow and post-prune one tree."""
    n, f = X.shape
    settings = resolve_tree_settings(p, n, f)
    criterion = p["criterion"]
    grow_rows = None  # every row (grow_tree builds the index itself and frees it after the root)
    val_rows = None
    if p.get("pruning", "none") == "reduced_error":
        try:
            grow_rows, val_rows = train_test_split_indices(
                n, p["validation_fraction"], stratify=stratify, random_state=int(rng.integers(2**31))
            )
        except DataError:
            grow_rows, val_rows = train_test_split_indices(
                n, p["validation_fraction"], random_state=int(rng.integers(2**31))
            )
    if binned is None:
        binned = bin_features(X, is_cat, hist=use_hist(p, n), max_bins=p["max_bins"], rng=rng)
    tree = grow_tree(
        binned, grow_rows, w if val_rows is None else w[grow_rows], y, criterion=criterion,
        n_classes=n_classes, rng=rng, y_raw=y_raw, **settings,
    )
    if val_rows is not None and val_rows.size:
        tree = reduced_error_prune(tree, X[val_rows], y[val_rows], w[val_rows], regression=regression)
    if p["ccp_alpha"] > 0:
        tree = cost_complexity_prune(tree, p["ccp_alpha"])
    return tree


# ----------------------------------------------------------------------------- twins' bases
class FitTarget:
    """What a classifier or regressor hands the shared ``fit``: the target the trees are grown on
    (class codes or floats), the number of classes (1: regression), sample weights (class weights
    applied), a per-bootstrap class-weight function (forests' ``balanced_subsample``), the raw target
    (absolute error), the stratification of a validation split, and the fitted attributes describing
    the target (``classes_``, ``n_classes_``)."""

    def __init__(self, y, n_classes, w, *, y_raw=None, class_weight_fn=None, stratify=None, attrs=None):
        self.y, self.n_classes, self.w = y, n_classes, w
        self.y_raw, self.class_weight_fn, self.stratify = y_raw, class_weight_fn, stratify
        self.attrs = attrs or {}


def classifier_target(y, n_samples: int, sample_weight, class_weight) -> FitTarget:
    """Labels encoded as class codes; ``class_weight`` applied to the weights (``balanced_subsample``:
    per bootstrap sample, as a function of the in-bag codes and counts)."""
    y = check_target(y, n_samples)
    classes, codes = encode_targets(y)
    K = len(classes)
    w = check_sample_weight(sample_weight, n_samples)
    cw_fn = None
    if class_weight == "balanced_subsample":
        def cw_fn(yc, cnt, K=K):
            per = np.bincount(yc, weights=cnt, minlength=K)
            with np.errstate(divide="ignore"):
                cwv = np.where(per > 0, cnt.sum() / (K * per), 0.0)
            return cwv[yc]
    else:
        if class_weight is not None:
            w = w * class_weight_vector(class_weight, classes, codes)[codes]
    return FitTarget(codes, K, w, class_weight_fn=cw_fn, stratify=codes,
                     attrs={"classes_": classes, "n_classes_": K})


def regressor_target(y, n_samples: int, sample_weight) -> FitTarget:
    y = check_target(y, n_samples, numeric=True)
    return FitTarget(y, 1, check_sample_weight(sample_weight, n_samples), y_raw=y)


class BaseDecisionTree:
    """``fit`` written once for the decision-tree twins (as scikit-learn's ``BaseDecisionTree``); the
    twins override ``_validate_y_class_weight`` and turn the leaf values into their output."""

    _regression: bool = False

    def fit(self, X, y=None, *, sample_weight=None, categorical_features=None, ctx=NULL_CONTEXT,
            _binned=None):
        """Fit; ``_binned`` (private) reuses the binning of the same X across boosting rounds."""
        p = self._validated_params()
        X, is_cat = prepare_X(X, categorical_features)
        X, self._category_maps = group_rare(X, is_cat, p)
        target = self._validate_y_class_weight(y, X.shape[0], sample_weight, p)
        rng = check_random_state(p["random_state"])
        tree = fit_one_tree(X, target.y, target.w, is_cat, p, regression=self._regression,
                            n_classes=target.n_classes, rng=rng, y_raw=target.y_raw,
                            stratify=target.stratify, binned=_binned)
        ctx.step(1, 1)
        imp = tree.feature_importances(X.shape[1])
        for k, v in target.attrs.items():
            setattr(self, k, v)
        self.n_features_in_ = X.shape[1]
        self.categorical_features_ = is_cat
        self.tree_ = tree
        self.feature_importances_ = imp / imp.sum() if imp.sum() > 0 else imp
        self._table = NodeTable([tree])
        return self

    def _validate_y_class_weight(self, y, n_samples: int, sample_weight, p) -> FitTarget:
        raise NotImplementedError

    def _tree_values(self, X) -> np.ndarray:
        """(n, V) leaf values (class distribution or mean; mixed over branches for missing values)."""
        X = regroup(check_predict_input(self, X, "tree_", allow_nan=True), getattr(self, "_category_maps", None))
        return self._table.mean_value(X)

    def apply(self, X):
        """Leaf index of each sample (rows without missing values)."""
        X = regroup(check_predict_input(self, X, "tree_"), getattr(self, "_category_maps", None))
        return self._table.leaves(X)[:, 0]

    def get_depth(self) -> int:
        return self.tree_.max_depth

    def get_n_leaves(self) -> int:
        return self.tree_.n_leaves
