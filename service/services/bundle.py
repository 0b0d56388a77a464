"""The model bundle: preprocessing + estimator + feature schema + label mapping, saved as one artifact.

It also converts request payloads (named instances or positional rows) into the
matrix the estimator expects, naming the offending feature in every error.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.preprocessing.table import to_datetime64

from ..errors import invalid
from .tables import FALSE_TOKENS, MISSING_TOKENS, TRUE_TOKENS

_TRUE = set(TRUE_TOKENS)
_FALSE = set(FALSE_TOKENS)
_MISSING = set(MISSING_TOKENS)
_F64 = np.dtype(np.float64)
_PACKERS: dict[int, struct.Struct] = {}  # matrix_from_flat's packer by number of values


@dataclass
class ModelBundle:
    model_id: str
    algorithm: str
    task: str
    params: dict
    features: list[dict]            # [{"name", "type", "categories"?}] in model order
    target: str | None
    classes: list | None
    preprocessor: Any
    estimator: Any
    core_version: str = ""
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        self._prepare()

    def __getstate__(self):
        state = self.__dict__.copy()
        for k in ("_index", "_names", "_fast", "_plain_labels", "memo"):
            state.pop(k, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._prepare()

    def _prepare(self) -> None:
        self._index = {f["name"]: i for i, f in enumerate(self.features)}
        self._names = tuple(f["name"] for f in self.features)
        self._fast = bool(getattr(self.preprocessor, "all_numeric", False))
        self.memo: dict = {}  # facts the serving layers derive once per loaded bundle (never pickled)
        classes = getattr(self.estimator, "classes_", None)
        # predicted labels are drawn from classes_: when none of them is a NumPy scalar, tolist() is JSON-ready
        self._plain_labels = classes is not None and not any(isinstance(v, np.generic)
                                                             for v in np.asarray(classes).tolist())

    def matrix_from_payload(self, data: list, field: str, *, json_numbers: bool = False) -> np.ndarray:
        """The estimator's input matrix for predict ``instances`` or ``rows``.

        All-numeric models take a fast path (one ``np.array`` call, one vector transform); anything the
        fast path does not accept cleanly goes through the per-feature path, whose errors name the feature.
        ``json_numbers=True``: ``data`` was decoded by orjson, whose numbers are always finite (JSON has no NaN
        or infinity and orjson rejects literals that overflow a double), so a matrix of plain numbers needs
        neither an infinity scan nor imputation. (The estimator still checks what it is given: standardising
        an extreme value can overflow.)
        """
        if self._fast:
            A = None
            try:
                if field == "rows":
                    A = np.array(data)
                else:
                    index, names = self._index, self._names
                    if all(type(inst) is dict and inst.keys() <= index.keys() for inst in data):
                        A = np.array([[inst.get(n) for n in names] for inst in data])
            except (TypeError, ValueError):
                A = None
            if A is not None and A.ndim == 2 and A.shape[1] == len(self._names):
                if json_numbers and A.dtype.kind in "fiu":  # plain JSON numbers: matrix_from_numbers, inline
                    return self.preprocessor.transform_matrix(A, finite=True, copy=False)
                try:  # None (missing), booleans, numeric strings: the float conversion decides
                    A = np.array(A, dtype=np.float64) if A.dtype.kind != "O" else np.array(A.tolist(), dtype=np.float64)
                except (TypeError, ValueError):
                    A = None
                if A is not None and not np.isinf(A).any():
                    return self.preprocessor.transform_matrix(A, copy=False)
        cols = self.columns_from_rows(data) if field == "rows" else self.columns_from_instances(data)
        return self.preprocessor.transform(cols)

    def matrix_from_flat(self, values: list, n: int) -> np.ndarray | None:
        """The input matrix of an all-numeric model from ``n`` rows of plain JSON numbers given flat in row-major
        order (orjson's: finite), or None when they are not exactly ``n * k`` numbers (the caller takes its general
        path). Packed into a buffer in one call: about half the cost of ``np.array`` on a list."""
        if not self._fast:
            return None
        count = n * len(self._names)
        packer = _PACKERS.get(count)
        if packer is None:
            if len(_PACKERS) >= 64:
                _PACKERS.clear()
            packer = _PACKERS[count] = struct.Struct(f"{count}d")  # native doubles, as float64 arrays hold them
        try:
            buf = bytearray(packer.pack(*values))  # numbers only: ints and bools convert as np.array converts them
        except (struct.error, OverflowError, TypeError):
            return None
        return self.preprocessor.transform_matrix(np.ndarray((n, count // n), _F64, buf), finite=True, copy=False)

    def matrix_from_numbers(self, A: np.ndarray) -> np.ndarray:
        """The input matrix of an all-numeric model from a fresh array of plain JSON numbers (finite, nothing
        missing), transformed in place (integers are converted to float64 by ``transform_matrix``, which copies
        only then)."""
        return self.preprocessor.transform_matrix(A, finite=True, copy=False)

    @property
    def feature_names(self) -> tuple[str, ...]:
        """The input features' names in model order."""
        return self._names

    @property
    def feature_index(self) -> dict[str, int]:
        """Feature name -> its position in model order."""
        return self._index

    @property
    def numeric_only(self) -> bool:
        """Every input feature is numeric: payloads may take the one-matrix fast path."""
        return self._fast

    # -- request payload -> columns --------------------------------------------------------------
    def columns_from_instances(self, instances: list, loc_root: str = "instances") -> dict[str, np.ndarray]:
        n = len(instances)
        cols: dict[str, list] = {f["name"]: [None] * n for f in self.features}
        index = self._index
        for i, inst in enumerate(instances):
            if not isinstance(inst, dict):
                raise invalid(["body", loc_root, i], "each instance must be an object of feature: value")
            for key, value in inst.items():
                if key not in index:
                    raise invalid(["body", loc_root, i, key],
                                  f"unknown feature {key!r}; the model's features are: {', '.join(self.feature_names)}")
                cols[key][i] = value
        return {f["name"]: self.convert_feature(f, cols[f["name"]], loc_root) for f in self.features}

    def columns_from_rows(self, rows: list, loc_root: str = "rows") -> dict[str, np.ndarray]:
        width = len(self.features)
        for i, r in enumerate(rows):
            if not isinstance(r, list):
                raise invalid(["body", loc_root, i], "each row must be a list of values in the model's feature order")
            if len(r) != width:
                raise invalid(["body", loc_root, i],
                              f"row {i} has {len(r)} values, but the model has {width} features "
                              f"({', '.join(self.feature_names)})")
        return {f["name"]: self.convert_feature(f, [r[j] for r in rows], loc_root) for j, f in enumerate(self.features)}

    def columns_from_table(self, table_columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [f["name"] for f in self.features if f["name"] not in table_columns]
        if missing:
            raise invalid(["body", "data"], f"the data lacks the model's feature column(s): {', '.join(missing)}")
        return {f["name"]: table_columns[f["name"]] for f in self.features}

    @staticmethod
    def convert_feature(feature: dict, values: list, loc_root: str) -> np.ndarray:
        """One feature's values as the preprocessor's input; a 422 at ``["body", loc_root, row, feature]``."""
        name, typ = feature["name"], feature["type"]
        if typ == "datetime":
            out = np.full(len(values), np.datetime64("NaT", "us"), dtype="datetime64[us]")
            for i, v in enumerate(values):
                if v is None or (isinstance(v, str) and v.strip() in _MISSING):
                    continue
                if not isinstance(v, str):
                    raise invalid(["body", loc_root, i, name], f"feature {name!r} is a datetime; send ISO 8601 text "
                                  f"such as 2024-05-01 or 2024-05-01T13:45:00Z, got {v!r}")
                try:
                    out[i] = to_datetime64([v])[0]
                except ValueError as exc:
                    raise invalid(["body", loc_root, i, name], f"feature {name!r}: {exc}") from None
            return out
        if typ == "categorical":
            out = np.empty(len(values), dtype=object)
            for i, v in enumerate(values):
                if v is None or (isinstance(v, float) and math.isnan(v)):
                    out[i] = None
                elif isinstance(v, bool):
                    out[i] = "true" if v else "false"
                elif isinstance(v, float) and v.is_integer():
                    out[i] = str(int(v))
                elif isinstance(v, (str, int, float)):
                    out[i] = None if v in _MISSING and isinstance(v, str) and not v.strip() else str(v)
                else:
                    raise invalid(["body", loc_root, i, name], f"feature {name!r} needs a category (string), got {v!r}")
            return out
        out = np.empty(len(values), dtype=np.float64)
        for i, v in enumerate(values):
            if v is None:
                out[i] = np.nan
            elif isinstance(v, bool):
                out[i] = 1.0 if v else 0.0
            elif isinstance(v, (int, float)):
                fv = float(v)
                if not math.isfinite(fv):
                    raise invalid(["body", loc_root, i, name],
                                  f"feature {name!r} must be a finite number, got {v!r}; send null for a missing value")
                out[i] = fv
            elif isinstance(v, str):
                s = v.strip()
                if s in _MISSING:
                    out[i] = np.nan
                elif typ == "boolean" and (s in _TRUE or s in _FALSE):
                    out[i] = 1.0 if s in _TRUE else 0.0
                else:
                    try:
                        fv = float(s)
                    except ValueError:
                        raise invalid(["body", loc_root, i, name],
                                      f"feature {name!r} is {typ} but got the text {v!r}") from None
                    if not math.isfinite(fv):
                        raise invalid(["body", loc_root, i, name],
                                      f"feature {name!r} must be a finite number, got {v!r}")
                    out[i] = fv
            else:
                raise invalid(["body", loc_root, i, name], f"feature {name!r} is {typ} but got {v!r}")
        return out

    # -- prediction -----------------------------------------------------------------------------
    def matrix(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        return self.preprocessor.transform(columns)

    def predict(self, columns: dict[str, np.ndarray], *, return_proba=False, return_std=False) -> dict:
        return self.predict_matrix(self.matrix(columns), return_proba=return_proba, return_std=return_std)

    def _label_values(self, labels) -> list:
        """Predicted labels as JSON-ready values: one ``tolist()`` when ``classes_`` holds no NumPy scalar
        (decided once per bundle), else ``_labels``."""
        if self._plain_labels and type(labels) is np.ndarray:
            return labels.tolist()
        return _labels(labels)

    def predict_matrix(self, X: np.ndarray, *, return_proba=False, return_std=False) -> dict:
        est = self.estimator
        out: dict[str, Any] = {}
        if self.task == "classification":
            if return_proba and hasattr(est, "predict_proba"):
                proba = est.predict_proba(X)
                out["predictions"] = self._label_values(est.classes_[np.argmax(proba, axis=1)])
                out["probabilities"] = proba.tolist()
                out["classes"] = self._label_values(est.classes_)
            else:
                labels = est.predict(X)  # _label_values, inline: the single-row path's last step
                out["predictions"] = (labels.tolist() if self._plain_labels and type(labels) is np.ndarray
                                      else _labels(labels))
        elif self.task == "regression":
            if return_std and getattr(est, "has_predict_std", False):
                mean, std = est.predict(X, return_std=True)
                out["predictions"] = np.asarray(mean, dtype=float).tolist()
                out["std"] = np.asarray(std, dtype=float).tolist()
            else:
                out["predictions"] = np.asarray(est.predict(X), dtype=float).tolist()
        elif self.task == "clustering":
            out["predictions"] = np.asarray(est.predict(X)).astype(int).tolist()
            if return_proba and hasattr(est, "predict_proba"):
                out["probabilities"] = est.predict_proba(X).tolist()
            if hasattr(est, "score_samples"):
                out["log_density"] = np.asarray(est.score_samples(X), dtype=float).tolist()
        elif self.task == "decomposition":
            out["components"] = np.asarray(est.transform(X), dtype=float).tolist()
        elif self.task == "density":
            out["log_density"] = np.asarray(est.score_samples(X), dtype=float).tolist()
        else:
            out["predictions"] = np.asarray(est.predict(X)).tolist()
        return out


def _labels(arr) -> list:
    """Original label values as JSON-ready Python values (an object array may hold NumPy scalars)."""
    arr = np.asarray(arr)
    out = arr.tolist()
    return [v.item() if isinstance(v, np.generic) else v for v in out] if arr.dtype.kind == "O" else out
