"""Where a perceptron fit's time goes: mistakes per fit, the NumPy calls each costs, and what is left.

Usage: python bench/perceptron_mistakes.py [--sets synthetic_1500,breast_cancer,digits] [--rounds 5]

For each small set (``bench/datasets.small_sets``, five folds) and both benchmark configurations (the default, and
ten epochs without early stopping), counts per fit the mistakes the block scan handles (the updates it applies)
and the blocks it sets up, times Orchard's fit and scikit-learn's (CPU seconds, medians of interleaved rounds), and
prices the NumPy calls a mistake of a one-problem scan makes at this set's shapes (a block's later rows: half a
block on average): find the next candidate (a comparison and an ``argmax`` over the later running margins), the
update's products with the later rows (a matrix-vector product), adding them to the running margins, plus the
views and scalar reads around them.  ``mistakes x call cost`` is the part of the fit no NumPy restructuring of
the sequential rule removes (``bench/perceptron_floor.py`` prices the same floor on ten fixed epochs).
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench import datasets as D  # noqa: E402


def _cost(fn, repeat: int = 20000) -> float:
    """CPU seconds per call of ``fn`` (the median of five timings)."""
    times = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(repeat):
            fn()
        times.append((time.process_time() - start) / repeat)
    return statistics.median(times)


def call_costs(rest: int, d1: int) -> dict[str, float]:
    """Seconds per call of each NumPy step of a mistake, with ``rest`` later rows of ``d1`` columns."""
    rng = np.random.default_rng(0)
    Xs, U = rng.normal(size=(2 * rest, d1)), rng.normal(size=(2 * rest, d1))
    v = rng.normal(size=2 * rest) + 5.0
    pos, h = rest, np.zeros(rest)  # adding zeros: the margins stay put over the repeats
    below = v[pos:] <= 0.0

    def add():
        v[pos:] += h

    return {
        "compare": _cost(lambda: v[pos:] <= 0.0),
        "argmax": _cost(below.argmax),
        "products": _cost(lambda: Xs[pos:] @ U[3]),
        "add": _cost(add),
        "views and scalar reads": 3 * _cost(lambda: Xs[pos:]) + 5 * _cost(lambda: v.item(3)),
    }


def count(name, X, y, params, folds):
    """(mistakes per fit, blocks per fit, epochs per fit) of Orchard's fits."""
    from core import registry
    from core.linear import perceptron as mod

    tally = {"mistakes": 0, "blocks": 0}
    flush, flush_block, epoch = mod._Scan._flush, mod._Scan._flush_block, mod._Scan.epoch

    def counted_flush(self, wa, pending, *a):
        tally["mistakes"] += len(pending)
        return flush(self, wa, pending, *a)

    def counted_flush_block(self, WA, block_pending, *a):
        if len(block_pending) > 1:
            tally["mistakes"] += sum(len(p) for _, _, p in block_pending)
        return flush_block(self, WA, block_pending, *a)

    def counted_epoch(self, WA, rows, *a):
        tally["blocks"] += -(-len(rows) // mod._BLOCK)
        return epoch(self, WA, rows, *a)

    mod._Scan._flush, mod._Scan._flush_block, mod._Scan.epoch = counted_flush, counted_flush_block, counted_epoch
    try:
        epochs = [registry.get("perceptron")(random_state=0, **params).fit(X[tr], y[tr]).n_iter_ for tr in folds]
    finally:
        mod._Scan._flush, mod._Scan._flush_block, mod._Scan.epoch = flush, flush_block, epoch
    k = len(folds)
    return tally["mistakes"] / k, tally["blocks"] / k, statistics.mean(epochs)


def fit_times(X, y, params, folds, rounds):
    """(Orchard, scikit-learn) CPU seconds per fit, medians over interleaved rounds of five-fold fits."""
    from sklearn.linear_model import Perceptron

    from core import registry

    sides = {"ours": lambda: registry.get("perceptron")(random_state=0, **params),
             "theirs": lambda: Perceptron(random_state=0, **params)}
    t = {"ours": [], "theirs": []}
    for r in range(rounds):
        for side in (("ours", "theirs") if r % 2 == 0 else ("theirs", "ours")):
            start = time.process_time()
            for tr in folds:
                sides[side]().fit(X[tr], y[tr])
            t[side].append((time.process_time() - start) / len(folds))
    return statistics.median(t["ours"]), statistics.median(t["theirs"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="synthetic_1500,breast_cancer,digits")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    from sklearn.model_selection import KFold

    from core.linear import perceptron as mod

    warnings.filterwarnings("ignore")
    sets = D.small_sets()
    print("| set | fit | epochs | mistakes per fit | blocks per fit | NumPy us per mistake (compare, argmax, products, "
          "add, views+reads) | mistakes x calls ms | Orchard ms per fit | scikit-learn ms | ratio | calls floor / "
          "scikit-learn |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.sets.split(","):
        X, y, _ = sets[name]
        folds = [tr for tr, _ in KFold(5, shuffle=True, random_state=0).split(X)]
        rest = max(1, min(mod._BLOCK, len(folds[0])) // 2)
        costs = call_costs(rest, X.shape[1] + 1)
        per_mistake = sum(costs.values())
        for label, params in (("default", {}), ("10 epochs", {"max_iter": 10, "tol": None})):
            mistakes, blocks, epochs = count(name, X, y, params, folds)
            ours, theirs = fit_times(X, y, params, folds, args.rounds)
            floor = mistakes * per_mistake
            print(f"| {name} | {label} | {epochs:.1f} | {mistakes:,.0f} | {blocks:.0f} | {per_mistake * 1e6:.2f} ("
                  + ", ".join(f"{c * 1e6:.2f}" for c in costs.values()) + f") | {floor * 1e3:.2f} | {ours * 1e3:.2f} | "
                  f"{theirs * 1e3:.2f} | {ours / theirs:.2f} | {floor / theirs:.2f} |", flush=True)


if __name__ == "__main__":
    main()
