"""Choosing and running an explainer for a fitted estimator (see docs/decisions/explanations.md).

``method``: "tree" (exact interventional TreeSHAP: decision trees, soft-voting random forests, gradient
boosting), "linear" (exact closed form for models whose score is linear in the inputs), "kernel" (the
model-agnostic estimator of ``permutation_shap``: any model), "auto" (the first that applies, in that
order).  Output spaces: "probability" (class probabilities), "raw" (the additive score of a classifier:
log-odds for binary gradient boosting and logistic models, per-class scores otherwise), "prediction"
(regressors).  The exact methods explain the space in which the model is additive; "kernel" explains
class probabilities whenever the model has them.
"""

from __future__ import annotations

import numpy as np

from ._trees import supports_tree, tree_arrays
from .linear import linear_shap, linear_weights
from .methods import explain_method
from .permutation_shap import permutation_shap
from .tree_shap import tree_shap

__all__ = ["explain", "available_methods", "NotApplicable", "explain_method"]

METHODS = ("auto", "tree", "linear", "kernel")


class NotApplicable(ValueError):
    """The requested explanation method does not apply to this estimator."""


def available_methods(est, background: np.ndarray) -> list[str]:
    out = []
    if supports_tree(est):
        out.append("tree")
    if linear_weights(est, background) is not None:
        out.append("linear")
    out.append("kernel")
    return out


def _agnostic_function(est):
    if hasattr(est, "classes_"):
        if callable(getattr(est, "predict_proba", None)):
            return est.predict_proba, "probability"
        if callable(getattr(est, "decision_function", None)):
            return est.decision_function, "raw"
        classes = np.asarray(est.classes_)

        def onehot(X):
            pred = np.asarray(est.predict(X))
            return (pred[:, None] == classes[None, :]).astype(float)

        return onehot, "probability"
    return est.predict, "prediction"


def explain(est, X, background, groups=None, *, method: str = "auto", n_permutations: int = 10,
            random_state=0, ctx=None) -> dict:
    """``{"method", "output", "phi" (n, G, V), "base" (V,), "standard_error" (n, G, V) | None}``.

    For classifiers ``V`` is the number of classes (a binary model with one score gives ``-s`` to the
    first class and ``s`` to the second).
    """
    if method not in METHODS:
        raise NotApplicable(f"unknown method {method!r}; one of {', '.join(METHODS)}")
    X = np.asarray(X, dtype=float)
    Z = np.asarray(background, dtype=float)
    se = None
    chosen = method
    if method == "auto":
        chosen = "tree" if supports_tree(est) else None
        if chosen is None:
            chosen = "linear" if linear_weights(est, Z) is not None else "kernel"
    if chosen == "tree":
        if not supports_tree(est):
            raise NotApplicable(f"{getattr(est, 'name', type(est).__name__)} is not a tree model with an "
                                "additive output; use method 'kernel'")
        arrays = tree_arrays(est)
        try:
            phi, base = tree_shap(arrays, X, Z, groups, ctx=ctx)
        except ValueError as exc:
            if method == "auto":
                return explain(est, X, Z, groups, method="kernel", n_permutations=n_permutations,
                               random_state=random_state, ctx=ctx)
            raise NotApplicable(str(exc)) from None
        output = arrays.output
    elif chosen == "linear":
        wb = linear_weights(est, Z)
        if wb is None:
            raise NotApplicable(f"{getattr(est, 'name', type(est).__name__)} is not linear in its inputs; "
                                "use method 'kernel'")
        phi, base = linear_shap(wb[0], wb[1], X, Z, groups)
        output = "raw" if hasattr(est, "classes_") else "prediction"
    else:
        f, output = _agnostic_function(est)
        phi, base, se = permutation_shap(f, X, Z, groups, n_permutations=n_permutations,
                                         random_state=random_state, ctx=ctx)
    if hasattr(est, "classes_") and phi.shape[2] == 1 and len(est.classes_) == 2:
        phi = np.concatenate([-phi, phi], axis=2)
        base = np.concatenate([-base, base])
        if se is not None:
            se = np.concatenate([se, se], axis=2)
    return {"method": chosen, "output": output, "phi": phi, "base": base, "standard_error": se}
