"""Choosing and running an explainer for a fitted estimator (see docs/decisions/explanations.md).

``method``: "tree" (exact interventional TreeSHAP: decision trees, soft-voting random forests, gradient
boosting), "linear" (exact closed form for models whose score is linear in the inputs), "kernel" (the
model-agnostic estimator of ``permutation_shap``: any model), "auto" (the first that applies, in that
order).  Output spaces (``output``): "probability" (class probabilities; the default for classifiers with
``predict_proba``), "margin" (a classifier's additive score before its link: log-odds, per-class scores,
the decision function), "prediction" (regressors).  Where a classifier is additive in its margin and its
probabilities are the logistic or softmax of it (boosting, logistic models), "probability" is reached
exactly from the per-reference margin contributions (``link``); trees and forests are additive in
probability already; "kernel" samples whichever function is asked for.
"""

from __future__ import annotations

import numpy as np

from ._trees import supports_tree, tree_arrays
from .linear import linear_shap, linear_weights
from .link import detect_link, link, probability_contributions
from .methods import explain_method
from .permutation_shap import permutation_shap
from .tree_shap import tree_shap

__all__ = ["explain", "available_methods", "NotApplicable", "OutputNotApplicable", "explain_method", "default_output",
           "OUTPUTS", "resolve_method"]

METHODS = ("auto", "tree", "linear", "kernel")


class NotApplicable(ValueError):
    """The requested explanation method does not apply to this estimator."""


class OutputNotApplicable(NotApplicable):
    """The requested output space does not apply to this estimator."""


def available_methods(est, background: np.ndarray) -> list[str]:
    out = []
    if supports_tree(est):
        out.append("tree")
    if linear_weights(est, background) is not None:
        out.append("linear")
    out.append("kernel")
    return out


OUTPUTS = ("probability", "margin")


def _margin_function(est):
    """The additive score before a classifier's link (``decision_function``), or None."""
    fn = getattr(est, "decision_function", None)
    return fn if callable(fn) else None


def _agnostic_function(est, output: str):
    if not hasattr(est, "classes_"):
        return est.predict, "prediction"
    if output == "margin":
        return _margin_function(est), "margin"
    if callable(getattr(est, "predict_proba", None)):
        return est.predict_proba, "probability"
    classes = np.asarray(est.classes_)

    def onehot(X):
        pred = np.asarray(est.predict(X))
        return (pred[:, None] == classes[None, :]).astype(float)

    return onehot, "probability"


def default_output(est) -> str:
    """Classifiers: "probability" if they have ``predict_proba``, else "margin" if they have a decision
    function, else "probability" (the one-hot predicted class); regressors: "prediction"."""
    if not hasattr(est, "classes_"):
        return "prediction"
    if callable(getattr(est, "predict_proba", None)) or _margin_function(est) is None:
        return "probability"
    return "margin"


def _name(est) -> str:
    return getattr(est, "name", type(est).__name__)


def _check_output(est, output: str | None) -> str:
    if output is None or (output == "prediction" and not hasattr(est, "classes_")):
        return default_output(est)
    if output not in OUTPUTS:
        raise OutputNotApplicable(f"unknown output {output!r}; one of {', '.join(OUTPUTS)}")
    if not hasattr(est, "classes_"):
        raise OutputNotApplicable(f"{_name(est)} is a regressor: its prediction is explained; leave output out")
    if output == "probability" and not callable(getattr(est, "predict_proba", None)):
        raise OutputNotApplicable(f"{_name(est)} has no class probabilities; use output 'margin'")
    if output == "margin" and _margin_function(est) is None and not (
            supports_tree(est) and tree_arrays(est).output == "raw"):
        raise OutputNotApplicable(f"{_name(est)} has no margin (its additive output is the class probability); "
                                  "use output 'probability'")
    return output


def _link_of(est, margin_fn, X, Z) -> str | None:
    """The link between the model's margin and its ``predict_proba``, checked on the rows at hand."""
    probe = np.concatenate([X[:64], Z[:64]])
    try:
        return detect_link(margin_fn(probe), est.predict_proba(probe))
    except Exception:  # noqa: BLE001 - any failure: no known link, the exact probability route does not apply
        return None


def _through_link(name, phi_ref_fn, mx, mz, n, budget=1 << 22):
    """Probability contributions (n, G, K) from per-reference margin contributions, in row chunks."""
    m, V = mz.shape
    K = 1 if name == "logistic" else V
    step = max(1, budget // max(1, m * max(V * K, 32 * K)))
    parts = []
    for a in range(0, n, step):
        b = min(n, a + step)
        parts.append(probability_contributions(name, phi_ref_fn(a, b), mx[a:b], mz))
    return np.concatenate(parts), link(name, mz).mean(axis=0)


def resolve_method(est, X, background, method: str = "auto", output: str | None = None) -> str:
    """The method ``explain`` runs: ``method`` itself, or for "auto" the first exact one that delivers
    ``output`` (tree, then linear), else "kernel"."""
    if method != "auto":
        return method
    output = _check_output(est, output)
    X = np.asarray(X, dtype=float)
    Z = np.asarray(background, dtype=float)
    if supports_tree(est) and (output != "probability" or tree_arrays(est).output != "raw"
                               or _link_of(est, tree_arrays(est).predict, X, Z)):
        return "tree"
    if linear_weights(est, Z) is not None and (output != "probability" or _link_of(
            est, _margin_function(est), X, Z)):
        return "linear"
    return "kernel"


def explain(est, X, background, groups=None, *, method: str = "auto", output: str | None = None,
            n_permutations: int = 10, random_state=0, ctx=None) -> dict:
    """``{"method", "output", "phi" (n, G, V), "base" (V,), "standard_error" (n, G, V) | None}``.

    ``output``: "probability" or "margin" for classifiers (default: ``default_output``), None for
    regressors.  For classifiers ``V`` is the number of classes (a binary model with one score ``s``
    gives ``-s`` to the first class and ``s`` to the second; one probability ``p``, ``1 - p`` and ``p``).
    """
    if method not in METHODS:
        raise NotApplicable(f"unknown method {method!r}; one of {', '.join(METHODS)}")
    output = _check_output(est, output)
    X = np.asarray(X, dtype=float)
    Z = np.asarray(background, dtype=float)
    G = int(np.max(groups)) + 1 if groups is not None and len(groups) else X.shape[1]
    se = None
    chosen = resolve_method(est, X, Z, method, output)
    lnk = None
    if chosen == "tree":
        if not supports_tree(est):
            raise NotApplicable(f"{_name(est)} is not a tree model with an additive output; use method 'kernel'")
        arrays = tree_arrays(est)
        if arrays.output == "probability" and output == "margin":  # pragma: no cover - _check_output refuses
            raise OutputNotApplicable(f"{_name(est)} has no margin; use output 'probability'")
        through = output == "probability" and arrays.output == "raw"
        if through:
            lnk = _link_of(est, arrays.predict, X, Z)
            if lnk is None:
                raise NotApplicable(f"the class probabilities of {_name(est)} are not a logistic or softmax "
                                    "function of its trees' score; use method 'kernel' or output 'margin'")
        try:
            if through:
                phi, base = _through_link(
                    lnk, lambda a, b: tree_shap(arrays, X[a:b], Z, groups, per_reference=True, ctx=ctx)[0],
                    arrays.predict(X), arrays.predict(Z), X.shape[0])
            else:
                phi, base = tree_shap(arrays, X, Z, groups, ctx=ctx)
        except ValueError as exc:
            if method == "auto":
                return explain(est, X, Z, groups, method="kernel", output=output, n_permutations=n_permutations,
                               random_state=random_state, ctx=ctx)
            raise NotApplicable(str(exc)) from None
        out_name = output if hasattr(est, "classes_") else "prediction"
    elif chosen == "linear":
        wb = linear_weights(est, Z)
        if wb is None:
            raise NotApplicable(f"{_name(est)} is not linear in its inputs; use method 'kernel'")
        W, b = wb
        if output == "probability":
            lnk = _link_of(est, _margin_function(est), X, Z)
            if lnk is None:
                raise NotApplicable(f"the class probabilities of {_name(est)} are not a logistic or softmax "
                                    "function of its linear score; use method 'kernel' or output 'margin'")
            gi = np.arange(X.shape[1]) if groups is None else np.asarray(groups, dtype=np.intp)
            onehot = np.zeros((X.shape[1], G))
            onehot[np.arange(X.shape[1]), gi] = 1.0
            # per-group margin of a row: A[i, g, v] = sum over the group's columns of W[c, v] x[i, c]
            A = np.einsum("nc,cv,cg->ngv", X, W, onehot)
            B = np.einsum("mc,cv,cg->mgv", Z, W, onehot)
            phi, base = _through_link(lnk, lambda a_, b_: A[a_:b_, None] - B[None], X @ W + b, Z @ W + b,
                                      X.shape[0])
        else:
            phi, base = linear_shap(W, b, X, Z, groups)
        out_name = output if hasattr(est, "classes_") else "prediction"
    else:
        f, out_name = _agnostic_function(est, output)
        phi, base, se = permutation_shap(f, X, Z, groups, n_permutations=n_permutations,
                                         random_state=random_state, ctx=ctx)
    if hasattr(est, "classes_") and phi.shape[2] == 1 and len(est.classes_) == 2:
        phi = np.concatenate([-phi, phi], axis=2)
        base = np.concatenate([1.0 - base if out_name == "probability" else -base, base])
        if se is not None:
            se = np.concatenate([se, se], axis=2)
    return {"method": chosen, "output": out_name, "phi": phi, "base": base, "standard_error": se, "link": lnk}
