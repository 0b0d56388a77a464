"""Discrete Bayesian networks: CPTs, exact inference by variable elimination, d-separation,
parameter learning by MLE / Dirichlet MAP and EM.

[Passerini §6-7].

* Factorisation ([Passerini §6]): ``p(x_1..x_m) = prod_i p(x_i | Pa(x_i))``.
* Inference (the notes give no algorithm, [GAP]): sum-product variable elimination over
  factor tables.  Evidence is applied by indexing each CPT; every factor may carry a
  leading *batch* axis (one row per query case), so a whole data set is answered with a
  few ``np.einsum`` calls.  Variables that are not ancestors of the query or the evidence
  are barren and pruned (their CPTs sum to one).  Per-row rescaling keeps products from
  underflowing; the scales are accumulated, so ``log P(evidence)`` is exact.
* d-separation ([Passerini §6]) by the reachability ("Bayes-ball") algorithm of Koller &
  Friedman (Alg. 3.1): a trail is active iff every head-to-head node on it is in, or has a
  descendant in, the conditioning set and no other node on it is in that set.
* Parameters ([Passerini §7.6]): ``theta_{x|u} = (N_{u,x} + alpha) / sum_x (N_{u,x} + alpha)``;
  ``alpha = 0`` is the MLE (7.4).  A parent configuration never seen with ``alpha = 0`` gets
  a uniform distribution (0/0 is undefined).  With missing values, EM (7.7-7.8) replaces
  counts by expected counts computed with the inference above.

CPT layout: ``cpt[v]`` has shape ``(card(p_1), ..., card(p_k), card(v))`` with the parents in
the order of ``parents[v]``; the last axis sums to one.  States are integer codes ``0..card-1``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable

import numpy as np

__all__ = ["BayesianNetwork"]

_BATCH = "__batch__"


class BayesianNetwork:
    """A discrete Bayesian network over named variables.

    Parameters
    ----------
    edges:
        iterable of ``(parent, child)`` pairs (any hashable names).
    cardinalities:
        ``{variable: number of states}``; every variable, including isolated ones.
    cpts:
        optional ``{variable: table}`` (see the module docstring for the layout).

    Example ([Passerini §6.2], genes A -> C <- B)::

        bn = BayesianNetwork([("A", "C"), ("B", "C")], {"A": 2, "B": 2, "C": 2})
        bn.set_cpt("A", [0.3, 0.7]); bn.set_cpt("B", [0.3, 0.7])
        bn.set_cpt("C", [[[0.9, 0.1], [0.6, 0.4]], [[0.7, 0.3], [0.1, 0.9]]])
        bn.query("C")                     # array([0.403, 0.597])
        bn.query("A", {"C": 0, "B": 0})   # explaining away
        bn.d_separated("A", "B")          # True;  given "C": False
    """

    def __init__(self, edges: Iterable = (), cardinalities: dict | None = None, cpts: dict | None = None):
        cardinalities = dict(cardinalities or {})
        edges = [tuple(e) for e in edges]
        nodes: list = list(cardinalities)
        for e in edges:
            if len(e) != 2:
                raise ValueError(f"an edge must be a (parent, child) pair, got {e!r}")
            for v in e:
                if v not in cardinalities:
                    raise ValueError(f"variable {v!r} in edges has no cardinality")
            if e[0] == e[1]:
                raise ValueError(f"self-loop on {e[0]!r}")
        for v, k in cardinalities.items():
            if int(k) < 1:
                raise ValueError(f"cardinality of {v!r} must be >= 1")
        self.nodes = nodes
        self.card = {v: int(k) for v, k in cardinalities.items()}
        self.parents: dict[Hashable, list] = {v: [] for v in nodes}
        self.children: dict[Hashable, list] = {v: [] for v in nodes}
        for p, c in dict.fromkeys(edges):  # de-duplicate, keep order
            self.parents[c].append(p)
            self.children[p].append(c)
        self.order = self._topological_order()
        self.cpt: dict = {}
        for v, t in (cpts or {}).items():
            self.set_cpt(v, t)

    # ------------------------------------------------------------------ structure
    @property
    def edges(self) -> list[tuple]:
        return [(p, c) for c in self.nodes for p in self.parents[c]]

    def _topological_order(self) -> list:
        indeg = {v: len(self.parents[v]) for v in self.nodes}
        ready = [v for v in self.nodes if indeg[v] == 0]
        out = []
        while ready:
            v = ready.pop(0)
            out.append(v)
            for c in self.children[v]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready.append(c)
        if len(out) != len(self.nodes):
            cyc = [v for v in self.nodes if indeg[v] > 0]
            raise ValueError(f"the graph has a directed cycle through {cyc!r}; a Bayesian network is a DAG")
        return out

    def ancestors(self, variables: Iterable) -> set:
        """The variables and all their ancestors."""
        out, stack = set(), list(variables)
        while stack:
            v = stack.pop()
            if v not in out:
                out.add(v)
                stack.extend(self.parents[v])
        return out

    def descendants(self, v) -> set:
        out, stack = set(), list(self.children[v])
        while stack:
            u = stack.pop()
            if u not in out:
                out.add(u)
                stack.extend(self.children[u])
        return out

    def _as_set(self, x) -> set:
        if isinstance(x, (str, bytes)) or not isinstance(x, Iterable):
            x = [x]
        s = set(x)
        for v in s:
            if v not in self.card:
                raise KeyError(f"unknown variable {v!r}")
        return s

    def d_separated(self, x, y, given=()) -> bool:
        """True iff every trail between ``x`` and ``y`` is blocked by ``given`` ([Passerini §6]).

        ``x``, ``y``, ``given``: a variable or an iterable of variables (disjoint sets).
        Reachability / Bayes-ball (Koller & Friedman Alg. 3.1), O(nodes + edges).
        """
        X, Y, Z = self._as_set(x), self._as_set(y), self._as_set(given) if given is not None else set()
        if X & Y or X & Z or Y & Z:
            raise ValueError("x, y and given must be disjoint sets of variables")
        anc_z = self.ancestors(Z)  # head-to-head nodes with a descendant (or themselves) in Z
        UP, DOWN = 0, 1  # UP: arrived from a child; DOWN: arrived from a parent
        stack = [(v, UP) for v in X]
        visited = set()
        while stack:
            v, d = stack.pop()
            if (v, d) in visited:
                continue
            visited.add((v, d))
            if v not in Z and v in Y:
                return False
            if d == UP and v not in Z:
                stack.extend((p, UP) for p in self.parents[v])
                stack.extend((c, DOWN) for c in self.children[v])
            elif d == DOWN:
                if v not in Z:
                    stack.extend((c, DOWN) for c in self.children[v])
                if v in anc_z:
                    stack.extend((p, UP) for p in self.parents[v])
        return True

    # ------------------------------------------------------------------ parameters
    def set_cpt(self, var, table, parents: list | None = None) -> None:
        """Set ``P(var | parents)``; ``parents`` gives the table's parent axis order if it
        differs from ``self.parents[var]``.  Rows must sum to one."""
        if var not in self.card:
            raise KeyError(f"unknown variable {var!r}")
        t = np.asarray(table, dtype=np.float64)
        pa = list(self.parents[var])
        if parents is not None:
            if sorted(map(repr, parents)) != sorted(map(repr, pa)):
                raise ValueError(f"parents of {var!r} are {pa!r}, got {list(parents)!r}")
            perm = [list(parents).index(p) for p in pa] + [len(pa)]
            t = np.transpose(t, perm)
        shape = tuple(self.card[p] for p in pa) + (self.card[var],)
        if t.shape != shape:
            raise ValueError(f"CPT of {var!r} must have shape {shape} (parents {pa!r} then {var!r}), "
                             f"got {t.shape}")
        if (t < 0).any() or not np.allclose(t.sum(axis=-1), 1.0, atol=1e-8):
            raise ValueError(f"CPT of {var!r}: probabilities must be >= 0 and sum to 1 over {var!r}")
        self.cpt[var] = np.ascontiguousarray(t)

    def _check_complete(self):
        missing = [v for v in self.nodes if v not in self.cpt]
        if missing:
            raise ValueError(f"no CPT for {missing!r}")

    def probability(self, assignment: dict) -> float:
        """Joint probability of a full assignment ``{var: state}`` (the factorisation)."""
        self._check_complete()
        p = 1.0
        for v in self.nodes:
            p *= self.cpt[v][tuple(assignment[u] for u in self.parents[v]) + (assignment[v],)]
        return float(p)

    def joint_table(self) -> np.ndarray:
        """The full joint over ``self.nodes`` (axes in that order) by brute force.

        Exponential in the number of variables: for tests and tiny networks only.
        """
        self._check_complete()
        letters = {v: i for i, v in enumerate(self.nodes)}
        args = []
        for v in self.nodes:
            args += [self.cpt[v], [letters[u] for u in self.parents[v]] + [letters[v]]]
        return np.einsum(*args, list(range(len(self.nodes))))

    # ------------------------------------------------------------------ inference
    def query(self, variables, evidence: dict | None = None) -> np.ndarray:
        """Posterior ``P(variables | evidence)`` by variable elimination.

        ``variables``: one variable (returns a vector) or a list (returns a table with axes
        in that order).  ``evidence``: ``{variable: state code}``.
        """
        self._check_complete()
        single = isinstance(variables, (str, bytes)) or not isinstance(variables, (list, tuple))
        q = [variables] if single else list(variables)
        evidence = dict(evidence or {})
        for v in [*q, *evidence]:
            if v not in self.card:
                raise KeyError(f"unknown variable {v!r}")
        if set(q) & set(evidence):
            raise ValueError("a query variable cannot also be evidence")
        for v, s in evidence.items():
            if not 0 <= int(s) < self.card[v]:
                raise ValueError(f"state {s!r} of {v!r} is out of range 0..{self.card[v] - 1}")
        ev_vars = list(evidence)
        vals = np.array([[int(evidence[v]) for v in ev_vars]], dtype=np.intp).reshape(1, len(ev_vars))
        post, logz = self.batch_query(q, ev_vars, vals)
        if not np.isfinite(logz[0]):
            raise ValueError("the evidence has probability zero")
        return post[0]

    def log_evidence(self, evidence: dict) -> float:
        """``log P(evidence)``."""
        ev_vars = list(evidence)
        vals = np.array([[int(evidence[v]) for v in ev_vars]], dtype=np.intp)
        return float(self.batch_query([], ev_vars, vals)[1][0])

    def batch_query(self, query: list, ev_vars: list, ev_vals: np.ndarray):
        """Vectorised VE: for each row ``i`` of ``ev_vals`` (n x len(ev_vars) state codes),
        ``P(query | ev_vars = ev_vals[i])`` and ``log P(ev_vars = ev_vals[i])``.

        Returns ``(posterior (n, *cards of query), log_evidence (n,))``.  Rows whose evidence
        has probability zero get a uniform posterior and ``-inf``.
        """
        keep = self.ancestors([*query, *ev_vars])
        factors, logscale = self.evidence_factors(ev_vars, ev_vals, [v for v in self.order if v in keep])
        return self.eliminate(factors, logscale, query)

    def evidence_factors(self, ev_vars: list, ev_vals: np.ndarray, nodes: list | None = None,
                         with_constants: bool = True):
        """The CPT factors of ``nodes`` (default: all) with the evidence rows applied.

        Returns ``(factors, logscale)``: factors are ``(vars, table)`` pairs, with a leading
        batch axis when they depend on the row; fully observed factors are folded into the
        per-row ``logscale`` (skipped when ``with_constants`` is False).
        """
        ev_vals = np.asarray(ev_vals, dtype=np.intp)
        n = ev_vals.shape[0]
        ev_pos = {v: i for i, v in enumerate(ev_vars)}
        logscale = np.zeros(n)
        factors: list[tuple[tuple, np.ndarray]] = []  # (vars, table); _BATCH first when batched
        with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
            for v in self.order if nodes is None else nodes:
                fam = [*self.parents[v], v]
                table = self.cpt[v]
                obs = [i for i, u in enumerate(fam) if u in ev_pos]
                if not obs:
                    factors.append((tuple(fam), table))
                    continue
                free = [i for i, u in enumerate(fam) if u not in ev_pos]
                if not free and not with_constants:
                    continue
                t = np.transpose(table, obs + free)[tuple(ev_vals[:, ev_pos[fam[i]]] for i in obs)]
                if not free:
                    logscale += np.log(t)
                else:
                    factors.append(((_BATCH, *(fam[i] for i in free)), t))
        return factors, logscale

    def eliminate(self, factors: list, logscale: np.ndarray, query: list):
        """Sum every non-query variable out of ``factors`` (min-size greedy order).

        Returns ``(posterior (n, *cards of query), log normaliser (n,))`` where the normaliser
        includes ``logscale``.
        """
        n = logscale.shape[0]
        logscale = logscale.copy()
        factors = list(factors)
        qset = set(query)
        present = {u for f in factors for u in f[0]}
        elim = [v for v in self.order if v in present and v not in qset]
        with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
            while elim:
                v = min(elim, key=lambda u: self._elim_cost(u, factors))
                elim.remove(v)
                inv = [f for f in factors if v in f[0]]
                factors = [f for f in factors if v not in f[0]]
                out_vars = tuple(dict.fromkeys(u for f in inv for u in f[0] if u != v))
                if _BATCH in out_vars:
                    out_vars = (_BATCH, *(u for u in out_vars if u != _BATCH))
                inv, logscale = self._premultiply(inv, logscale)
                t = self._contract(inv, out_vars)
                if out_vars and out_vars[0] == _BATCH:
                    t, logscale = _rescale(t, logscale)
                elif not out_vars:  # a scalar (1 for a sum over a normalised CPT chain)
                    logscale += np.log(float(t))
                    continue
                factors.append((out_vars, t))
            out_vars = (_BATCH, *query)
            if factors:
                factors, logscale = self._premultiply(factors, logscale)
                t = self._contract(factors, out_vars, n=n)
            else:
                t = np.ones((n,))
            shape = (n,) + tuple(self.card[v] for v in query)
            t = np.broadcast_to(t, shape).copy()
            z = t.reshape(n, -1).sum(axis=1)
            logz = logscale + np.log(z)
            bad = ~(z > 0) | ~np.isfinite(logz)
            z[bad] = 1.0
            t /= z.reshape((n,) + (1,) * len(query))
            if bad.any():
                t[bad] = 1.0 / max(1, int(np.prod(shape[1:])))
                logz[bad] = -np.inf
        return t, logz

    def _elim_cost(self, v, factors) -> int:
        vars_ = {u for f in factors if v in f[0] for u in f[0]} - {_BATCH}
        return int(np.prod([self.card[u] for u in vars_])) if vars_ else 1

    def _premultiply(self, factors, logscale, chunk: int = 12):
        """Multiply factors in groups (einsum takes at most 32 operands) until few remain."""
        while len(factors) > chunk:
            group, factors = factors[:chunk], factors[chunk:]
            vars_ = tuple(dict.fromkeys(u for f in group for u in f[0]))
            if _BATCH in vars_:
                vars_ = (_BATCH, *(u for u in vars_ if u != _BATCH))
            t = self._contract(group, vars_)
            if vars_ and vars_[0] == _BATCH:
                t, logscale = _rescale(t, logscale)
            factors = [*factors, (vars_, t)]
        return factors, logscale

    @staticmethod
    def _contract(factors, out_vars, n=None):
        ids: dict = {}
        args = []
        for vars_, t in factors:
            args += [t, [ids.setdefault(u, len(ids)) for u in vars_]]
        if _BATCH in out_vars and _BATCH not in ids:
            # no batched factor: compute once, broadcast over rows later
            out = [ids.setdefault(u, len(ids)) for u in out_vars if u != _BATCH]
            res = np.einsum(*args, out) if args else np.ones(())
            return np.broadcast_to(res, (n, *res.shape))
        out = [ids.setdefault(u, len(ids)) for u in out_vars]
        return np.einsum(*args, out, optimize=len(factors) > 2)

    # ------------------------------------------------------------------ learning
    def fit(self, data, *, alpha: float = 0.0, max_iter: int = 100, tol: float = 1e-6,
            callback: Callable[[int, float], None] | None = None, sample_weight=None):
        """Learn every CPT from ``data`` (n x len(nodes) state codes in ``self.nodes`` order,
        NaN = missing).  Complete data: closed form ([Passerini §7.4, §7.6]).  Missing values: EM
        ([Passerini §7.7-7.8]), initialised from the available-case counts, stopped when the
        observed-data log-likelihood (+ log prior) improves by less than ``tol`` (relative to
        the number of rows).  ``callback(iteration, log_likelihood)`` runs after each EM step.
        ``sample_weight`` (n,) weights every row's (expected) counts and log-likelihood.
        Returns ``(n_iter, log_likelihood)``.
        """
        data = np.asarray(data, dtype=np.float64)
        w = np.ones(data.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        if data.ndim != 2 or data.shape[1] != len(self.nodes):
            raise ValueError(f"data must have shape (n, {len(self.nodes)})")
        miss = np.isnan(data)
        codes = np.where(miss, 0, data).astype(np.intp)
        col = {v: i for i, v in enumerate(self.nodes)}
        for v in self.nodes:
            c = codes[~miss[:, col[v]], col[v]]
            if c.size and (c.min() < 0 or c.max() >= self.card[v]):
                raise ValueError(f"states of {v!r} must be in 0..{self.card[v] - 1}")
        # complete-case counts of every family
        counts = {}
        for v in self.nodes:
            fam = [*self.parents[v], v]
            idx = [col[u] for u in fam]
            ok = ~miss[:, idx].any(axis=1)
            shape = tuple(self.card[u] for u in fam)
            flat = np.ravel_multi_index(tuple(codes[ok][:, i] for i in idx), shape) if ok.any() else []
            counts[v] = np.bincount(np.asarray(flat, dtype=np.intp), weights=w[ok],
                                    minlength=int(np.prod(shape))).reshape(
                shape).astype(np.float64)
        self._set_from_counts(counts, alpha)
        if not miss.any():
            ll = float(self._complete_loglik(codes, w))
            if callback is not None:
                callback(1, ll)
            return 1, ll

        patterns, groups = group_patterns(miss)
        pos = {v: i for i, v in enumerate(self.order)}
        touch = {u: {v for v in self.nodes if u == v or u in self.parents[v]} for u in self.nodes}
        # fully observed family rows: fixed index tuples for the constant part of the likelihood
        full_idx = {}
        for v in self.nodes:
            fam = [*self.parents[v], v]
            ok = ~miss[:, [col[u] for u in fam]].any(axis=1)
            full_idx[v] = (tuple(codes[ok, col[u]] for u in fam), w[ok])
        prev = -np.inf
        ll = -np.inf
        it = 0
        for it in range(1, max_iter + 1):
            # rows where a family is fully observed contribute their (fixed) counts
            exp_counts = {v: counts[v].copy() for v in self.nodes}
            with np.errstate(divide="ignore"):
                ll = float(sum(np.log(self.cpt[v][full_idx[v][0]]) @ full_idx[v][1] for v in self.nodes))
            for pat, rows in zip(patterns, groups, strict=True):
                obs_vars = [v for v in self.nodes if not pat[col[v]]]
                mis_vars = [v for v in self.nodes if pat[col[v]]]
                mis_set = set(mis_vars)
                ev = codes[np.ix_(rows, [col[v] for v in obs_vars])]
                # only the families with a hidden member vary; the others are constants
                nodes = sorted(set().union(*(touch[u] for u in mis_vars)), key=pos.__getitem__)
                factors, logscale = self.evidence_factors(obs_vars, ev, nodes, with_constants=False)
                wr = w[rows]
                ll += float(self.eliminate(factors, logscale, [])[1] @ wr)
                for v in nodes:
                    fam = [*self.parents[v], v]
                    hidden = [u for u in fam if u in mis_set]
                    seen = [u for u in fam if u not in mis_set]
                    post, _ = self.eliminate(factors, logscale, hidden)
                    post *= wr.reshape((-1,) + (1,) * len(hidden))
                    target = np.transpose(exp_counts[v], [fam.index(u) for u in seen + hidden])
                    if seen:
                        np.add.at(target, tuple(codes[rows, col[u]] for u in seen), post)
                    else:
                        target += post.sum(axis=0)
            ll += self._log_prior(alpha)
            self._set_from_counts(exp_counts, alpha)
            if callback is not None:
                callback(it, ll)
            if abs(ll - prev) <= tol * max(1.0, float(w.sum())):
                break
            prev = ll
        return it, ll

    def _set_from_counts(self, counts: dict, alpha: float) -> None:
        for v in self.nodes:
            c = counts[v] + alpha
            s = c.sum(axis=-1, keepdims=True)
            k = self.card[v]
            with np.errstate(invalid="ignore", divide="ignore"):
                t = np.where(s > 0, c / np.where(s > 0, s, 1.0), 1.0 / k)
            self.cpt[v] = np.ascontiguousarray(t)

    def _log_prior(self, alpha: float) -> float:
        if alpha <= 0:
            return 0.0
        with np.errstate(divide="ignore"):
            return float(sum(alpha * np.log(np.maximum(self.cpt[v], 1e-300)).sum() for v in self.nodes))

    def _complete_loglik(self, codes, w) -> float:
        col = {v: i for i, v in enumerate(self.nodes)}
        ll = 0.0
        with np.errstate(divide="ignore"):
            for v in self.nodes:
                fam = [*self.parents[v], v]
                ll += float(np.log(self.cpt[v][tuple(codes[:, col[u]] for u in fam)]) @ w)
        return ll

    def states(self):
        """All joint states (itertools.product over cardinalities), in ``self.nodes`` order."""
        return itertools.product(*(range(self.card[v]) for v in self.nodes))


def group_patterns(mask: np.ndarray):
    """Group the rows of a boolean matrix by identical rows: ``(patterns, [row indices])``."""
    n = mask.shape[0]
    if n == 1:
        return mask.copy(), [np.zeros(1, dtype=np.intp)]
    packed = np.ascontiguousarray(np.packbits(mask, axis=1))
    keys = packed.view(np.dtype((np.void, packed.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    bounds = np.cumsum(np.bincount(inverse, minlength=len(first)))[:-1]
    return mask[first], np.split(order, bounds)


def _rescale(t, logscale):
    m = t.reshape(t.shape[0], -1).max(axis=1)
    ok = m > 0
    m = np.where(ok, m, 1.0)
    t = t / m.reshape((-1,) + (1,) * (t.ndim - 1))
    return t, logscale + np.log(m)
