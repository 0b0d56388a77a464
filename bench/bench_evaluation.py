"""Speed of the evaluation metrics and the table preprocessor, against scikit-learn in the same run.

Usage: python bench/bench_evaluation.py [--quick]
Prints a table of median times and the ratio ours / scikit-learn (lower is better).
"""

from __future__ import annotations

import sys
import timeit
import warnings

import numpy as np

sys.path.insert(0, ".")

from core import metrics as M  # noqa: E402
from core.preprocessing import TablePreprocessor  # noqa: E402
from service.services.evaluation import classification_metrics  # noqa: E402


def _t(fn, number):
    return min(timeit.repeat(fn, number=number, repeat=5)) / number


def main(quick: bool = False):
    import sklearn.metrics as skm
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    n = 20_000 if quick else 100_000
    labels = np.array(["a", "b", "c", "d"])
    yt = rng.choice(labels, n)
    yp = np.where(rng.random(n) < 0.7, yt, rng.choice(labels, n))
    P = rng.dirichlet(np.ones(4), n)
    yb = rng.integers(0, 2, n)
    s = rng.random(n)
    rows = []
    cases = [
        ("accuracy", lambda: M.accuracy_score(yt, yp), lambda: skm.accuracy_score(yt, yp)),
        (
            "f1 macro",
            lambda: M.f1_score(yt, yp, average="macro"),
            lambda: skm.f1_score(yt, yp, average="macro"),
        ),
        ("confusion_matrix", lambda: M.confusion_matrix(yt, yp), lambda: skm.confusion_matrix(yt, yp)),
        ("log_loss", lambda: M.log_loss(yt, P), lambda: skm.log_loss(yt, P)),
        ("roc_auc binary", lambda: M.roc_auc_score(yb, s), lambda: skm.roc_auc_score(yb, s)),
        (
            "roc_auc ovr 4 classes",
            lambda: M.roc_auc_score(yt, P),
            lambda: skm.roc_auc_score(yt, P, multi_class="ovr"),
        ),
        (
            "average_precision",
            lambda: M.average_precision_score(yb, s),
            lambda: skm.average_precision_score(yb, s),
        ),
    ]
    for name, ours, ref in cases:
        a, b = _t(ours, 3), _t(ref, 3)
        rows.append((f"{name} (n={n})", a, b))
    a = _t(lambda: classification_metrics(yt, yp, P, labels), 1)
    b = _t(lambda: skm.classification_report(yt, yp, output_dict=True), 1)
    rows.append((f"classification_metrics (ours: +proba metrics, curves) n={n}", a, b))

    # preprocessing: 8 numeric + 3 categorical columns with missing values
    m = 2000
    cols = {f"x{i}": rng.normal(size=m) for i in range(8)}
    for i in range(8):
        cols[f"x{i}"][rng.random(m) < 0.05] = np.nan
    cols.update({f"c{i}": rng.choice(["red", "green", "blue", "cyan"], m).astype(object) for i in range(3)})
    types = {k: ("numeric" if k.startswith("x") else "categorical") for k in cols}
    tp = TablePreprocessor(scale=True).fit(cols, types)
    num = [k for k in types if types[k] == "numeric"]
    table = np.empty((m, len(types)), dtype=object)
    for j, k in enumerate(types):
        table[:, j] = cols[k]
    ct = ColumnTransformer(
        [
            ("num", make_pipeline(SimpleImputer(), StandardScaler()), list(range(8))),
            ("cat", OneHotEncoder(handle_unknown="ignore"), list(range(8, 11))),
        ],
        sparse_threshold=0,
    ).fit(table)
    row = {k: v[:1] for k, v in cols.items()}
    a = _t(lambda: tp.transform(row), 2000)
    b = _t(lambda: ct.transform(table[:1]), 200)
    rows.append(("TablePreprocessor 1 row (8 num + 3 cat)", a, b))
    a = _t(lambda: tp.transform(cols), 20)
    b = _t(lambda: ct.transform(table), 5)
    rows.append((f"TablePreprocessor {m} rows", a, b))
    # same numbers as scikit-learn's pipeline (numeric block first there, one-hot after)
    ours = tp.transform(cols)
    ref = ct.transform(table)
    assert np.allclose(ours[:, : len(num)], ref[:, : len(num)]) and np.array_equal(
        ours[:, len(num) :], ref[:, len(num) :]
    )

    print(f"{'case':62s} {'ours':>10s} {'sklearn':>10s} {'ratio':>7s}")
    for name, a, b in rows:
        print(f"{name:62s} {a * 1e3:9.3f}ms {b * 1e3:9.3f}ms {a / b:7.2f}")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
