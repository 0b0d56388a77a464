"""Benchmark: MLP training time per epoch, ours vs scikit-learn MLPClassifier.

Same architecture, batch size, solver (adam), learning rate and number of epochs; tol=0 so
both run every epoch.  Prints seconds per epoch and the ratio ours/sklearn (target <= 1.5),
the best of ``--repeats`` runs (the machine is shared, so minima are the fairest figure).

    python bench/neural.py [--repeats 3] [--epochs-digits 20] [--epochs-large 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sklearn.datasets import load_digits  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.neural_network import MLPClassifier as SKMLPClassifier  # noqa: E402

from core.neural.mlp_classifier import MLPClassifier  # noqa: E402


def _time(make, X, y, epochs, repeats):
    best = np.inf
    for _ in range(repeats):
        m = make(epochs)
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            m.fit(X, y)
        best = min(best, (time.perf_counter() - t) / m.n_iter_)
        assert m.n_iter_ == epochs
    return best


def run(name, X, y, hidden, batch, epochs, repeats):
    common = dict(solver="adam", batch_size=batch, learning_rate_init=1e-3, tol=0.0, n_iter_no_change=10**6,
                  random_state=0, alpha=1e-4)

    def ours(e):
        return MLPClassifier(hidden_layer_sizes=list(hidden), max_iter=e, **common)

    def ref(e):
        return SKMLPClassifier(hidden_layer_sizes=tuple(hidden), max_iter=e, **common)

    a = _time(ours, X, y, epochs, repeats)
    b = _time(ref, X, y, epochs, repeats)
    print(f"| {name} | {X.shape[0]}x{X.shape[1]} | {hidden} | {batch} | {a * 1e3:.1f} | {b * 1e3:.1f} | "
          f"{a / b:.2f} |", flush=True)
    return a / b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--epochs-digits", type=int, default=20)
    ap.add_argument("--epochs-large", type=int, default=3)
    args = ap.parse_args()
    X, y = load_digits(return_X_y=True)
    X = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
    rng = np.random.default_rng(0)
    Xl = rng.normal(size=(50_000, 50))
    yl = (Xl[:, :5] @ rng.normal(size=5) + 0.5 * np.sin(Xl[:, 5] * 3) > 0).astype(int) + (Xl[:, 6] > 1)
    print("| data | shape | hidden | batch | ours ms/epoch | sklearn ms/epoch | ratio ours/sklearn |")
    print("|---|---|---|---|---|---|---|")
    run("digits", X, y, (100,), 200, args.epochs_digits, args.repeats)
    run("digits", X, y, (64, 32), 64, args.epochs_digits, args.repeats)
    run("synthetic", Xl, yl, (100,), 200, args.epochs_large, args.repeats)
    run("synthetic", Xl, yl, (128, 64), 256, args.epochs_large, args.repeats)


if __name__ == "__main__":
    main()
