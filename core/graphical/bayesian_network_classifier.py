"""``bayesian_network_classifier``: a discrete Bayesian network over the features and the class.

[Passerini §6-8]: the class posterior ``P(y | x_observed)`` is computed
by exact inference (variable elimination, ``core.graphical.bayesian_network``) in a network
with a given DAG, or the naive-Bayes structure ``y -> every feature`` by default.  CPTs are
fitted by MLE (``alpha=0``) or Dirichlet MAP ``(N + alpha) / sum(N + alpha)`` ([Passerini §7.6]);
with missing values they are fitted by EM ([Passerini §7.7-7.8]), one ``ctx.step`` per EM step.

Node encoding of ``edges`` (list of ``[parent, child]`` pairs):
  * an integer ``j`` is feature column ``j`` of ``X`` (0-based, the order the service uses);
  * ``"y"`` (or ``"target"``) is the class node.
  Example: ``[["y", 0], ["y", 1], [0, 1]]`` = class -> x0, class -> x1, x0 -> x1.
  The DAG is exactly the given edges: a feature in no edge is independent of the class and
  does not influence predictions.  ``edges=None`` is the naive structure.

Features: columns in ``categorical_features`` hold category codes 0..k-1 (NaN = missing).
Other numeric columns are discretised into ``n_bins`` quantile bins fitted on the training data
(see docs/decisions/bayesian_network_classifier.md).  With ``categorical_features`` not given,
a column whose observed values are non-negative integers with at most 50 distinct values is
taken as categorical and every other column is binned.  Codes unseen at fit time (>= the
fitted cardinality) are treated as missing at prediction time and marginalised out.
"""

from __future__ import annotations

import numpy as np

from ..base import Classifier
from ..context import NULL_CONTEXT
from ..params import Choice, Float, Int, ListOf, OneOf, ParamError
from ..registry import register
from ..validation import (
    DataError,
    check_categorical_features,
    check_predict_input,
    check_sample_weight,
    check_X_y,
)
from .bayesian_network import BayesianNetwork, group_patterns

_MAX_AUTO_CATEGORIES = 50
Y_NODE = "y"


def _node_spec():
    return OneOf("y", [Int(0, ge=0, le=1_000_000), Choice("y", ["y", "target"])])


def weighted_quantile(values: np.ndarray, q: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``np.quantile``'s default (linear) quantiles of ``values`` where a row of weight ``w`` counts as ``w``
    rows: position ``h = (W - 1) q`` in the sorted values repeated by weight (``W`` the total weight), linear
    between the neighbouring positions. Integer weights give exactly the quantiles of the repeated rows, unit
    weights those of ``np.quantile``."""
    order = np.argsort(values, kind="stable")
    v, cum = values[order], np.cumsum(weights[order])
    keep = weights[order] > 0
    v, cum = v[keep], cum[keep]
    h = (cum[-1] - 1.0) * np.asarray(q, dtype=np.float64)
    lo = np.floor(h)
    a = v[np.minimum(np.searchsorted(cum, lo, side="right"), len(v) - 1)]
    b = v[np.minimum(np.searchsorted(cum, lo + 1.0, side="right"), len(v) - 1)]
    return a + (h - lo) * (b - a)


@register
class BayesianNetworkClassifier(Classifier):
    """Discrete Bayesian-network classifier with exact (variable-elimination) posteriors.

    Fitted: ``network_`` (a :class:`BayesianNetwork` with nodes ``0..d-1`` and ``"y"``;
    usable directly for ``query`` / ``d_separated``), ``classes_``, ``categorical_``
    (bool mask), ``bin_edges_`` (per column, None for categorical columns),
    ``cardinalities_``, ``n_iter_`` (EM steps; 1 without missing values), ``log_likelihood_``.
    """

    name = "bayesian_network_classifier"
    summary = "Discrete Bayesian network classifier (given DAG or naive), MLE/MAP/EM, exact inference"
    params = {
        "edges": ListOf(
            ListOf(_node_spec(), ["y", 0], min_items=2, max_items=2),
            None,
            doc="DAG as [parent, child] pairs; nodes are feature column indices or 'y'/'target' "
            "for the class; null = naive structure (y -> every feature)",
        ),
        "alpha": Float(1.0, ge=0.0, le=1e12, doc="Dirichlet pseudo-count per CPT cell (0 = maximum likelihood)"),
        "n_bins": Int(5, ge=2, le=10_000, doc="quantile bins for numeric (non-categorical) features"),
        "max_iter": Int(100, ge=1, le=1_000_000, doc="maximum EM iterations when values are missing"),
        "tol": Float(1e-6, ge=0.0, le=1e6, doc="EM stops when the log-likelihood changes by < tol * n"),
    }
    native_missing = True
    native_categorical = True
    reports_progress = True
    supports_sample_weight = True

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT, categorical_features=None):
        p = self._validated_params()
        X, y = check_X_y(X, y, allow_nan=True)
        classes, ycodes = self._encode_targets(y)
        n, d = X.shape
        sw = None if sample_weight is None else check_sample_weight(sample_weight, n)
        categorical = self._categorical_mask(X, categorical_features)
        codes = np.empty_like(X)
        bin_edges: list = [None] * d
        cards = {}
        for j in range(d):
            col = X[:, j]
            obs = ~np.isnan(col)
            if categorical[j]:
                v = col[obs]
                if v.size and ((v < 0).any() or (v != np.floor(v)).any()):
                    raise DataError(
                        f"categorical feature {j} must hold category codes 0..k-1 (non-negative integers)"
                    )
                codes[:, j] = col
                cards[j] = int(v.max()) + 1 if v.size else 1
            else:
                q = np.linspace(0, 1, p["n_bins"] + 1)[1:-1]
                if not obs.any():
                    e = np.empty(0)
                elif sw is None:
                    e = np.unique(np.quantile(col[obs], q))
                else:
                    e = np.unique(weighted_quantile(col[obs], q, sw[obs]))
                bin_edges[j] = e
                codes[:, j] = np.where(obs, np.searchsorted(e, np.where(obs, col, 0.0), side="right"), np.nan)
                cards[j] = len(e) + 1
        cards[Y_NODE] = len(classes)
        edges = self._parse_edges(p["edges"], d)
        try:
            bn = BayesianNetwork(edges, cards)
        except ValueError as exc:
            raise ParamError("edges", str(exc)) from None
        data = np.column_stack([codes, ycodes.astype(np.float64)])
        has_missing = bool(np.isnan(codes).any())
        total = p["max_iter"] if has_missing else 1

        def step(it, ll):
            ctx.step(it, total, log_likelihood=ll)

        n_iter, ll = bn.fit(data, alpha=p["alpha"], max_iter=p["max_iter"], tol=p["tol"], callback=step,
                            sample_weight=sw)
        if has_missing and n_iter < total:
            ctx.step(total, total, log_likelihood=ll)

        self.classes_ = classes
        self.network_ = bn
        self.categorical_ = categorical
        self.bin_edges_ = bin_edges
        self.cardinalities_ = np.array([cards[j] for j in range(d)], dtype=np.intp)
        self.n_iter_ = n_iter
        self.log_likelihood_ = ll
        self.edges_ = bn.edges
        self.n_features_in_ = d
        self._pos = {v: i for i, v in enumerate(bn.order)}
        self._touch = [{v for v in bn.nodes if v == j or j in bn.parents[v]} for j in range(d)]
        self._fam_table, self._fam_strides, self._fam_offsets = self._families_with_y(bn, d)
        width = max([0] + [len(e) for e in bin_edges if e is not None])
        self._edges_pad = np.full((d, max(width, 1)), np.inf)
        for j, e in enumerate(bin_edges):
            if e is not None:
                self._edges_pad[j, : len(e)] = e
        return self

    @staticmethod
    def _categorical_mask(X, categorical_features):
        d = X.shape[1]
        if categorical_features is None:
            mask = np.zeros(d, dtype=bool)
            for j in range(d):
                v = X[:, j][~np.isnan(X[:, j])]
                if v.size == 0 or (
                    (v >= 0).all() and (v == np.floor(v)).all() and len(np.unique(v)) <= _MAX_AUTO_CATEGORIES
                ):
                    mask[j] = True
            return mask
        return check_categorical_features(categorical_features, d)

    @staticmethod
    def _parse_edges(spec, d):
        if spec is None:
            return [(Y_NODE, j) for j in range(d)]
        out = []
        for i, (a, b) in enumerate(spec):
            pair = []
            for v in (a, b):
                if isinstance(v, str):
                    pair.append(Y_NODE)
                elif v >= d:
                    raise ParamError(f"edges[{i}]", f"feature index {v} out of range for {d} feature(s)")
                else:
                    pair.append(int(v))
            out.append(tuple(pair))
        return out

    @staticmethod
    def _families_with_y(bn: BayesianNetwork, d: int):
        """Complete-evidence fast path: log P(y | x) = sum over the families containing y of
        log CPT entries + const.  All those log tables are stacked as rows of one
        (total, K) table; row = offset_f + sum_j code_j * stride_{j,f}."""
        tables, offsets, strides = [], [], []
        off = 0
        with np.errstate(divide="ignore"):
            for v in bn.nodes:
                fam = [*bn.parents[v], v]
                if Y_NODE not in fam:
                    continue
                others = [u for u in fam if u != Y_NODE]
                perm = [fam.index(u) for u in others] + [fam.index(Y_NODE)]
                t = np.log(np.transpose(bn.cpt[v], perm))
                t = t.reshape(-1, t.shape[-1])
                col = np.zeros(d, dtype=np.intp)
                mult = 1
                for u in reversed(others):  # C order: the last "other" varies fastest
                    col[u] = mult
                    mult *= bn.card[u]
                tables.append(t)
                offsets.append(off)
                strides.append(col)
                off += t.shape[0]
        return (np.ascontiguousarray(np.vstack(tables)), np.column_stack(strides).astype(np.intp),
                np.array(offsets, dtype=np.intp))

    # ------------------------------------------------------------------ predict
    def _codes(self, X):
        """Feature codes (float, NaN = missing) with one vectorised pass over all columns."""
        nan = np.isnan(X)
        Xz = np.where(nan, 0.0, X)
        # numeric columns: number of bin edges <= x (= searchsorted(..., side="right"))
        binned = (Xz[:, :, None] >= self._edges_pad[None, :, :]).sum(axis=2).astype(np.float64)
        cat = self.categorical_
        bad = cat & ((Xz < 0) | (Xz >= self.cardinalities_) | (Xz != np.floor(Xz)))
        codes = np.where(cat, Xz, binned)
        codes[nan | bad] = np.nan  # unseen categories are treated as missing
        return codes

    def predict_proba(self, X):
        X = check_predict_input(self, X, "network_", allow_nan=True)
        codes = self._codes(X)
        miss = np.isnan(codes)
        n, k = X.shape[0], len(self.classes_)
        out = np.empty((n, k))
        complete = ~miss.any(axis=1)
        if complete.any():
            ci = codes[complete].astype(np.intp)
            rows_idx = ci @ self._fam_strides + self._fam_offsets  # (n, families)
            logp = self._fam_table[rows_idx].sum(axis=1)
            with np.errstate(invalid="ignore", over="ignore"):
                m = logp.max(axis=1, keepdims=True)
                m[~np.isfinite(m)] = 0.0
                pr = np.exp(logp - m)
                s = pr.sum(axis=1, keepdims=True)
                pr = np.where(s > 0, pr / np.where(s > 0, s, 1.0), 1.0 / k)
            out[complete] = pr
        if not complete.all():
            rows = np.flatnonzero(~complete)
            patterns, groups = group_patterns(miss[rows])
            bn = self.network_
            d = X.shape[1]
            for pat, grp in zip(patterns, groups, strict=True):
                r = rows[grp]
                hidden = set(np.flatnonzero(pat).tolist())
                obs = [j for j in range(d) if not pat[j]]
                ev = codes[np.ix_(r, obs)].astype(np.intp)
                # families of y without hidden members: log-space fast path as one (n, K) factor
                ok = ~(self._fam_strides[list(hidden)] != 0).any(axis=0)
                ci = np.where(np.isnan(codes[r]), 0, codes[r]).astype(np.intp)
                logp = self._fam_table[(ci @ self._fam_strides + self._fam_offsets)[:, ok]].sum(axis=1)
                with np.errstate(invalid="ignore", under="ignore"):
                    m = logp.max(axis=1, keepdims=True)
                    m[~np.isfinite(m)] = 0.0
                    base = np.exp(logp - m)
                # families with a hidden member go through variable elimination
                nodes = sorted(set().union(*(self._touch[u] for u in hidden)), key=self._pos.__getitem__)
                factors, logscale = bn.evidence_factors(obs, ev, nodes, with_constants=False)
                factors.append((("__batch__", Y_NODE), base))
                out[r], _ = bn.eliminate(factors, logscale, [Y_NODE])
        return out
