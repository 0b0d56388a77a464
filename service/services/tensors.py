"""Open Inference Protocol (KServe V2) tensors: datatypes, the decoded tensor, the protocol's error, and the
helpers the data plane (``oip``) and the reinforcement-learning inputs and outputs (``rl``) share."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ProblemError

DTYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype(bool), "INT8": np.dtype("<i1"), "INT16": np.dtype("<i2"), "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"), "UINT8": np.dtype("<u1"), "UINT16": np.dtype("<u2"), "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"), "FP16": np.dtype("<f2"), "FP32": np.dtype("<f4"), "FP64": np.dtype("<f8"),
    "BYTES": np.dtype(object),
}


class V2Error(ProblemError):
    """An error answered as ``{"error": "..."}`` (the protocol's error shape)."""

    status, title = 400, "Bad Request"


def bad(msg: str) -> V2Error:
    return V2Error(msg)


@dataclass
class Tensor:
    name: str
    datatype: str
    shape: list[int]
    array: np.ndarray
    plain: bool = False  # a fresh float64 array of JSON numbers: finite, nothing missing, ours to transform


# -- values -------------------------------------------------------------------------------------------
def as_text(arr: np.ndarray) -> list:
    return [v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v for v in arr.tolist()]


def check_rows(n: int, max_rows: int) -> None:
    if n == 0:
        raise bad("the inputs hold no rows")
    if n > max_rows:
        raise bad(f"at most {max_rows} rows per request (ORCHARD_MAX_PREDICT_ROWS), got {n}")


def label_datatype(labels: list) -> str:
    if labels and all(type(v) is bool for v in labels):
        return "BOOL"
    if labels and all(type(v) is int for v in labels):
        return "INT64"
    if labels and all(type(v) in (int, float) for v in labels):
        return "FP64"
    return "BYTES"


def typed(values: list, datatype: str) -> np.ndarray:
    if datatype == "BYTES":
        return np.array([str(v) for v in values], dtype=object)
    return np.asarray(values, dtype=DTYPES[datatype])
