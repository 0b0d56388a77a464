"""BayesianNetwork: [Passerini §6.2] (genes) and [Passerini §6.3.6] (d-separation), variable elimination against
brute-force enumeration of the joint, d-separation against numeric independence, learning."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_softmax

from core.graphical import BayesianNetwork


def genes():
    """[Passerini §6.2], probable reading of Table 6: state 0 = active."""
    bn = BayesianNetwork([("A", "C"), ("B", "C")], {"A": 2, "B": 2, "C": 2})
    bn.set_cpt("A", [0.3, 0.7])
    bn.set_cpt("B", [0.3, 0.7])
    # P(C | A, B): columns (act,act)=0.9, (act,inact)=0.6, (inact,act)=0.7, (inact,inact)=0.1
    bn.set_cpt("C", [[[0.9, 0.1], [0.6, 0.4]], [[0.7, 0.3], [0.1, 0.9]]])
    return bn


def test_genes_w3_marginal_and_explaining_away():
    bn = genes()
    np.testing.assert_allclose(bn.query("C"), [0.403, 0.597], atol=1e-12)
    assert bn.probability({"A": 0, "B": 0, "C": 0}) == pytest.approx(0.081)
    assert bn.query("A", {"C": 0})[0] == pytest.approx(0.513648, abs=1e-6)
    assert bn.query("A", {"C": 0, "B": 0})[0] == pytest.approx(0.355263, abs=1e-6)
    assert bn.query("A", {"C": 0, "B": 1})[0] == pytest.approx(0.72, abs=1e-12)
    assert bn.query("B", {"C": 0})[0] == pytest.approx(0.565757, abs=1e-6)
    # marginal independence of the two parents, dependence once C is observed
    np.testing.assert_allclose(bn.query(["A", "B"]), np.outer([0.3, 0.7], [0.3, 0.7]), atol=1e-12)
    assert bn.d_separated("A", "B") and not bn.d_separated("A", "B", "C")
    assert bn.log_evidence({"C": 0}) == pytest.approx(np.log(0.403))


def test_set_cpt_validation_and_parent_order():
    bn = genes()
    with pytest.raises(ValueError, match="sum to 1"):
        bn.set_cpt("A", [0.3, 0.6])
    with pytest.raises(ValueError, match="shape"):
        bn.set_cpt("C", [0.5, 0.5])
    t = np.array(bn.cpt["C"])
    bn.set_cpt("C", np.transpose(t, (1, 0, 2)), parents=["B", "A"])
    np.testing.assert_allclose(bn.cpt["C"], t)
    with pytest.raises(ValueError, match="cycle"):
        BayesianNetwork([("A", "B"), ("B", "A")], {"A": 2, "B": 2})
    with pytest.raises(ValueError, match="probability zero"):
        det = BayesianNetwork([("A", "B")], {"A": 2, "B": 2}, {"A": [1.0, 0.0], "B": [[1, 0], [0, 1]]})
        det.query("A", {"B": 1})


# ------------------------------------------------------ d-separation [Passerini §6.3.6]
def w4_graph():
    """Smallest graph consistent with [Passerini §6.3.6], Fig. 14: A -> E <- F -> B, E -> C."""
    return BayesianNetwork(
        [("A", "E"), ("F", "E"), ("F", "B"), ("E", "C")], dict.fromkeys("AEFBC", 2)
    )


def test_w4_d_separation_fixtures():
    g = w4_graph()
    assert not g.d_separated("A", "B", ["C"])  # Q1: E head-to-head with observed child C
    assert g.d_separated("A", "B", ["F"])  # Q2: F tail-to-tail and observed
    assert g.d_separated("A", "B")  # E unobserved, no observed descendant
    assert not g.d_separated("A", "B", ["E"])
    assert g.d_separated("A", "B", ["E", "F"])


@pytest.mark.parametrize(
    "edges,marginal,given_c",
    [
        ([("c", "a"), ("c", "b")], False, True),  # tail-to-tail: dependent, independent given c
        ([("a", "c"), ("c", "b")], False, True),  # head-to-tail
        ([("a", "c"), ("b", "c")], True, False),  # head-to-head: independent, dependent given c
    ],
)
def test_canonical_connections(edges, marginal, given_c):
    g = BayesianNetwork(edges, {"a": 2, "b": 2, "c": 2})
    assert g.d_separated("a", "b") is marginal
    assert g.d_separated("a", "b", "c") is given_c


def test_head_to_head_descendant_unblocks():
    g = BayesianNetwork([("a", "c"), ("b", "c"), ("c", "d")], dict.fromkeys("abcd", 2))
    assert g.d_separated("a", "b")
    assert not g.d_separated("a", "b", "d")  # [Passerini §6]
    with pytest.raises(ValueError, match="disjoint"):
        g.d_separated("a", "a")


def random_network(edges, cards, rng):
    bn = BayesianNetwork(edges, cards)
    for v in bn.nodes:
        shape = tuple(bn.card[p] for p in bn.parents[v]) + (bn.card[v],)
        bn.set_cpt(v, rng.dirichlet(np.ones(bn.card[v]), size=shape[:-1]).reshape(shape))
    return bn


def brute_conditional(bn, query, evidence):
    joint = bn.joint_table()
    idx = [slice(None)] * len(bn.nodes)
    for v, s in evidence.items():
        idx[bn.nodes.index(v)] = s
    sub = joint[tuple(idx)]
    rest = [v for v in bn.nodes if v not in evidence]
    summed = tuple(i for i, v in enumerate(rest) if v not in query)
    t = sub.sum(axis=summed)
    kept = [v for v in rest if v in query]
    t = np.transpose(t, [kept.index(q) for q in query])
    return t / t.sum()


def _independent(bn, x, y, given, atol=1e-12):
    """Numeric check of x ⊥ y | given on the brute-force joint."""
    for states in itertools.product(*(range(bn.card[g]) for g in given)):
        ev = dict(zip(given, states, strict=True))
        pxy = brute_conditional(bn, [x, y], ev)
        if not np.allclose(pxy, np.outer(pxy.sum(1), pxy.sum(0)), atol=atol):
            return False
    return True


@pytest.mark.parametrize("graph", ["w4", "alarm"])
def test_d_separation_agrees_with_numeric_independence(graph):
    rng = np.random.default_rng(3)
    if graph == "w4":
        edges, nodes = w4_graph().edges, list("AEFBC")
    else:
        edges = [("B", "A"), ("E", "A"), ("A", "J"), ("A", "M"), ("E", "R")]
        nodes = list("BEAJMR")
    bn = random_network(edges, dict.fromkeys(nodes, 2), rng)
    checked = 0
    for x, y in itertools.combinations(nodes, 2):
        others = [v for v in nodes if v not in (x, y)]
        for r in range(len(others) + 1):
            for given in itertools.combinations(others, r):
                sep = bn.d_separated(x, y, list(given))
                # d-separation => independence (always); not d-separated => dependent for
                # generic (random) CPTs
                assert _independent(bn, x, y, list(given)) is sep, (x, y, given)
                checked += 1
    assert checked > 30


# ---------------------------------------------------------------- VE vs brute force
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_variable_elimination_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    nodes = list(range(7))
    edges = [(i, j) for i in nodes for j in nodes if i < j and rng.random() < 0.35]
    cards = {v: int(rng.integers(2, 4)) for v in nodes}
    bn = random_network(edges, cards, rng)
    for _ in range(15):
        k = int(rng.integers(0, 4))
        ev_vars = list(rng.choice(nodes, size=k, replace=False))
        ev = {v: int(rng.integers(0, cards[v])) for v in ev_vars}
        rest = [v for v in nodes if v not in ev]
        q = list(rng.choice(rest, size=int(rng.integers(1, 3)), replace=False))
        np.testing.assert_allclose(bn.query(q, ev), brute_conditional(bn, q, ev), atol=1e-12)
        # log P(evidence)
        if ev:
            joint = bn.joint_table()
            idx = tuple(ev.get(v, slice(None)) for v in nodes)
            assert bn.log_evidence(ev) == pytest.approx(np.log(joint[idx].sum()), rel=1e-10)


def test_batch_query_rows_match_single_queries():
    rng = np.random.default_rng(5)
    bn = random_network([(0, 2), (1, 2), (2, 3), (1, 4), (3, 4)], dict.fromkeys(range(5), 3), rng)
    ev_vars = [0, 4]
    vals = rng.integers(0, 3, size=(12, 2))
    post, logz = bn.batch_query([2], ev_vars, vals)
    for i in range(12):
        ev = dict(zip(ev_vars, vals[i].tolist(), strict=True))
        np.testing.assert_allclose(post[i], brute_conditional(bn, [2], ev), atol=1e-12)
        assert logz[i] == pytest.approx(bn.log_evidence(ev))


def test_many_variables_do_not_underflow():
    rng = np.random.default_rng(0)
    n = 300  # a long chain; the evidence probability is far below float64's range
    bn = random_network([(i, i + 1) for i in range(n - 1)], dict.fromkeys(range(n), 4), rng)
    ev = {i: int(rng.integers(0, 4)) for i in range(1, n)}
    post = bn.query(0, ev)
    assert np.isfinite(post).all() and post.sum() == pytest.approx(1.0)
    assert bn.log_evidence(ev) < -300


# ---------------------------------------------------------------- learning
def test_mle_and_map_counts():
    data = np.array([[0, 0], [0, 1], [0, 1], [1, 1], [1, 1], [1, 1], [1, 0]], dtype=float)
    bn = BayesianNetwork([("A", "B")], {"A": 2, "B": 2})
    bn.fit(data, alpha=0.0)
    np.testing.assert_allclose(bn.cpt["A"], [3 / 7, 4 / 7])
    np.testing.assert_allclose(bn.cpt["B"], [[1 / 3, 2 / 3], [1 / 4, 3 / 4]])
    bn.fit(data, alpha=1.0)  # seed (7.6): (N + alpha) / sum(N + alpha)
    np.testing.assert_allclose(bn.cpt["A"], [4 / 9, 5 / 9])
    np.testing.assert_allclose(bn.cpt["B"], [[2 / 5, 3 / 5], [2 / 6, 4 / 6]])
    # an unseen parent configuration under MLE gets a uniform row
    bn = BayesianNetwork([("A", "B")], {"A": 3, "B": 2})
    bn.fit(data, alpha=0.0)
    np.testing.assert_allclose(bn.cpt["B"][2], [0.5, 0.5])


def test_em_matches_direct_likelihood_maximisation():
    """A -> B, A missing in part of the rows: EM vs scipy on the observed-data likelihood."""
    rng = np.random.default_rng(0)
    n = 400
    a = (rng.random(n) < 0.35).astype(int)
    b = np.where(a == 1, rng.random(n) < 0.8, rng.random(n) < 0.3).astype(int)
    data = np.column_stack([a, b]).astype(float)
    data[rng.random(n) < 0.4, 0] = np.nan
    bn = BayesianNetwork([("A", "B")], {"A": 2, "B": 2})
    lls = []
    n_iter, ll = bn.fit(data, alpha=0.0, max_iter=500, tol=1e-12, callback=lambda i, v: lls.append(v))
    assert n_iter == len(lls) > 2
    assert np.all(np.diff(lls) >= -1e-9)  # EM never decreases the likelihood

    obs = ~np.isnan(data[:, 0])
    ao, bo, bm = data[obs, 0].astype(int), data[obs, 1].astype(int), data[~obs, 1].astype(int)

    def nll(theta):
        la = log_softmax([0.0, theta[0]])
        lb = np.stack([log_softmax([0.0, theta[1]]), log_softmax([0.0, theta[2]])])
        lpb = np.logaddexp(la[0] + lb[0], la[1] + lb[1])
        return -(la[ao].sum() + lb[ao, bo].sum() + lpb[bm].sum())

    res = minimize(nll, np.zeros(3), method="BFGS", options={"gtol": 1e-9})
    pa1 = np.exp(log_softmax([0.0, res.x[0]]))[1]
    assert bn.cpt["A"][1] == pytest.approx(pa1, abs=1e-4)
    assert ll == pytest.approx(-res.fun, abs=1e-6)


def test_em_recovers_parameters_with_missing_values():
    rng = np.random.default_rng(1)
    truth = random_network([(0, 1), (0, 2), (1, 3), (2, 3)], dict.fromkeys(range(4), 2), rng)
    n = 4000
    joint = truth.joint_table().ravel()
    states = np.array(list(truth.states()))
    data = states[rng.choice(len(joint), size=n, p=joint)].astype(float)
    data[rng.random(data.shape) < 0.2] = np.nan
    bn = BayesianNetwork(truth.edges, truth.card)
    bn.fit(data, alpha=1.0, max_iter=200)
    for v in truth.nodes:
        np.testing.assert_allclose(bn.cpt[v], truth.cpt[v], atol=0.06)


def test_many_factors_naive_posterior_closed_form():
    """40 children of y: the final product has more factors than one einsum call accepts."""
    rng = np.random.default_rng(9)
    d = 40
    bn = random_network([("y", j) for j in range(d)], {"y": 3, **dict.fromkeys(range(d), 3)}, rng)
    ev = {j: int(rng.integers(0, 3)) for j in range(d) if j % 7}
    logp = np.log(bn.cpt["y"]) + sum(np.log(bn.cpt[j][:, s]) for j, s in ev.items())
    expected = np.exp(logp - logp.max())
    np.testing.assert_allclose(bn.query("y", ev), expected / expected.sum(), rtol=1e-10)
    post = bn.query([0, 7], ev)  # two hidden children: independent given nothing else observed
    np.testing.assert_allclose(post.sum(), 1.0)
    py = bn.query("y", ev)
    np.testing.assert_allclose(post, np.einsum("y,ya,yb->ab", py, bn.cpt[0], bn.cpt[7]), atol=1e-12)
