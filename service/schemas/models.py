"""Request and response models (pydantic, extra="forbid") of the v1 REST contract."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Value = float | int | str | bool | None


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    errors: list[dict[str, Any]] | None = None


# -- discovery -------------------------------------------------------------------------------------
class Capabilities(BaseModel):
    predict_proba: bool
    predict_std: bool
    transform: bool
    native_missing: bool
    native_categorical: bool
    sample_weight: bool
    progress: bool
    explain: Literal["tree", "linear", "kernel"] | None = Field(
        None, description="How POST /v1/models/{id}/explain explains the algorithm by default: exact TreeSHAP, "
                          "the exact linear closed form, or the model-agnostic estimator (null: not supervised).")


class Algorithm(BaseModel):
    name: str
    task: Literal["classification", "regression", "clustering", "decomposition", "density", "reinforcement"]
    summary: str
    params_schema: dict[str, Any]
    capabilities: Capabilities


class AlgorithmList(BaseModel):
    data: list[Algorithm]
    count: int


class Health(BaseModel):
    status: str
    checks: dict[str, str] | None = None


# -- datasets --------------------------------------------------------------------------------------
class ColumnInfo(BaseModel):
    name: str
    type: Literal["numeric", "categorical", "boolean", "datetime"]
    n_missing: int
    summary: dict[str, Any]


class Dataset(BaseModel):
    id: str
    name: str
    n_rows: int
    n_columns: int
    columns: list[ColumnInfo]
    created_at: dt.datetime
    size_bytes: int
    notes: list[str] = Field(default_factory=list, description="What ingestion did, e.g. a dropped pandas index column.")

    @field_validator("notes", mode="before")
    @classmethod
    def _no_notes(cls, v):  # datasets stored before notes existed have NULL
        return v or []


class DatasetList(BaseModel):
    data: list[Dataset]
    count: int


class InlineTable(Strict):
    """A table given inline: column names and rows of values (numbers, strings, booleans, null)."""

    columns: list[str] = Field(min_length=1)
    rows: list[list[Value]] = Field(min_length=1)
    types: dict[str, Literal["numeric", "categorical", "boolean", "datetime"]] | None = None


class DatasetCreateJSON(Strict):
    name: str | None = Field(None, max_length=255)
    columns: list[str] = Field(min_length=1)
    rows: list[list[Value]] = Field(min_length=1)
    types: dict[str, Literal["numeric", "categorical", "boolean", "datetime"]] | None = None


class RowsPage(BaseModel):
    columns: list[str]
    rows: list[list[Value]]
    offset: int
    limit: int
    total: int


# -- jobs ------------------------------------------------------------------------------------------
class JobError(BaseModel):
    type: str
    message: str


class Job(BaseModel):
    id: str
    kind: str
    status: Literal["queued", "running", "succeeded", "failed", "cancelled"]
    progress: float
    message: str
    created_at: dt.datetime
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    error: JobError | None = None
    result: dict[str, Any] | None = None
    model_id: str | None = None


class JobList(BaseModel):
    data: list[Job]
    count: int


# -- training --------------------------------------------------------------------------------------
class Validation(Strict):
    holdout: float | None = Field(None, ge=0, lt=1, description="Fraction of rows held out for validation metrics (0: none, the model is fitted on every row).")
    cv: int | None = Field(None, ge=2, le=100, description="k-fold cross-validation metrics; the model is then fitted on all rows.")
    stratify: bool = True
    random_state: int | None = Field(0, ge=0, lt=2**32)
    refit: bool = Field(False, description="With a holdout: after measuring, refit the model on every row.")
    time_column: str | None = Field(None, max_length=255, description="With a holdout: the latest rows by this datetime (or numeric) column are held out, instead of a random split.")


class Preprocessing(Strict):
    impute: Literal["mean", "median", "most_frequent"] | None = Field(None, description="Missing numeric values (default: mean).")
    scale: Literal["standard", "minmax", "none"] | None = Field(None, description="Numeric scaling (default: standard for algorithms that need scaling, none otherwise).")
    encode: Literal["onehot", "native"] | None = Field(None, description="Categorical columns: one-hot, or category codes for algorithms that split on categories natively (their default).")
    drop: list[str] = Field(default_factory=list, description="Columns never used as features.")


class TrainRequest(Strict):
    algorithm: str = Field(examples=["logistic_regression"])
    params: dict[str, Any] = Field(default_factory=dict)
    dataset_id: str | None = None
    data: InlineTable | None = None
    target: str | None = None
    features: list[str] | None = None
    validation: Validation | None = None
    preprocessing: Preprocessing | None = None
    positive_label: str | int | float | bool | None = Field(None, description="Binary classification: the class that precision, recall, f1 and roc_auc are about (default: the second class).")
    name: str | None = Field(None, max_length=255)


class TrainAccepted(BaseModel):
    job: Job
    model_id: str


# -- models ----------------------------------------------------------------------------------------
class Feature(BaseModel):
    name: str
    type: str
    categories: list[str] | None = None


class Model(BaseModel):
    id: str
    name: str
    algorithm: str
    task: str
    params: dict[str, Any]
    status: Literal["training", "ready", "failed"]
    job_id: str
    dataset_id: str | None = None
    features: list[Feature]
    target: str | None = None
    classes: list[Any] | None = None
    metrics: dict[str, Any]
    insight: dict[str, Any] | None = Field(
        None, description="feature_importances (impurity-based, or permutation-based after an importance job) "
                          "and/or coefficients, keyed by original feature names (one-hot columns as 'column=value').")
    created_at: dt.datetime
    size_bytes: int
    notes: list[str] = Field(default_factory=list, description="What training decided for you (features left out, rows used).")
    preprocessing: dict[str, Any] | None = Field(None, description="The effective preprocessing (impute, scale, encode, drop).")


class ModelList(BaseModel):
    data: list[Model]
    count: int


class PredictRequest(Strict):
    instances: list[dict[str, Value]] | None = Field(None, description="Named feature values, any order; missing keys are missing values.")
    rows: list[list[Value]] | None = Field(None, description="Values in the model's feature order.")
    return_proba: bool = False
    return_std: bool = False


class PredictResponse(BaseModel):
    predictions: list[Any] | None = None
    probabilities: list[list[float]] | None = None
    classes: list[Any] | None = None
    std: list[float] | None = None
    components: list[list[float]] | None = None
    log_density: list[float] | None = None
    values: list[float] | None = Field(None, description="Reinforcement learning: V(s) per state.")
    q_values: list[dict[str, float | None]] | None = Field(
        None, description="Reinforcement learning: {action: Q(s, action)} per state.")


class EvaluateRequest(Strict):
    dataset_id: str | None = None
    data: InlineTable | None = None
    target: str | None = Field(None, description="Label column: defaults to the model's target; for clustering, enables ari/nmi.")
    positive_label: str | int | float | bool | None = Field(None, description="Binary classification: the positive class (default: the one chosen at training, else the second class).")


class ConfusionMatrix(BaseModel):
    labels: list[Any]
    matrix: list[list[int]]


class EvaluateResponse(BaseModel):
    task: str
    n_samples: int
    metrics: dict[str, Any]
    confusion_matrix: ConfusionMatrix | None = None
    curves: dict[str, Any] | None = None


# ---------------------------------------------------------------------------------------- explanations
class Background(Strict):
    dataset_id: str | None = Field(None, description="Rows the features are 'removed' to; default: the model's training dataset.")
    n: int = Field(100, ge=1, le=1000, description="Rows sampled from it (seeded).")


class ExplainRequest(Strict):
    instances: list[dict[str, Value]] | None = None
    rows: list[list[Value]] | None = None
    method: Literal["auto", "tree", "linear", "kernel"] = "auto"
    output: Literal["probability", "margin"] | None = Field(
        None, description="Classifiers: the explained output space. 'probability' (default where the model has "
        "predict_proba): contributions per class that sum with base_value to predict_proba; for boosting and "
        "logistic/softmax models they are exact, carried from the margin through the link per background row "
        "(shap's probability rescaling; docs/decisions/explanations.md). 'margin': the additive score before the "
        "link (log-odds, per-class scores, decision function); 422 for models without one (trees, forests, kNN, "
        "naive Bayes). Regressors: leave it out (422 otherwise).")
    background: Background | None = None
    n_permutations: int = Field(10, ge=2, le=1000, description="Permutations of the model-agnostic estimator (more than 8 features).")
    random_state: int = Field(0, ge=0, le=2**32 - 1)


class ExplainResponse(BaseModel):
    method: Literal["tree", "linear", "kernel"]
    output: Literal["probability", "margin", "prediction"] = Field(description="The explained quantity: class probabilities, the additive score before the link (log-odds, per-class scores, decision function), or the regression prediction.")
    feature_names: list[str]
    classes: list[Any] | None = None
    base_value: float | list[float]
    contributions: list[list[Any]] = Field(description="contributions[i][f] (regression) or contributions[i][f][c] (classification).")
    predictions: list[Any] = Field(description="base_value + the sum of the contributions: the explained output of each instance.")
    standard_errors: list[list[Any]] | None = Field(None, description="Monte-Carlo standard error of each contribution (method 'kernel' with sampled permutations).")
    additivity_tolerance: float | None = None


class ImportanceRequest(Strict):
    dataset_id: str
    n_repeats: int = Field(5, ge=1, le=100)
    metric: str | None = Field(None, description="An evaluate metric name; default accuracy / r2.")
    random_state: int = Field(0, ge=0, le=2**32 - 1)


class ImportanceAccepted(BaseModel):
    job: Job


class PartialDependenceRequest(Strict):
    dataset_id: str
    features: list[str] = Field(min_length=1, max_length=50)
    grid_resolution: int = Field(20, ge=2, le=200)
    kind: Literal["average", "individual", "both"] = "average"


class PartialDependenceResult(BaseModel):
    feature: str
    grid: list[Any]
    average: list[Any] | None = None
    individual: list[Any] | None = None


class PartialDependenceResponse(BaseModel):
    results: list[PartialDependenceResult]
    output: Literal["probability", "prediction"]
    classes: list[Any] | None = None
    n_rows: int
