"""Hyperparameters that make the common tests (and the service's all-algorithm tests) fast: few iterations,
small ensembles. Estimators not listed run with their defaults."""

from __future__ import annotations

import copy

_SMALL_GBM = {"max_iter": 3, "min_samples_leaf": 3}

EXAMPLE_PARAMS: dict[str, dict] = {
    "adaboost_classifier": {"n_estimators": 5, "random_state": 0},
    "agglomerative_clustering": {"n_clusters": 3},
    "bagging_classifier": {"n_estimators": 4, "random_state": 0},
    "bagging_regressor": {"n_estimators": 4, "random_state": 0},
    "bayesian_network_classifier": {"max_iter": 5},
    "decision_tree_classifier": {"random_state": 0},
    "decision_tree_regressor": {"random_state": 0},
    "divisive_clustering": {"n_clusters": 3},
    "factor_analysis": {"n_components": 2, "max_iter": 30},
    "fitted_value_iteration": {"basis": "polynomial", "degree": 2, "max_iter": 20},
    "gaussian_mixture": {"n_components": 2, "max_iter": 20},
    "gaussian_process_classifier": {"max_iter_predict": 50},
    "gradient_boosting_classifier": {"max_iter": 5, "min_samples_leaf": 5},
    "gradient_boosting_regressor": {"max_iter": 5, "min_samples_leaf": 5},
    "ica": {"max_iter": 50},
    "kmeans": {"n_clusters": 3, "n_init": 2},
    "mlp_classifier": {"hidden_layer_sizes": [8], "max_iter": 30, "learning_rate_init": 0.01},
    "mlp_regressor": {"hidden_layer_sizes": [8], "max_iter": 30, "learning_rate_init": 0.01},
    "q_learning": {"n_epochs": 3},
    "random_forest_classifier": {"n_estimators": 5, "random_state": 0},
    "random_forest_regressor": {"n_estimators": 5, "random_state": 0},
    "sarsa": {"n_epochs": 3},
    "spectral_clustering": {"n_clusters": 3, "n_init": 2, "gamma": 0.2},
    "stacking_classifier": {
        "estimators": [
            {"name": "gradient_boosting_classifier", "params": _SMALL_GBM},
            {"name": "gradient_boosting_classifier", "params": {**_SMALL_GBM, "max_depth": 1}},
        ],
        "final_estimator": {"name": "gradient_boosting_classifier", "params": _SMALL_GBM},
        "cv": 3,
    },
    "stacking_regressor": {
        "estimators": [
            {"name": "gradient_boosting_regressor", "params": _SMALL_GBM},
            {"name": "gradient_boosting_regressor", "params": {**_SMALL_GBM, "max_depth": 1}},
        ],
        "final_estimator": {"name": "gradient_boosting_regressor", "params": _SMALL_GBM},
        "cv": 3,
    },
    "svm_classifier": {"probability": True},
    "td_learning": {"n_epochs": 3, "td_lambda": 0.5},
}


def example_params(name: str) -> dict:
    """A fresh copy of the fast hyperparameters of the algorithm ``name`` (empty: its defaults)."""
    return copy.deepcopy(EXAMPLE_PARAMS.get(name, {}))
