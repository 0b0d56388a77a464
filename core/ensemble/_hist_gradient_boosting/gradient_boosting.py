"""Shared engine of the histogram gradient boosting classifier and regressor.

Gradient boosting ([Colombo §3.4.2] describes boosting in words; [da Silva Neto §1.8.5])
fits an additive model ``F_M(x) = F_0 + sum_m f_m(x)`` stage-wise: at iteration
``m`` each tree ``f_m`` is a second-order (Newton) fit to the loss gradients
``g_i`` and hessians ``h_i`` at ``F_{m-1}``, with leaf values
``-learning_rate * G / (H + l2_regularization)`` (``grower``).
Features are binned once (``binning``); trees grow leaf-wise on the bins (``grower``) from
histograms (``histogram``) scored by ``splitting``; ``predictor`` holds the fitted trees and ``loss`` the
losses.  ``n_jobs`` >= 2 lets a large fit fork one worker process for half of its rows (``worker``, behind
``HistogramBuilder``): the same model as on one process.
Early stopping watches the loss on a held-out validation split.
"""

from __future__ import annotations

import numpy as np

from ...memory import boosting_fit
from ...model_selection.split import train_test_split_indices
from ...params import Bool, Choice, Float, Int, OneOf, ParamError, Seed
from ...random import check_random_state
from ...tree._base import MIN_CATEGORY_COUNT
from ...tree._binning import apply_category_groups, group_categories
from ...validation import check_categorical_features, check_predict_input, check_sample_weight
from .binning import BinMapper
from .grower import TreeGrower
from .histogram import HistogramBuilder, max_workers
from .loss import AbsoluteError, weighted_median
from .predictor import TreeEnsemble, predict_nodes_binned

__all__ = ["HistGradientBoostingMixin", "COMMON_PARAMS"]

# rows x trees below which a fit stays in one process (forking the worker costs a few milliseconds)
_PARALLEL_MIN_WORK = 200_000

COMMON_PARAMS = {
    "learning_rate": Float(0.1, gt=0.0, le=1e6, doc="Shrinkage applied to every leaf value."),
    "max_iter": Int(100, ge=1, le=10_000, doc="Boosting iterations (trees per class)."),
    "max_leaf_nodes": Int(31, ge=2, le=1_000_000, nullable=True, doc="Maximum leaves per tree (null: unlimited)."),
    "max_depth": Int(None, ge=1, le=1_000, doc="Maximum depth of each tree (null: unlimited)."),
    "min_samples_leaf": Int(20, ge=1, le=1_000_000_000, doc="Minimum number of training samples per leaf."),
    "l2_regularization": Float(0.0, ge=0.0, le=1e12, doc="L2 penalty on leaf values (added to the hessian sum)."),
    "max_bins": Int(255, ge=2, le=255, doc="Bins per feature for non-missing values (NaN gets one more); a "
                    "categorical feature with more categories keeps the max_bins - 1 most frequent and groups the "
                    "rest."),
    "min_category_count": MIN_CATEGORY_COUNT,
    "early_stopping": OneOf(
        "auto",
        [Choice("auto", ["auto"]), Bool()],
        doc="Stop when the validation loss stops improving ('auto': when n_samples > 10000).",
    ),
    "scoring": Choice("loss", ["loss"], doc="Early-stopping criterion (the loss on the validation split)."),
    "validation_fraction": Float(0.1, gt=0.0, lt=1.0, doc="Fraction held out for early stopping."),
    "n_iter_no_change": Int(10, ge=1, le=100_000, doc="Stop after this many iterations without improvement > tol."),
    "tol": Float(1e-7, ge=0.0, le=1e6, doc="Minimum improvement of the validation score."),
    "n_jobs": Int(None, ge=-1, le=1024, doc="Processes of one fit (null: 1; -1: all cores; at most 2 are used): "
                  "with 2, a fit of at least 8,192 rows forks a worker process for half of the rows. The same "
                  "model for any value."),
    "random_state": Seed(),
}


class HistGradientBoostingMixin:
    """Fit loop and raw prediction; subclasses choose the loss and the output map."""

    supports_sample_weight = True
    native_missing = True
    native_categorical = True
    reports_progress = True
    fit_memory = boosting_fit()  # peak memory model (core/memory.py)
    uses_hist_workers = True  # the service sets n_jobs (when a request leaves it null) from ORCHARD_HIST_WORKERS

    # read-only views of the fitted state, which bundles pickle under its private names
    @property
    def ensemble_(self) -> TreeEnsemble:
        """The fitted trees (their node arrays; tree inspection reads them)."""
        return self._ensemble

    @property
    def baseline_(self) -> np.ndarray:
        """The raw prediction before any tree, ``F_0``: one value per output."""
        return self._baseline

    def _fit_boosting(self, X, y, stratify, sample_weight, ctx, p, loss, categorical_features=None):
        """Fit; returns the fitted state as a dict (assigned by the caller at the end)."""
        n, n_features = X.shape
        rng = check_random_state(p["random_state"])
        w_all = None if sample_weight is None else check_sample_weight(sample_weight, n)
        # None stays None (the bin mapper reads it as "no categorical column")
        cat = None if categorical_features is None else check_categorical_features(categorical_features, n_features)
        X, category_maps = group_categories(X, cat, p.get("min_category_count", 1), p["max_bins"])
        early = p["early_stopping"]
        if early == "auto":
            early = n > 10_000
        if early:
            tr, va = train_test_split_indices(
                n, p["validation_fraction"], stratify=stratify, random_state=rng
            )
            X_tr, y_tr, X_va, y_va = X[tr], y[tr], X[va], y[va]
            w_tr = None if w_all is None else w_all[tr]
            w_va = None if w_all is None else w_all[va]
        else:
            X_tr, y_tr, w_tr = X, y, w_all
        K = loss.n_outputs
        # two workers (a forked process for half of the rows; two threads for the binning) only where the
        # fit is large enough to gain
        n_jobs = p.get("n_jobs")
        if n_jobs == 0:
            raise ParamError("n_jobs", "must not be 0 (use null for one process, -1 for all cores)")
        n_workers = max_workers(n_jobs) if X_tr.shape[0] * K * p["max_iter"] >= _PARALLEL_MIN_WORK else 1
        mapper = BinMapper(p["max_bins"], cat)
        XbT = mapper.fit_transform_T(X_tr, rng, n_threads=n_workers)
        XvT = mapper.transform_T(X_va) if early else None
        missing_bin = mapper.missing_bin_
        valid_bins = np.arange(missing_bin)[None, :] < mapper.n_bins_non_missing_[:, None]
        valid_bins[mapper.is_categorical_] = False  # categorical features: subset splits instead
        baseline = np.asarray(loss.baseline(y_tr, w_tr), dtype=np.float64)
        raw_va = np.tile(baseline, (len(y_va), 1)) if early else None
        constant_hessian = loss.constant_hessian and w_tr is None
        ensemble = TreeEnsemble(K, missing_bin)
        hist_builder = HistogramBuilder(XbT, missing_bin + 1, constant_hessian, K, n_workers)
        g, h = hist_builder.g, hist_builder.h  # (K, n) views: the loss writes in place
        raw = hist_builder.raw  # (n, K): shared with the worker, which updates and differentiates its part
        raw[:] = baseline

        def gradients(lo, hi):  # the loss's gradients/hessians of rows [lo, hi), in place
            ww = None if w_tr is None else w_tr[lo:hi]
            if K == 1:
                loss.grad_hess(y_tr[lo:hi], raw[lo:hi, 0], ww, g[0, lo:hi], h[0, lo:hi])
            else:
                loss.grad_hess(y_tr[lo:hi], raw[lo:hi], ww, g[:, lo:hi], h[:, lo:hi])

        hist_builder.gradient_fn = gradients
        is_abs = isinstance(loss, AbsoluteError)
        grow_kw = dict(
            constant_hessian=constant_hessian,
            valid_bins=valid_bins,
            missing_bin=missing_bin,
            learning_rate=p["learning_rate"],
            l2=p["l2_regularization"],
            max_leaf_nodes=p["max_leaf_nodes"],
            max_depth=p["max_depth"],
            min_samples_leaf=p["min_samples_leaf"],
            categorical=np.flatnonzero(mapper.is_categorical_),
        )

        def total_loss(yy, rr, ww):
            return loss.loss(yy, rr[:, 0] if K == 1 else rr, ww)

        train_scores, val_scores = [], []
        if early:
            train_scores.append(-total_loss(y_tr, raw, w_tr))
            val_scores.append(-total_loss(y_va, raw_va, w_va))
        n_iter = 0
        max_iter = p["max_iter"]
        with hist_builder:
            for it in range(max_iter):
                hist_builder.gradients()
                for k in range(K):
                    hist_builder.use_output(k)
                    nodes, leaves = TreeGrower(hist_builder, g[k], h[k], **grow_kw).grow()
                    if is_abs:
                        # absolute error: the Newton leaf value is only a direction;
                        # re-set each leaf to the (weighted) median residual (as scikit-learn)
                        col = raw[:, k]
                        for node_id, idx in hist_builder.leaf_rows(leaves):
                            rows = slice(None) if idx is None else idx
                            resid = y_tr[rows] - col[rows]
                            ww = None if w_tr is None else w_tr[rows]
                            nodes["value"][node_id] = p["learning_rate"] * weighted_median(resid, ww)
                            col[rows] += nodes["value"][node_id]
                    else:
                        hist_builder.add_leaf_values(leaves, nodes["value"], k)
                    if early:
                        predict_nodes_binned(nodes, XvT, missing_bin, raw_va[:, k])
                    ensemble.add(nodes, mapper.edges_, k)
                n_iter = it + 1
                metrics = {"iteration": n_iter}
                if early:
                    train_scores.append(-total_loss(y_tr, raw, w_tr))
                    val_scores.append(-total_loss(y_va, raw_va, w_va))
                    metrics["train_loss"] = -train_scores[-1]
                    metrics["validation_loss"] = -val_scores[-1]
                ctx.step(n_iter, max_iter, **metrics)
                if early and self._should_stop(val_scores, p["n_iter_no_change"], p["tol"]):
                    break
        if n_iter < max_iter:
            ctx.step(max_iter, max_iter, iteration=n_iter, stopped_early=True)
        return {
            "_ensemble": ensemble.finalize(),
            "_baseline": baseline,
            "_bin_mapper": mapper,
            "n_iter_": n_iter,
            "n_trees_per_iteration_": K,
            "train_score_": np.asarray(train_scores),
            "validation_score_": np.asarray(val_scores),
            "is_categorical_": mapper.is_categorical_,
            "_category_maps": category_maps or None,
            "n_features_in_": n_features,
        }

    @staticmethod
    def _should_stop(scores, n_iter_no_change, tol):
        """scikit-learn's rule: no score in the last n_iter_no_change beats the one before by > tol."""
        if len(scores) <= n_iter_no_change:
            return False
        reference = scores[-n_iter_no_change - 1] + tol
        return not any(s > reference for s in scores[-n_iter_no_change:])

    def _raw_predict(self, X):
        X = check_predict_input(self, X, "_ensemble", allow_nan=True)
        X = apply_category_groups(X, getattr(self, "_category_maps", None))
        out = np.empty((X.shape[0], len(self._baseline)))
        out[:] = self._baseline
        return self._ensemble.predict_raw(X, out)

