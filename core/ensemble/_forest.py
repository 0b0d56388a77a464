"""Shared random-forest machinery ([Passerini §2.4, §16.1]).

A forest bins the training matrix ONCE and grows every tree on a bootstrap
sample given as integer counts used as sample weights (equivalent to
resampling, and cheaper), choosing the best split among ``max_features``
randomly drawn features at each node.  Trees are grown in a thread pool when
``n_jobs`` asks for it: the heavy NumPy kernels (bincount, sort, cumsum) release
the GIL.  Progress: one ``ctx.step`` per finished tree; cancellation is checked
there, so it takes effect within one tree.

All trees are stacked into one node table (core.tree._tree.NodeTable) so a
batch -- or a single row -- is predicted for every tree at once, looping only
over depth levels.
"""

from __future__ import annotations

import os
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import numpy as np

from ..context import NULL_CONTEXT, FitCancelled
from ..params import Bool, Choice, DictOf, Float, Int, OneOf, ParamError, Seed
from ..random import check_random_state, spawn_seeds
from ..tree._base import (
    MIN_CATEGORY_COUNT,
    FitTarget,
    Fraction,
    group_rare,
    max_features_spec,
    prepare_X,
    regroup,
    resolve_tree_settings,
    use_hist,
)
from ..tree._binning import AUTO_HIST_MIN_SAMPLES, bin_features
from ..tree._grower import TreeGrower
from ..tree._predictor import NodeTable
from ..validation import check_predict_input

__all__ = ["BaseForest", "forest_params", "fit_forest", "resolve_n_jobs"]

# trees grown together: at most this many (row, tree) pairs and this many trees per group
_GROUP_ROWS = 1 << 16
_GROUP_TREES = 100


def forest_params(criteria, default_criterion, *, max_features_default, classifier: bool) -> dict:
    p = {
        "n_estimators": Int(100, ge=1, le=10_000, doc="Number of trees."),
        "criterion": Choice(default_criterion, choices=criteria),
        "splitter": Choice(
            "auto", choices=("auto", "exact", "hist"),
            doc=f"Split finding: exact midpoints, or max_bins quantile bins ('auto': hist when "
                f"n_samples > {AUTO_HIST_MIN_SAMPLES}).",
        ),
        "max_bins": Int(255, ge=2, le=65535),
        "max_depth": Int(None, ge=1, le=1_000),
        "min_samples_split": OneOf(2, options=[Fraction(gt=0.0, le=1.0), Int(ge=2, le=1_000_000_000)]),
        "min_samples_leaf": OneOf(1, options=[Fraction(gt=0.0, lt=1.0), Int(ge=1, le=1_000_000_000)]),
        "min_impurity_decrease": Float(0.0, ge=0.0, le=1e12),
        "max_features": max_features_spec(max_features_default),
        "bootstrap": Bool(True, doc="Grow each tree on a bootstrap sample."),
        "max_samples": OneOf(None, options=[Fraction(gt=0.0, le=1.0), Int(ge=1, le=1_000_000_000)], nullable=True,
                             doc="Bootstrap sample size (null: n_samples)."),
        "oob_score": Bool(False, doc="Compute the out-of-bag score (needs bootstrap)."),
        "ccp_alpha": Float(0.0, ge=0.0, le=1e12),
        "min_category_count": MIN_CATEGORY_COUNT,
    }
    if classifier:
        p["voting"] = Choice("soft", choices=("soft", "hard"),
                             doc="soft: average class probabilities; hard: majority vote.")
        p["class_weight"] = OneOf(
            None,
            options=[Choice("balanced", choices=("balanced", "balanced_subsample")), DictOf(Float(ge=0.0, le=1e12))],
            nullable=True,
        )
    p["n_jobs"] = Int(None, ge=-1, le=1024, doc="Threads growing trees (null: 1; -1: all cores).")
    p["random_state"] = Seed()
    return p


def resolve_n_jobs(n_jobs) -> int:
    if n_jobs is None:
        return 1
    if n_jobs == 0:
        raise ParamError("n_jobs", "must not be 0 (use null for one thread, -1 for all cores)")
    cores = os.cpu_count() or 1
    return cores if n_jobs < 0 else min(n_jobs, cores)


def fit_forest(X, y, w, is_cat, p, *, regression: bool, n_classes: int, ctx, y_raw=None,
               class_weight_fn=None):
    """Grow ``n_estimators`` trees; returns (trees, in_bag_counts or None)."""
    n, f = X.shape
    rng = check_random_state(p["random_state"])
    settings = resolve_tree_settings(p, n, f)
    binned = bin_features(X, is_cat, hist=use_hist(p, n), max_bins=p["max_bins"], rng=rng)
    T = p["n_estimators"]
    seeds = spawn_seeds(rng, T)
    if not p["bootstrap"] and p["oob_score"]:
        raise ParamError("oob_score", "out-of-bag estimation needs bootstrap=true")
    ms = p["max_samples"]
    if ms is None:
        n_draw = n
    elif isinstance(ms, float):
        n_draw = max(1, int(round(ms * n)))
    else:
        if ms > n:
            raise ParamError("max_samples", f"must be <= n_samples ({n}), got {ms}")
        n_draw = ms
    need_counts = p["bootstrap"] and p["oob_score"]
    ccp = p["ccp_alpha"]

    def bag(seed):
        """(rows, weights, generator, in-bag counts) of one tree."""
        trng = np.random.default_rng(seed)
        if p["bootstrap"]:
            counts = np.bincount(trng.integers(0, n, size=n_draw), minlength=n)
            rows = np.flatnonzero(counts)
            tw = w[rows] * counts[rows]
            if class_weight_fn is not None:
                tw = tw * class_weight_fn(y[rows], counts[rows])
        else:
            counts = None
            rows = np.arange(n)
            tw = w if class_weight_fn is None else w * class_weight_fn(y, np.ones(n))
        return rows, tw, trng, counts

    def grow(group):
        """Grow a group of trees together (one pass per level for all of them)."""
        bags = [bag(seeds[i]) for i in group]
        trees = TreeGrower(binned, [b[:3] for b in bags], y, criterion=p["criterion"], n_classes=n_classes,
                           y_raw=y_raw, **settings).grow()
        if ccp > 0:
            from ..tree._pruning import cost_complexity_prune

            trees = [cost_complexity_prune(t, ccp) for t in trees]
        return [(t, (b[3] if need_counts else None)) for t, b in zip(trees, bags, strict=True)]

    # trees are grown in groups whose rows together stay within a budget: on small data a level of
    # many trees costs about what a level of one does; on large data every group is one tree
    per_group = max(1, min(_GROUP_ROWS // max(n_draw if p["bootstrap"] else n, 1), _GROUP_TREES))
    groups = [list(range(a, min(T, a + per_group))) for a in range(0, T, per_group)]
    n_jobs = resolve_n_jobs(p["n_jobs"])
    results: list = [None] * T
    done = 0
    if n_jobs == 1 or len(groups) == 1:
        for g in groups:
            for i, r in zip(g, grow(g), strict=True):
                results[i] = r
                done += 1
                ctx.step(done, T)
    else:
        with ThreadPoolExecutor(max_workers=n_jobs) as ex:
            futs = {ex.submit(grow, g): g for g in groups}
            pending = set(futs)
            try:
                while pending:
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for fu in finished:
                        for i, r in zip(futs[fu], fu.result(), strict=True):
                            results[i] = r
                            done += 1
                            ctx.step(done, T)
            except FitCancelled:
                for fu in pending:
                    fu.cancel()
                raise
    trees = [r[0] for r in results]
    counts = [r[1] for r in results] if need_counts else None
    return trees, counts


def oob_values(table: NodeTable, X: np.ndarray, counts: list, chunk: int = 4096):
    """Per sample: sum over the trees where it is out of bag of their values, and how many such trees."""
    n = X.shape[0]
    V = table.value.shape[1]
    inbag = np.stack(counts, axis=1) > 0  # (n, T)
    total = np.zeros((n, V))
    for a in range(0, n, chunk):
        vals = table.per_tree_values(X[a : a + chunk])  # (c, T, V)
        oob = ~inbag[a : a + chunk]
        total[a : a + chunk] = (vals * oob[:, :, None]).sum(axis=1)
    n_oob = (~inbag).sum(axis=1)
    return total, n_oob


class BaseForest:
    """``fit`` written once for the random-forest twins (as scikit-learn's ``BaseForest``).

    The twins override the hooks: ``_validate_y_class_weight`` (targets, class weights, the fitted
    attributes that describe the target), ``_oob_score_and_attributes`` (out-of-bag score) and the
    prediction from the averaged tree values.
    """

    _regression: bool = False

    def fit(self, X, y=None, *, sample_weight=None, categorical_features=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, is_cat = prepare_X(X, categorical_features)
        X, self._category_maps = group_rare(X, is_cat, p)
        target = self._validate_y_class_weight(y, X.shape[0], sample_weight, p)
        trees, counts = fit_forest(X, target.y, target.w, is_cat, p, regression=self._regression,
                                   n_classes=target.n_classes, ctx=ctx, y_raw=target.y_raw,
                                   class_weight_fn=target.class_weight_fn)
        table = NodeTable(trees)
        table.prepare_batch()  # batch-predict tables (a fraction of a second for 100 deep trees)
        imp = np.zeros(X.shape[1])
        for t in trees:
            ti = t.feature_importances(X.shape[1])
            if ti.sum() > 0:
                imp += ti / ti.sum()
        oob = self._oob_score_and_attributes(table, X, target.y, counts) if counts is not None else {}
        for k, v in target.attrs.items():
            setattr(self, k, v)
        self.n_features_in_ = X.shape[1]
        self.categorical_features_ = is_cat
        self.trees_ = trees
        self.feature_importances_ = imp / imp.sum() if imp.sum() > 0 else imp
        for k, v in oob.items():
            setattr(self, k, v)
        self._table = table
        return self

    def _checked_X(self, X) -> np.ndarray:
        return regroup(check_predict_input(self, X, "trees_", allow_nan=True),
                       getattr(self, "_category_maps", None))

    def _forest_values(self, X) -> np.ndarray:
        """(n, V) average over the trees of their (class distribution or mean) values."""
        X = self._checked_X(X)
        return self._table.mean_value(X)

    # ------------------------------------------------------------------ hooks
    def _validate_y_class_weight(self, y, n_samples: int, sample_weight, p) -> FitTarget:
        raise NotImplementedError

    def _oob_score_and_attributes(self, table: NodeTable, X, y, counts) -> dict:
        raise NotImplementedError
