"""Evaluating a stored model on a stored dataset or an inline table: the request's rules (target present,
labels typed as the model's classes, a positive label of a binary classifier), then the metrics of
``services/evaluation.py``. The route (api/models.py) only loads the model and answers."""

from __future__ import annotations

import numpy as np

from ..errors import invalid
from . import datasets as ds
from . import rl
from .evaluation import evaluate_matrix
from .tables import parse_json_table
from .training import target_values
from .widths import check_width


def evaluate_request(r, bundle, body) -> dict:
    """The answer of ``POST /v1/models/{id}/evaluate`` (``body``: an ``EvaluateRequest``) for a loaded model, as
    ``r`` (the request's project view of the runtime) sees the stored datasets."""
    if (body.dataset_id is None) == (body.data is None):
        raise invalid(["body", "dataset_id"], "give exactly one of dataset_id or data")
    if body.data is not None:
        check_width(len(body.data.columns), r.settings.max_columns, ["body", "data", "columns"])
        cols = parse_json_table(body.data.columns, body.data.rows, body.data.types, loc=("body", "data"))
    else:
        ds.get_record(r.meta, body.dataset_id)
        cols = ds.read_columns(r.meta, r.art, body.dataset_id, mmap=False)
    by_name = {c.name: c for c in cols}
    if bundle.task == rl.TASK:
        if body.target is not None:
            raise invalid(["body", "target"], "a reinforcement model takes no target")
        n = len(cols[0].values) if cols else 0
        out = rl.evaluate(bundle.estimator, rl.raw_columns(cols), n)
        return out
    target = body.target or bundle.target
    y = None
    if bundle.task in ("classification", "regression"):
        if target not in by_name:
            raise invalid(["body", "data" if body.data else "dataset_id"],
                          f"the data lacks the target column {target!r} needed to evaluate a supervised model")
        y, present = target_values(by_name[target], bundle.task)
    elif target is not None:
        if target not in by_name:
            raise invalid(["body", "target"], f"label column {target!r} is not in the data")
        col = by_name[target]
        y, present = target_values(col, "classification")
    else:
        present = None
    table = {n: c.as_model_input() for n, c in by_name.items()}
    feats = bundle.columns_from_table(table)
    if present is not None and not present.all():
        feats = {k: v[present] for k, v in feats.items()}
        y = y[present]
    if y is not None and bundle.task == "classification":
        known = set(bundle.classes)
        y = _align_label_types(y, bundle.classes)
        unknown = sorted({str(v) for v in y.tolist()} - {str(v) for v in known})
        if unknown and len(unknown) == len({str(v) for v in y.tolist()}):
            raise invalid(["body", "target"], f"none of the target values are classes the model knows "
                          f"({', '.join(map(str, bundle.classes))})")
    positive = body.positive_label
    if positive is not None:
        if bundle.task != "classification" or len(bundle.classes or []) != 2:
            raise invalid(["body", "positive_label"], "positive_label applies to binary classifiers")
        match = [c for c in bundle.classes if c == positive or str(c) == str(positive)
                 or (isinstance(c, bool) and str(c).lower() == str(positive).lower())]
        if not match:
            raise invalid(["body", "positive_label"], f"{positive!r} is not a class of the model (classes: "
                          f"{', '.join(map(str, bundle.classes))})")
        positive = match[0]
    X = bundle.matrix(feats)
    return evaluate_matrix(bundle, X, y, positive_label=positive)


def _align_label_types(y, classes):
    """Labels read from a table come back typed by that table; match the model's class types."""
    if classes and all(isinstance(c, str) for c in classes):
        return np.asarray([str(v) for v in y.tolist()], dtype=object)
    return y


