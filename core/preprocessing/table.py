"""Table -> matrix preprocessing stored in every model bundle.

``TablePreprocessor`` turns named, typed columns into the float64 matrix an
estimator consumes:

* numeric / boolean columns (float64, NaN = missing, booleans as 0/1): imputed
  with the mean / median / most frequent value learned at fit (an all-missing
  column imputes 0) unless ``native_missing``; then, if ``scale``, standardised
  ``(x - mean) / std`` (population std, constant column -> scale 1; [Passerini §13.4]
  "input standardization") or min-max scaled to [0, 1].
* categorical columns (object arrays of str, None or NaN = missing): either one
  column of category codes 0..k-1 (``native_categorical``; categories sorted;
  missing and unknown -> NaN if ``native_missing`` else the code of the most
  frequent category) or k one-hot columns (missing and unknown -> all zeros).
* datetime columns (datetime64 arrays, or ISO 8601 strings; NaT/None = missing)
  are expanded into the numeric features ``name.year``, ``.month``, ``.day``,
  ``.dayofweek`` (Monday = 0), ``.dayofyear``, ``.hour`` (only when some fit value
  has a time of day) and ``.ordinal`` (days since 1970-01-01, fractional), which
  are then imputed and scaled like any numeric column.

Choices are recorded in docs/decisions/preprocessing.md.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from itertools import repeat

import numpy as np

from ..validation import F64, DataError, NotFittedError

__all__ = ["TablePreprocessor", "FEATURE_TYPES", "to_datetime64", "DATETIME_PARTS"]

FEATURE_TYPES = ("numeric", "boolean", "categorical", "datetime")
DATETIME_PARTS = ("year", "month", "day", "dayofweek", "dayofyear", "hour", "ordinal")
_US = "datetime64[us]"
_US_PER_DAY = 86_400_000_000
_IMPUTE = ("mean", "median", "most_frequent")
_SCALE_METHODS = ("standard", "minmax")


def _is_missing(v) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def _numeric_column(name: str, col) -> np.ndarray:
    """The column as a 1-d float64 array (None -> NaN); DataError naming the feature otherwise."""
    arr = col if isinstance(col, np.ndarray) else np.asarray(col)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.dtype == np.float64:
        out = arr
    else:
        try:
            out = arr.astype(np.float64)
        except (TypeError, ValueError):
            try:
                out = np.array([np.nan if v is None else v for v in arr.tolist()], dtype=np.float64)
            except (TypeError, ValueError):
                bad = next((v for v in arr.tolist() if not _is_missing(v) and not _parses_as_float(v)), None)
                raise DataError(
                    f"feature '{name}' is numeric but holds non-numeric data (e.g. {bad!r})"
                ) from None
    if out.ndim != 1:
        raise DataError(f"feature '{name}' must be 1-dimensional, got shape {out.shape}")
    if np.isinf(out).any():
        raise DataError(f"feature '{name}' contains infinity")
    return out


def _one_datetime(v) -> np.datetime64:
    if isinstance(v, np.datetime64):
        return v.astype(_US)
    if isinstance(v, _dt.date) and not isinstance(v, _dt.datetime):
        v = _dt.datetime(v.year, v.month, v.day)
    if isinstance(v, str):
        s = v.strip()
        if not s:
            return np.datetime64("NaT", "us")
        try:
            v = _dt.datetime.fromisoformat(s)
        except ValueError:
            raise ValueError(f"{v!r} is not an ISO 8601 date or time (e.g. 2024-05-01 or "
                             "2024-05-01T13:45:00Z)") from None
    if isinstance(v, _dt.datetime):
        if v.tzinfo is not None:  # UTC wall time
            v = v.astimezone(_dt.UTC).replace(tzinfo=None)
        return np.datetime64(v, "us")
    raise ValueError(f"{v!r} is not an ISO 8601 date or time (e.g. 2024-05-01 or 2024-05-01T13:45:00Z)")


def to_datetime64(values) -> np.ndarray:
    """datetime64[us] (UTC wall time; NaT = missing) from datetime64 values or ISO 8601 strings.

    Strings with a zone offset (``Z``, ``+02:00``) are converted to UTC; ``None``/NaN/empty are NaT.
    ValueError naming the first value that is not a date.
    """
    arr = values if isinstance(values, np.ndarray) else np.asarray(values, dtype=object)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.dtype.kind == "M":
        return arr.astype(_US)
    out = np.full(arr.shape[0], np.datetime64("NaT", "us"), dtype=_US)
    for i, v in enumerate(arr.tolist()):
        if not _is_missing(v):
            out[i] = _one_datetime(v)
    return out


def _datetime_input(name: str, col) -> np.ndarray:
    try:
        return to_datetime64(col)
    except ValueError as exc:
        raise DataError(f"feature '{name}' is a datetime but {exc}") from None


def _datetime_features(t: np.ndarray, parts) -> dict[str, np.ndarray]:
    """The numeric parts of datetime64[us] values (NaN where NaT)."""
    nat = np.isnat(t)
    safe = np.where(nat, np.datetime64(0, "us"), t)
    day = safe.astype("datetime64[D]")
    month = day.astype("datetime64[M]")
    year = day.astype("datetime64[Y]")
    calc = {
        "year": lambda: year.astype(np.int64) + 1970,
        "month": lambda: (month - year.astype("datetime64[M]")).astype(np.int64) + 1,
        "day": lambda: (day - month.astype("datetime64[D]")).astype(np.int64) + 1,
        "dayofweek": lambda: (day.astype(np.int64) + 3) % 7,  # 1970-01-01 was a Thursday
        "dayofyear": lambda: (day - year.astype("datetime64[D]")).astype(np.int64) + 1,
        "hour": lambda: (safe - day).astype(np.int64) // 3_600_000_000,
        "ordinal": lambda: safe.astype(np.int64) / _US_PER_DAY,
    }
    out = {}
    for p in parts:
        v = np.asarray(calc[p](), dtype=np.float64)
        v[nat] = np.nan
        out[p] = v
    return out


def _parses_as_float(v) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


def _category_column(name: str, col) -> np.ndarray:
    arr = col if isinstance(col, np.ndarray) else np.asarray(col, dtype=object)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise DataError(f"feature '{name}' must be 1-dimensional, got shape {arr.shape}")
    return arr


def _category_strings(arr: np.ndarray) -> tuple[list[str], np.ndarray]:
    """(values as str for non-missing entries, missing mask) -- used at fit only."""
    if arr.dtype.kind in "US":
        return arr.astype(str).tolist(), np.zeros(arr.shape[0], dtype=bool)
    if arr.dtype.kind == "f":
        miss = np.isnan(arr)
        return [str(v) for v in arr[~miss].tolist()], miss
    values = arr.tolist()
    miss = np.fromiter((_is_missing(v) for v in values), dtype=bool, count=len(values))
    return [v if isinstance(v, str) else str(v) for v, m in zip(values, miss, strict=False) if not m], miss


class TablePreprocessor:
    """Learned table -> float64 matrix transform (imputation, scaling, category encoding).

    Parameters
    ----------
    scale: standardise numeric/boolean outputs (after imputation).
    impute: "mean" | "median" | "most_frequent" for numeric/boolean missing values.
    native_missing: leave NaN in numeric outputs (and categorical codes) for an
        estimator that handles missing values itself.
    native_categorical: one code column per categorical feature instead of one-hot.
    scale_method: "standard" (z-score, default) or "minmax" ([0, 1] from the fit range).
    """

    def __init__(
        self,
        *,
        scale: bool = False,
        impute: str = "mean",
        native_missing: bool = False,
        native_categorical: bool = False,
        scale_method: str = "standard",
    ):
        self.scale = scale
        self.impute = impute
        self.native_missing = native_missing
        self.native_categorical = native_categorical
        self.scale_method = scale_method

    # ------------------------------------------------------------------ fit
    def fit(self, columns: Mapping[str, np.ndarray], types: Mapping[str, str]) -> TablePreprocessor:
        """Learn imputation values, scaling and category lists from ``columns``.

        ``types`` maps each feature name to "numeric" | "boolean" | "categorical";
        its key order is the output feature order.
        """
        if self.impute not in _IMPUTE:
            raise DataError(f"impute must be one of {list(_IMPUTE)}, got {self.impute!r}")
        if self.scale_method not in _SCALE_METHODS:
            raise DataError(f"scale_method must be one of {list(_SCALE_METHODS)}, got {self.scale_method!r}")
        if not types:
            raise DataError("at least one feature is required")
        self.__dict__.pop("_matrix_plan", None)  # transform_matrix's facts of the previous fit
        for name in types:
            if types[name] not in FEATURE_TYPES:
                raise DataError(
                    f"feature '{name}' has unknown type {types[name]!r}; "
                    f"expected one of {list(FEATURE_TYPES)}"
                )
        input_names, input_types = list(types), dict(types)
        self.datetime_parts_: dict[str, list[str]] = {}
        for name in input_names:
            if types[name] == "datetime":
                if name not in columns:
                    raise DataError(f"required feature '{name}' is missing from the input")
                t = _datetime_input(name, columns[name])
                present = t[~np.isnat(t)]
                timed = bool(present.size and (present != present.astype("datetime64[D]")).any())
                self.datetime_parts_[name] = [p for p in DATETIME_PARTS if p != "hour" or timed]
        if self.datetime_parts_:
            columns = self._expand_datetimes(columns)
            types = {}
            for name in input_names:
                if name in self.datetime_parts_:
                    types.update({f"{name}.{p}": "numeric" for p in self.datetime_parts_[name]})
                else:
                    types[name] = input_types[name]
        names = list(types)
        n_rows = None
        num_names, num_fill, num_center, num_scale = [], [], [], []
        categories: dict[str, list[str]] = {}
        modes: dict[str, int] = {}
        for name in names:
            if name not in columns:
                raise DataError(f"required feature '{name}' is missing from the input")
            if types[name] == "categorical":
                arr = _category_column(name, columns[name])
                values, _ = _category_strings(arr)
                uniq, counts = (
                    np.unique(np.asarray(values, dtype=str), return_counts=True)
                    if values
                    else (np.empty(0, dtype=str), np.empty(0, dtype=np.intp))
                )
                categories[name] = uniq.tolist()
                modes[name] = int(np.argmax(counts)) if len(counts) else -1
            else:
                arr = _numeric_column(name, columns[name])
                fill, center, scale = self._numeric_stats(arr)
                num_names.append(name)
                num_fill.append(fill)
                num_center.append(center)
                num_scale.append(scale)
            if n_rows is None:
                n_rows = arr.shape[0]
            elif arr.shape[0] != n_rows:
                raise DataError(f"feature '{name}' has {arr.shape[0]} rows; expected {n_rows}")
        if not n_rows:
            raise DataError("the input has no rows")

        # output layout
        out_names: list[str] = []
        cat_mask: list[bool] = []
        num_pos: list[int] = []
        cat_plan: list[tuple] = []
        for name in names:
            if types[name] == "categorical":
                cats = categories[name]
                if self.native_categorical:
                    cat_plan.append((name, len(out_names), 1))
                    out_names.append(name)
                    cat_mask.append(True)
                else:
                    cat_plan.append((name, len(out_names), len(cats)))
                    out_names.extend(f"{name}={c}" for c in cats)
                    cat_mask.extend([False] * len(cats))
            else:
                num_pos.append(len(out_names))
                out_names.append(name)
                cat_mask.append(False)

        self.feature_names_in_ = input_names
        self.types_ = input_types
        self.categories_ = categories
        self.statistics_ = dict(zip(num_names, num_fill, strict=False))
        self.center_ = dict(zip(num_names, num_center, strict=False))
        self.scale_ = dict(zip(num_names, num_scale, strict=False))
        self.feature_names_out_ = out_names
        self.categorical_mask_ = np.asarray(cat_mask, dtype=bool)
        self.n_features_out_ = len(out_names)
        # precomputed transform plan (plain containers: pickles cleanly, no lambdas)
        self._num_names = num_names
        self._num_pos = np.asarray(num_pos, dtype=np.intp)
        self._num_fill = np.asarray(num_fill, dtype=np.float64)
        self._num_center = np.asarray(num_center, dtype=np.float64)
        self._num_scale = np.asarray(num_scale, dtype=np.float64)
        self._cat_plan = cat_plan
        self._cat_index = {name: {c: i for i, c in enumerate(categories[name])} for name in categories}
        self._cat_sorted = {name: np.asarray(categories[name], dtype=str) for name in categories}
        self._cat_fallback = {name: self._fallback_code(modes[name]) for name in categories}
        return self

    def _expand_datetimes(self, columns: Mapping[str, np.ndarray]) -> dict:
        """``columns`` with each datetime feature replaced by its numeric parts."""
        out = dict(columns)
        for name, parts in self.datetime_parts_.items():
            if name not in columns:
                raise DataError(f"required feature '{name}' is missing from the input")
            feats = _datetime_features(_datetime_input(name, columns[name]), parts)
            del out[name]
            out.update({f"{name}.{p}": v for p, v in feats.items()})
        return out

    def _fallback_code(self, mode: int) -> float:
        """Code for missing/unknown categories in native mode: NaN, or the most frequent code."""
        if self.native_missing:
            return float("nan")
        return float(mode) if mode >= 0 else 0.0

    def _numeric_stats(self, arr: np.ndarray) -> tuple[float, float, float]:
        present = arr[~np.isnan(arr)]
        if present.size == 0:
            fill = 0.0
        elif self.impute == "mean":
            fill = float(np.mean(present))
        elif self.impute == "median":
            fill = float(np.median(present))
        else:
            vals, counts = np.unique(present, return_counts=True)
            fill = float(vals[np.argmax(counts)])  # smallest of the tied modes (as scikit-learn)
        if self.native_missing:
            fill = float("nan")
            basis = present
        else:
            basis = np.where(np.isnan(arr), fill, arr)
        center, scale = 0.0, 1.0
        if self.scale and basis.size:
            if self.scale_method == "standard":
                center = float(np.mean(basis))
                std = float(np.std(basis))
                scale = std if std >= 10 * np.finfo(np.float64).eps * max(1.0, abs(center)) else 1.0
            else:
                lo, hi = float(np.min(basis)), float(np.max(basis))
                center = lo
                scale = hi - lo if hi > lo else 1.0
        return fill, center, scale

    # ------------------------------------------------------------------ transform
    def transform(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """The float64, C-contiguous matrix for ``columns`` (extra columns are ignored).

        Costs a few microseconds per feature for a single row: numeric columns are
        copied into one block and imputed/scaled together; category codes come from
        precomputed dicts (or a vectorised ``searchsorted`` for large numpy string arrays).
        """
        if not hasattr(self, "_cat_plan"):
            raise NotFittedError("this TablePreprocessor is not fitted yet; call fit before using it")
        n = self._n_rows(columns)
        if getattr(self, "datetime_parts_", None):
            columns = self._expand_datetimes(columns)
        out = np.zeros((n, self.n_features_out_), dtype=np.float64)
        num_names = self._num_names
        if num_names:
            X = np.empty((n, len(num_names)), dtype=np.float64)
            for j, name in enumerate(num_names):
                col = columns[name]
                if not (type(col) is np.ndarray and col.dtype == np.float64 and col.ndim == 1):
                    col = _numeric_column(name, col)
                if col.shape[0] != n:
                    raise DataError(f"feature '{name}' has {col.shape[0]} rows; expected {n}")
                X[:, j] = col
            if np.isinf(X).any():
                bad = num_names[int(np.flatnonzero(np.isinf(X).any(axis=0))[0])]
                raise DataError(f"feature '{bad}' contains infinity")
            if not self.native_missing:
                mask = np.isnan(X)
                if mask.any():
                    X[mask] = self._num_fill[np.nonzero(mask)[1]]
            if self.scale:
                X -= self._num_center
                X /= self._num_scale
            out[:, self._num_pos] = X
        native = self.native_categorical
        for name, start, width in self._cat_plan:
            arr = _category_column(name, columns[name])
            if arr.shape[0] != n:
                raise DataError(f"feature '{name}' has {arr.shape[0]} rows; expected {n}")
            if n == 1:
                code = self._code_one(name, arr[0])
                if native:
                    out[0, start] = code if code >= 0 else self._cat_fallback[name]
                elif code >= 0:
                    out[0, start + code] = 1.0
                continue
            codes = self._codes(name, arr)
            if native:
                col = codes.astype(np.float64)
                bad = codes < 0
                if bad.any():
                    col[bad] = self._cat_fallback[name]
                out[:, start] = col
            elif width:
                ok = np.flatnonzero(codes >= 0)
                out[ok, start + codes[ok]] = 1.0
        return out

    @property
    def all_numeric(self) -> bool:
        """True when every input feature is numeric or boolean (``transform_matrix`` applies)."""
        return hasattr(self, "_cat_plan") and not self._cat_plan and not getattr(self, "datetime_parts_", None)

    def transform_matrix(self, A: np.ndarray, *, finite: bool = False, copy: bool = True) -> np.ndarray:
        """Fast path of ``transform`` for all-numeric inputs given as one float matrix.

        ``A`` holds the input features as columns in fit order (NaN = missing); this is the
        single-row prediction path, so it costs a few vector operations and no per-column work.
        ``finite=True``: the caller guarantees there is no NaN (nothing to impute); ``copy=False``: ``A`` is
        the caller's scratch float64 C array and may be transformed in place.
        """
        plan = self.__dict__.get("_matrix_plan")
        if plan is None:
            plan = self._matrix_plan()
        k, identity, center1, scale1 = plan
        shape = A.shape
        if len(shape) != 2 or shape[1] != k:
            raise DataError(f"expected a matrix with {k} columns, got shape {shape}")
        if copy or A.dtype is not F64 or not A.flags.c_contiguous:
            X = np.array(A, dtype=np.float64, order="C")  # a copy: the caller's array is never modified
        else:
            X = A
        if not (finite or self.native_missing):
            mask = np.isnan(X)
            if mask.any():
                X[mask] = self._num_fill[np.nonzero(mask)[1]]
        if self.scale:
            if shape[0] == 1:  # operands of one shape: NumPy's loop without its broadcasting iterator (half the cost)
                X -= center1
                X /= scale1
            else:
                X -= self._num_center
                X /= self._num_scale
        if not identity:
            out = np.zeros((shape[0], self.n_features_out_), dtype=np.float64)
            out[:, self._num_pos] = X
            return out
        return X

    def __getstate__(self) -> dict:
        """Pickled without ``transform_matrix``'s cached facts: a bundle's bytes do not depend on whether a row was
        predicted before it was saved, and the facts are remade from the fitted arrays on first use."""
        state = self.__dict__.copy()
        state.pop("_matrix_plan", None)
        return state

    def _matrix_plan(self) -> tuple:
        """``transform_matrix``'s facts of the fitted preprocessor, made once (``fit`` drops them): the number of
        columns, whether numeric features fill the output in order (no scatter needed), and the centres and
        scales as one-row matrices. DataError when the features are not all numeric."""
        if getattr(self, "_cat_plan", True) or self.__dict__.get("datetime_parts_"):  # not all-numeric
            raise DataError("transform_matrix needs all-numeric features; use transform")
        identity = bool(np.array_equal(self._num_pos, np.arange(len(self._num_pos))))
        plan = self._matrix_plan = (len(self._num_names), identity, self._num_center.reshape(1, -1),
                                    self._num_scale.reshape(1, -1))
        return plan

    def _n_rows(self, columns) -> int:
        for name in self.feature_names_in_:
            if name not in columns:
                raise DataError(f"required feature '{name}' is missing from the input")
        col = columns[self.feature_names_in_[0]]
        shape = getattr(col, "shape", None)
        if shape is None:
            col = np.asarray(col, dtype=object)
            shape = col.shape
        return int(shape[0]) if len(shape) else 1

    def _code_one(self, name: str, v) -> int:
        index = self._cat_index[name]
        if type(v) is str:
            return index.get(v, -1)
        if isinstance(v, np.str_):
            return index.get(str(v), -1)
        if _is_missing(v):
            return -1
        return index.get(str(v), -1)

    def _codes(self, name: str, arr: np.ndarray) -> np.ndarray:
        """Category code of each entry; -1 for missing or unknown."""
        index = self._cat_index[name]
        if arr.dtype.kind in "US" and arr.shape[0] > 32:
            cats = self._cat_sorted[name]
            if cats.size == 0:
                return np.full(arr.shape[0], -1, dtype=np.intp)
            vals = arr.astype(str)
            pos = np.minimum(np.searchsorted(cats, vals), cats.size - 1)
            return np.where(cats[pos] == vals, pos, -1).astype(np.intp)
        if arr.dtype.kind == "f":
            values = [str(v) if v == v else None for v in arr.tolist()]
        else:
            values = arr.tolist()
        codes = np.fromiter(map(index.get, values, repeat(-1)), dtype=np.intp, count=len(values))
        if arr.dtype == object and (codes < 0).any():
            # non-str, non-missing values (e.g. ints) are matched by their string form, as at fit
            for i in np.flatnonzero(codes < 0).tolist():
                v = values[i]
                if not _is_missing(v) and not isinstance(v, str):
                    codes[i] = index.get(str(v), -1)
        return codes

    def fit_transform(self, columns: Mapping[str, np.ndarray], types: Mapping[str, str]) -> np.ndarray:
        return self.fit(columns, types).transform(columns)

    # ------------------------------------------------------------------ description
    @property
    def numeric_outputs(self) -> list[tuple[str, int]]:
        """``(input feature, output column)`` of each numeric output column (numeric, boolean, datetime part)."""
        if not hasattr(self, "_cat_plan"):
            raise NotFittedError("this TablePreprocessor is not fitted yet; call fit before using it")
        return list(zip(self._num_names, self._num_pos.tolist(), strict=True))

    @property
    def category_outputs(self) -> list[tuple[str, int, int]]:
        """``(input feature, first output column, number of columns)`` of each categorical feature's block
        (one-hot columns, or one code column when ``native_categorical``)."""
        if not hasattr(self, "_cat_plan"):
            raise NotFittedError("this TablePreprocessor is not fitted yet; call fit before using it")
        return [tuple(entry) for entry in self._cat_plan]

    def describe_features(self) -> list[dict]:
        """The input feature schema: ``[{"name", "type", "categories"?}]`` in feature order."""
        if not hasattr(self, "_cat_plan"):
            raise NotFittedError("this TablePreprocessor is not fitted yet; call fit before using it")
        out = []
        for name in self.feature_names_in_:
            d = {"name": name, "type": self.types_[name]}
            if self.types_[name] == "categorical":
                d["categories"] = list(self.categories_[name])
            out.append(d)
        return out

    def get_params(self) -> dict:
        return {
            "scale": self.scale,
            "impute": self.impute,
            "native_missing": self.native_missing,
            "native_categorical": self.native_categorical,
            "scale_method": self.scale_method,
        }

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"TablePreprocessor({inner})"
