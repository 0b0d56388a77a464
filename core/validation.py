"""Input validation shared by every estimator.

Errors are ``DataError`` (a ``ValueError``) with a sentence a person can act on;
the service maps them to 422.
"""

from __future__ import annotations

import math

import numpy as np

_SMALL = 256  # arrays up to this size are checked for finiteness by one Python sum (see check_array)
F64 = np.dtype(np.float64)  # the native float64 dtype: a singleton, so `arr.dtype is F64` is an exact test
_MISSING = object()

__all__ = [
    "DataError",
    "NotFittedError",
    "check_array",
    "check_X_y",
    "check_target",
    "check_sample_weight",
    "check_categorical_features",
    "class_weight_vector",
    "check_is_fitted",
    "check_n_features",
    "check_predict_input",
    "check_inverse_input",
    "column_or_1d",
]


class DataError(ValueError):
    """Input data the estimator cannot use (shape, NaN, too few samples...)."""


class NotFittedError(RuntimeError):
    """An estimator was used before ``fit``."""


def check_array(
    X,
    *,
    allow_nan: bool = False,
    ensure_2d: bool = True,
    min_samples: int = 1,
    min_features: int = 1,
    dtype=np.float64,
    copy: bool = False,
    name: str = "X",
) -> np.ndarray:
    """Return ``X`` as a C-contiguous float array, checked for shape and finiteness.

    ``allow_nan`` admits NaN (missing values) but never infinities.
    The fast path (already a float64 array) costs a few microseconds.
    """
    if isinstance(X, np.ndarray) and X.dtype == dtype and not copy:
        arr = X
    else:
        try:
            arr = np.array(X, dtype=dtype, copy=copy) if copy else np.asarray(X, dtype=dtype)
        except (TypeError, ValueError) as exc:
            raise DataError(f"{name} must be numeric: {exc}") from None
    if ensure_2d:
        if arr.ndim == 1:
            raise DataError(
                f"{name} must be 2-dimensional (n_samples, n_features); got a 1-d array of "
                f"shape {arr.shape}. Reshape with X.reshape(-1, 1) for one feature or "
                "X.reshape(1, -1) for one sample."
            )
        if arr.ndim != 2:
            raise DataError(f"{name} must be 2-dimensional, got shape {arr.shape}")
        if arr.shape[1] < min_features:
            raise DataError(f"{name} has {arr.shape[1]} features; at least {min_features} required")
    if arr.shape[0] < min_samples:
        raise DataError(f"{name} has {arr.shape[0]} samples; at least {min_samples} required")
    if arr.dtype.kind == "f" and not (arr.size <= _SMALL and math.isfinite(sum(arr.ravel().tolist()))):
        # A finite sum proves every value finite (NaN and infinities propagate through a sum), and costs a
        # third of the NumPy scan on the small arrays of single-row predictions; a sum that is not finite
        # (a NaN or infinity, or finite values overflowing) is settled by the exact scan below.
        if allow_nan:
            if np.isinf(arr).any():
                raise DataError(f"{name} contains infinity")
        elif not np.isfinite(arr).all():
            raise DataError(
                f"{name} contains NaN or infinity; impute missing values or use an algorithm "
                "that handles them natively"
            )
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    return arr


def column_or_1d(y, *, name: str = "y") -> np.ndarray:
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise DataError(f"{name} must be 1-dimensional, got shape {arr.shape}")
    return arr


def check_X_y(X, y, *, allow_nan: bool = False, y_numeric: bool = False, min_samples: int = 1, **kw):
    """Check ``X`` and ``y`` together: consistent lengths, numeric finite ``y`` if asked."""
    X = check_array(X, allow_nan=allow_nan, min_samples=min_samples, **kw)
    y = check_target(y, X.shape[0], numeric=y_numeric)
    return X, y


def check_target(y, n_samples: int, *, numeric: bool = False) -> np.ndarray:
    """``y`` as a 1-d array of ``n_samples`` entries; finite floats when ``numeric``, no missing label otherwise.

    For estimators whose ``X`` is checked separately (e.g. with NaN or category codes allowed).
    """
    if y is None:
        raise DataError("y is required for a supervised estimator")
    y = column_or_1d(y)
    if y.shape[0] != n_samples:
        raise DataError(f"X has {n_samples} samples but y has {y.shape[0]}")
    if numeric:
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError):
            raise DataError("y must be numeric for a regressor") from None
        if not np.isfinite(y).all():
            raise DataError("y contains NaN or infinity")
    elif y.dtype.kind == "f" and np.isnan(y).any():
        raise DataError("y contains missing values (NaN)")
    elif y.dtype == object and any(v is None for v in y):
        raise DataError("y contains missing values (None)")
    elif y.dtype == object and any(isinstance(v, float) and v != v for v in y):
        raise DataError("y contains missing values (NaN)")
    return y


def check_sample_weight(sample_weight, n_samples: int) -> np.ndarray:
    """Return a float weight vector of length ``n_samples`` (ones when ``None``)."""
    if sample_weight is None:
        return np.ones(n_samples, dtype=np.float64)
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.ndim == 0:
        w = np.full(n_samples, float(w))
    if w.shape != (n_samples,):
        raise DataError(f"sample_weight has shape {w.shape}, expected ({n_samples},)")
    if not np.isfinite(w).all() or (w < 0).any():
        raise DataError("sample_weight must be finite and non-negative")
    if w.sum() <= 0:
        raise DataError("sample_weight must not be all zero")
    return w


def class_weight_vector(class_weight, classes: np.ndarray, codes: np.ndarray, sample_weight=None) -> np.ndarray:
    """Per-class weights, indexed by class code, as scikit-learn's ``compute_class_weight``: None -> ones;
    "balanced" -> n / (k * count of the class) (counts weighted by ``sample_weight`` when given, as its linear
    models do; a class with no weight gets 0); a dict label -> weight, whose keys may be the labels or their
    string form (JSON keys are strings)."""
    k = len(classes)
    if class_weight is None:
        return np.ones(k)
    if isinstance(class_weight, str):  # "balanced"
        sw = np.ones(len(codes)) if sample_weight is None else sample_weight
        counts = np.bincount(codes, weights=sw, minlength=k).astype(np.float64)
        with np.errstate(divide="ignore"):
            return np.where(counts > 0, float(sw.sum()) / (k * counts), 0.0)
    from .params import ParamError

    out = np.ones(k)
    lookup = {str(c): i for i, c in enumerate(classes.tolist())}
    for key, val in class_weight.items():
        i = lookup.get(str(key))
        if i is None:
            raise ParamError("class_weight", f"label {key!r} is not a class of y ({list(lookup)})")
        out[i] = float(val)
    return out


def check_categorical_features(categorical_features, n_features: int, *, default: bool = False) -> np.ndarray:
    """Boolean mask of the categorical columns from a mask or a list of column indices.

    ``None`` marks every column ``default`` (no column categorical unless an estimator treats all as such).
    """
    if categorical_features is None:
        return np.full(n_features, default)
    cf = np.asarray(categorical_features)
    mask = np.zeros(n_features, dtype=bool)
    if cf.size == 0:
        return mask
    if cf.dtype == bool:
        if cf.shape != (n_features,):
            raise DataError(f"categorical_features mask has shape {cf.shape}, expected ({n_features},)")
        return cf.copy()
    try:
        idx = cf.astype(np.intp).ravel()
    except (TypeError, ValueError):
        raise DataError("categorical_features must be a boolean mask or a list of column indices") from None
    if ((idx < 0) | (idx >= n_features)).any():
        raise DataError(f"categorical_features indices must lie in [0, {n_features})")
    mask[idx] = True
    return mask


def _fitted_attrs(est) -> list[str]:
    return [k for k in vars(est) if k.endswith("_") and not k.startswith("_")]


def check_is_fitted(est, attributes: list[str] | None = None) -> None:
    """Raise NotFittedError unless ``est`` has fitted (trailing underscore) attributes."""
    if attributes is not None:
        ok = True
        for a in attributes:
            if not hasattr(est, a):
                ok = False
                break
    else:
        ok = bool(_fitted_attrs(est))
    if not ok:
        raise NotFittedError(
            f"this {type(est).__name__} is not fitted yet; call fit before using it"
        )


def check_inverse_input(est, Z, attribute: str, n_components, *, name: str = "Z") -> np.ndarray:
    """The input of ``inverse_transform``: a fitted ``est``, a finite matrix of ``n_components(est)`` columns."""
    check_is_fitted(est, [attribute])
    Z = check_array(Z, name=name)
    width = n_components(est)
    if Z.shape[1] != width:
        raise DataError(f"{name} has {Z.shape[1]} columns, but the model has {width} components")
    return Z


def check_n_features(est, X: np.ndarray) -> None:
    expected = getattr(est, "n_features_in_", None)
    if expected is not None and X.shape[1] != expected:
        raise DataError(f"X has {X.shape[1]} features, but the model was fitted with {expected}")


def is_one_clean_row(est, X, attribute: str) -> bool:
    """Whether ``est`` is fitted (``attribute`` set) and ``X`` is one float64 C-contiguous row of its fitted width:
    what ``check_predict_input`` accepts at once, but for finiteness, which the caller then answers itself (a
    linear score is finite only if every value of the row is: NaN and infinities propagate through the products).
    Anything else goes through ``check_predict_input``."""
    return (type(X) is np.ndarray and X.dtype is F64 and X.ndim == 2 and X.shape[0] == 1
            and X.shape[1] == getattr(est, "n_features_in_", -1) and X.flags.c_contiguous
            and getattr(est, attribute, _MISSING) is not _MISSING)


def check_predict_input(est, X, attribute: str, *, allow_nan: bool = False) -> np.ndarray:
    """The prediction-time check of an estimator in one call: ``check_is_fitted(est, [attribute])``, then
    ``check_array(X, allow_nan=allow_nan)`` and ``check_n_features(est, X)``, with the same errors.

    A small float64 C-contiguous 2-d array of the fitted width whose values are finite (the single-row
    predictions the service sends) is returned as it is after a handful of attribute reads and one Python
    sum; anything else takes the full checks.
    """
    if getattr(est, attribute, _MISSING) is _MISSING:
        check_is_fitted(est, [attribute])  # raises NotFittedError with its message
    if (type(X) is np.ndarray and X.dtype is F64 and X.ndim == 2 and X.size <= _SMALL and X.size
            and X.flags.c_contiguous and X.shape[1] == getattr(est, "n_features_in_", -1)
            and math.isfinite(sum(map(sum, X.tolist())))):  # row sums of the nested list: no raveled copy
        return X
    X = check_array(X, allow_nan=allow_nan)
    check_n_features(est, X)
    return X
