"""Request bodies of the model-selection endpoints (cross-validate, compare, tune, automl, learning-curve,
feature-selection). Each is checked further by ``service.services.selection`` before anything is queued."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from .models import Job, Strict

Seed = Field(None, ge=0, lt=2**32, description="Seed of the folds (and of random search); unset: drawn once and "
                                               "recorded in the job's payload.")


class _Data(Strict):
    dataset_id: str
    target: str
    features: list[str] | None = Field(None, description="Feature columns; default: every column but the target.")
    folds: int = Field(5, ge=2, le=100, description="k of the (stratified, shuffled) k-fold.")
    stratify: bool = Field(True, description="Stratified folds for classifiers.")
    random_state: int | None = Seed


class CrossValidateRequest(_Data):
    algorithm: str = Field(examples=["random_forest_classifier"])
    params: dict[str, Any] = Field(default_factory=dict)
    metrics: list[str] | None = Field(None, description="Evaluate metric names; default: the task's first "
                                                        "(accuracy / r2).")


class Candidate(Strict):
    algorithm: str
    params: dict[str, Any] = Field(default_factory=dict)


class CompareRequest(_Data):
    candidates: list[Candidate] = Field(min_length=2, max_length=50)
    repeats: int = Field(1, ge=1, le=20, description="Repeated k-fold: every repeat draws new folds.")
    metric: str | None = None
    alpha: float = Field(0.05, gt=0, lt=1)


class Range(Strict):
    low: float
    high: float
    log: bool = False
    type: Literal["int", "float"] = "float"
    n: int | None = Field(None, ge=1, le=100, description="Grid search: number of points (default 5).")


class TuneRequest(_Data):
    algorithm: str
    params: dict[str, Any] = Field(default_factory=dict, description="Fixed params added to every candidate.")
    search: Literal["grid", "random", "halving"] = "grid"
    space: dict[str, list[Any] | Range] = Field(description="param: [values] or a range {low, high, log, type}.")
    n_iter: int | None = Field(None, ge=1, le=10_000, description="Random search: candidates drawn (default 10); "
                                                                   "grid: a random subset of this many grid points.")
    metric: str | None = None
    refit: bool = True
    factor: int = Field(3, ge=2, le=10, description="Halving: the kept fraction 1/factor and resource growth.")
    name: str | None = Field(None, max_length=255, description="Name of the refitted model.")


class AutoMLRequest(_Data):
    algorithms: list[str] | None = Field(None, description="Default: every algorithm of the task that suits "
                                                           "the data.")
    task: Literal["classification", "regression"] | None = Field(
        None, description="Default: classification for a categorical/boolean target, else regression.")
    time_budget_s: float = Field(300, gt=0, le=86_400)
    metric: str | None = None
    name: str | None = Field(None, max_length=255, description="Name of the refitted winner.")


class LearningCurveRequest(_Data):
    algorithm: str
    params: dict[str, Any] = Field(default_factory=dict)
    train_sizes: list[float] = Field([0.1, 0.325, 0.55, 0.775, 1.0], min_length=1, max_length=50,
                                     description="Fractions in (0, 1] of the training fold, or row counts.")
    metric: str | None = None


class FeatureSelectionRequest(_Data):
    algorithm: str
    params: dict[str, Any] = Field(default_factory=dict)
    direction: Literal["forward", "backward"] = "forward"
    n_features: int | None = Field(None, ge=1, description="Features to end with; unset: stop when the score "
                                                           "stops improving by more than tol.")
    tol: float = Field(0.0, ge=0)
    metric: str | None = None


class JobAccepted(BaseModel):
    job: Job
