"""Estimates of a fit's peak memory, from the shape of the data and the hyperparameters alone.

``Estimator.fit_memory(n_samples, n_features, params, n_outputs=1)`` returns a :class:`FitMemory`: bytes, the
cause in words, and the hyperparameter that drives it (None when the rows do). The service compares it with
its limit before queueing a training job, so that a request such as 10,000 unlimited-depth trees on a million
rows, an MLP with 100,000-unit layers or a kernel method on 50,000 rows is refused at once instead of growing a
worker until it dies. The estimates are upper-bound models of the dominant allocations, not measurements:

* generic: a few copies of the float64 training matrix (validation, scaling, the fitted state);
* kernel methods, Gaussian processes, spectral and hierarchical clustering: ``m`` dense n x n float64 matrices;
* trees and forests: trees x nodes per tree x bytes per node (nodes bounded by the rows per tree, the leaf size
  and the depth);
* histogram gradient boosting: rounds x trees per round x nodes, plus the histograms of a tree's leaves, the
  binned matrix and the gradients;
* MLPs: the weights four times (weights, gradients and two optimiser moments) and the activations of a batch
  and of the whole training set (the training metrics predict it at once).

The factors were checked against tracemalloc peaks of real fits (fit + predict on the training rows, a few
thousand rows): docs/decisions/resource-guards.md.

Families choose a model with one class attribute, e.g. ``fit_memory = kernel_fit(3)``; the base class uses
the generic one. Nothing here reads the environment: the limit is the caller's.
"""

from __future__ import annotations

import math
from typing import NamedTuple

__all__ = ["FitMemory", "generic_bytes", "generic_fit", "kernel_fit", "forest_fit", "boosting_fit", "mlp_fit",
           "kernel_cache_fit"]

F8 = 8
GENERIC_COPIES = 6
NODE_BYTES = 48  # a tree node: feature, threshold, two children, impurity, weight (value rows added per output)


class FitMemory(NamedTuple):
    bytes: int
    cause: str
    param: str | None = None


def generic_bytes(n_samples: int, n_features: int) -> int:
    return F8 * n_samples * max(1, n_features) * GENERIC_COPIES


def generic_fit(cls, n_samples: int, n_features: int, params: dict, n_outputs: int = 1) -> FitMemory:
    return FitMemory(generic_bytes(n_samples, n_features),
                     f"{GENERIC_COPIES} copies of the {n_samples} x {n_features} training matrix")


def kernel_fit(matrices: float, what: str = "kernel"):
    """``matrices`` dense n x n float64 matrices (a Gram matrix, its factor, gradients...)."""

    def fit_memory(cls, n_samples, n_features, params, n_outputs=1) -> FitMemory:
        n = int(n_samples)
        return FitMemory(int(matrices * F8 * n * n) + generic_bytes(n, n_features),
                         f"{matrices:g} dense {n} x {n} {what} matrices (memory grows with the square of the rows)")

    return classmethod(fit_memory)


def kernel_cache_fit():
    """SMO-type solvers: a kernel-row cache bounded by ``cache_size`` MB (twice: the cache and a full Gram
    matrix for multi-class problems when it fits the cache)."""

    def fit_memory(cls, n_samples, n_features, params, n_outputs=1) -> FitMemory:
        n = int(n_samples)
        cache = min(F8 * n * n, float(params.get("cache_size") or 200.0) * 1e6)
        return FitMemory(int(2 * cache) + generic_bytes(n, n_features),
                         f"the kernel cache ({cache / 1e6:.0f} MB of rows of the {n} x {n} kernel matrix)",
                         "cache_size")

    return classmethod(fit_memory)


def _leaf_size(value, n: int) -> int:
    if value is None:
        return 1
    if isinstance(value, float) and value < 1:
        return max(1, math.ceil(value * n))
    return max(1, int(value))


def _nodes(rows: int, min_leaf: int, max_depth, max_leaves=None) -> int:
    nodes = 2 * max(1, rows // min_leaf) - 1
    if max_depth is not None:
        nodes = min(nodes, 2 ** (int(max_depth) + 1) - 1)
    if max_leaves is not None:
        nodes = min(nodes, 2 * int(max_leaves) - 1)
    return max(1, nodes)


def _grouped_growth_bytes(trees: int, rows: int, n_features: int, max_features) -> int:
    """Per-(row, candidate feature) temporaries of the split search (~200 bytes a pair) for a group of
    trees grown together: the group holds <= 65,536 (row, tree) pairs and a chunk <= 65,536 pairs
    (core/ensemble/_forest.py, core/tree/_splitter.py)."""
    f = max(1, int(n_features))
    if max_features is None:
        mf = f
    elif max_features == "sqrt":
        mf = max(1, int(math.sqrt(f)))
    elif max_features == "log2":
        mf = max(1, int(math.log2(f))) if f > 1 else 1
    elif isinstance(max_features, float):
        mf = max(1, int(max_features * f))
    else:
        mf = min(f, int(max_features))
    group_rows = min(trees, max(1, (1 << 16) // max(rows, 1))) * rows
    return 200 * min(group_rows * mf, 1 << 16)


def forest_fit(default_trees: int = 1):
    """Trees x nodes: ``n_estimators`` trees (``default_trees`` when there is no such parameter), each on a
    bootstrap of ``max_samples`` rows, no deeper than ``max_depth``, leaves of at least ``min_samples_leaf``."""

    def fit_memory(cls, n_samples, n_features, params, n_outputs=1) -> FitMemory:
        n = int(n_samples)
        trees = int(params.get("n_estimators") or default_trees)
        ms = params.get("max_samples")
        rows = n if ms is None else (math.ceil(ms * n) if isinstance(ms, float) else min(n, int(ms)))
        nodes = _nodes(rows, _leaf_size(params.get("min_samples_leaf"), rows), params.get("max_depth"),
                       params.get("max_leaf_nodes"))
        per_node = NODE_BYTES + F8 * max(1, n_outputs)
        total = trees * nodes * per_node + generic_bytes(n, n_features)
        if trees > 1:  # a forest grows trees on small data together: the split search's temporaries
            total += _grouped_growth_bytes(trees, rows, n_features, params.get("max_features"))
        return FitMemory(int(total), f"{trees} trees of up to {nodes} nodes each",
                         "n_estimators" if "n_estimators" in cls.params else "max_depth")

    return classmethod(fit_memory)


def boosting_fit():
    """Histogram gradient boosting: ``max_iter`` rounds of one tree per class (one for two classes or a
    regression), at most ``max_leaf_nodes`` leaves; the binned matrix (one byte per value) and the gradients."""

    def fit_memory(cls, n_samples, n_features, params, n_outputs=1) -> FitMemory:
        n = int(n_samples)
        per_round = n_outputs if n_outputs > 2 else 1
        trees = int(params.get("max_iter") or 100) * per_round
        nodes = _nodes(n, _leaf_size(params.get("min_samples_leaf", 20), n), params.get("max_depth"),
                       params.get("max_leaf_nodes"))
        leaves = (nodes + 1) // 2
        histograms = leaves * max(1, n_features) * 256 * 3 * F8  # gradient/hessian/count bins of a tree's leaves
        total = (trees * nodes * (NODE_BYTES + 16) + histograms + n * max(1, n_features)
                 + 4 * F8 * n * per_round + 4 * generic_bytes(n, n_features))
        return FitMemory(int(total), f"{trees} trees of up to {nodes} nodes each", "max_iter")

    return classmethod(fit_memory)


def mlp_fit():
    """A multi-layer perceptron: the weights (and biases) four times over, the activations and deltas of one
    batch, and the activations of the whole training set (metrics predict it at once)."""

    def fit_memory(cls, n_samples, n_features, params, n_outputs=1) -> FitMemory:
        n = int(n_samples)
        hidden = [int(h) for h in (params.get("hidden_layer_sizes") or [100])]
        sizes = [max(1, n_features), *hidden, max(1, n_outputs)]
        weights = sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:], strict=True))
        bs = params.get("batch_size")
        batch = min(n, 200 if not isinstance(bs, int) else bs)
        units = sum(sizes)
        total = F8 * (4 * weights + 2 * batch * units + 2 * n * max(sizes)) + generic_bytes(n, n_features)
        return FitMemory(int(total), f"a network of {weights:,} weights (layers {sizes}) on {n} rows",
                         "hidden_layer_sizes")

    return classmethod(fit_memory)
