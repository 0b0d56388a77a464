"""Model inspection: additive explanations (SHAP values), permutation importance, partial dependence.

No service code here: functions take fitted estimators (or plain callables) and arrays.
"""

from .explain import (
    METHODS,
    OUTPUTS,
    NotApplicable,
    OutputNotApplicable,
    available_methods,
    default_output,
    explain,
    explain_method,
    resolve_method,
)
from .linear import linear_shap, linear_weights
from .partial_dependence import partial_dependence, quantile_grid
from .permutation_importance import permutation_importance
from .permutation_shap import permutation_shap
from .tree_shap import tree_shap

__all__ = ["explain", "available_methods", "explain_method", "default_output", "NotApplicable", "OutputNotApplicable",
           "METHODS", "OUTPUTS", "resolve_method", "tree_shap",
           "linear_shap", "linear_weights", "permutation_shap", "permutation_importance", "partial_dependence",
           "quantile_grid"]
