"""How far a NumPy perceptron can get from scikit-learn's compiled loop: the sequential steps a fit needs.

Usage: python bench/perceptron_floor.py [--sets synthetic_1500,digits,breast_cancer] [--folds 5]

Rosenblatt's rule decides each sample with the weights every earlier mistake left, so a fit is a chain of
data-dependent steps. Vectorised code can only batch the work between two steps; each step costs at least one
NumPy call (~1 us of fixed cost). This script replays the rule sample by sample (binary problems: class 0 against
the rest for multi-class sets; the epoch count and order of scikit-learn's default fit are not reproduced: ten
shuffled epochs) and counts per fit:

* mistakes: steps of the sample-by-sample rule; Orchard's block scan spends about four NumPy calls on each (find
  the next row at or below zero, update the later rows' running margins), so its floor is the mistakes times
  the cost of those calls;
* speculation rounds: steps of the best batched scheme we know: a block's mistakes are guessed from the margins at
  its start, all its margins recomputed from the guessed updates with one product against the block's Gram matrix,
  and the guess fixed up to its first wrong decision (everything before it is then proven right); a round is one
  such product, so a fit needs at least that many NumPy calls.

It prints them beside scikit-learn's time per fit (``Perceptron(max_iter=10, tol=None)``, the same ten epochs)
and the floor of that scheme on this machine: the rounds times the measured cost of one round's NumPy calls
(the product with the Gram matrix, the comparison, the search for the first wrong decision), plus each block's
set-up (its Gram matrix and margins). Exactness (a margin within rounding of zero recomputed from the weights,
as Orchard's scan does) and Python's own work come on top: the floor is a lower bound.
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

EPOCHS = 10


def replay(X: np.ndarray, t: np.ndarray, block: int, seed: int = 0) -> tuple[int, int]:
    """(mistakes, speculation rounds) of ``EPOCHS`` shuffled epochs of the perceptron on X with targets t (+-1)."""
    n, d = X.shape
    Xa = np.hstack([X, np.ones((n, 1))])
    w = np.zeros(d + 1)
    rng = np.random.default_rng(seed)
    mistakes = rounds = 0
    for _ in range(EPOCHS):
        order = rng.permutation(n)
        for s in range(0, n, block):
            idx = order[s:s + block]
            Xb, tb = Xa[idx], t[idx]
            truth, ww = np.zeros(len(idx), bool), w.copy()
            for k in range(len(idx)):  # the rule itself
                if tb[k] * (Xb[k] @ ww) <= 0:
                    truth[k] = True
                    ww += tb[k] * Xb[k]
            L = np.tril((Xb @ Xb.T) * tb[:, None] * tb[None, :], -1)  # effect of an update at i on j's margin
            m0 = tb * (Xb @ w)
            guess, settled = m0 <= 0, 0
            while True:
                rounds += 1
                new = (m0 + L @ guess) <= 0
                new[:settled] = guess[:settled]
                wrong = np.flatnonzero(new != guess)
                if not len(wrong):
                    break
                settled, guess = wrong[0] + 1, new
            assert (guess == truth).all()
            mistakes += int(truth.sum())
            w = ww
    return mistakes, rounds


def _cost(fn, repeat: int = 20000) -> float:
    """CPU seconds per call of ``fn`` (the median of five timings)."""
    times = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(repeat):
            fn()
        times.append((time.process_time() - start) / repeat)
    return statistics.median(times)


def scan_cost(block: int) -> float:
    """Seconds per mistake of the scan (Orchard's scheme): find the next row at or below zero among the block's
    running margins, then add the update's effect (a row of the block's Gram matrix) to the margins after it."""
    rng = np.random.default_rng(0)
    m, G = rng.normal(size=block) + 3, rng.normal(size=(block, block))
    h = block // 2

    def step():
        (m[h:] <= 0).argmax()
        m[h:] += G[h, h:]

    return _cost(step)


def round_costs(block: int, d: int) -> tuple[float, float]:
    """(seconds per speculation round, seconds per block set-up) of the scheme's NumPy calls at this size."""
    rng = np.random.default_rng(0)
    Xb, w, tb = rng.normal(size=(block, d)), rng.normal(size=d), np.sign(rng.normal(size=block))
    L = np.tril(rng.normal(size=(block, block)), -1)
    m0, guess = rng.normal(size=block), (rng.normal(size=block) > 0).astype(np.float64)

    def one_round():  # the guess kept as floats (0/1): no conversion in the product
        new = (m0 + L @ guess) <= 0
        (new != guess).argmax()

    def set_up():
        np.tril((Xb @ Xb.T) * tb[:, None] * tb[None, :], -1)
        tb * (Xb @ w)

    return _cost(one_round), _cost(set_up, 5000)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="synthetic_1500,digits,breast_cancer")
    ap.add_argument("--folds", type=int, default=5)
    args = ap.parse_args()
    from sklearn.linear_model import Perceptron
    from sklearn.model_selection import KFold

    warnings.filterwarnings("ignore")
    sets = D.small_sets()
    print("| set | fit rows | mistakes per fit | rounds per fit (block 64) | rounds (block 256) | scikit-learn ms "
          "per fit | scan floor ms | speculation floor ms, block 64 | block 256 | best floor / scikit-learn |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.sets.split(","):
        X, y, _ = sets[name]
        t = np.where(y == y.min(), 1.0, -1.0)  # class 0 against the rest
        folds = list(KFold(args.folds, shuffle=True, random_state=0).split(X))
        counts = [(replay(X[tr], t[tr], 64), replay(X[tr], t[tr], 256)) for tr, _ in folds]
        mistakes = statistics.mean(c[0][0] for c in counts)
        r64 = statistics.mean(c[0][1] for c in counts)
        r256 = statistics.mean(c[1][1] for c in counts)
        times = []
        for _ in range(5):
            for tr, _ in folds:
                start = time.process_time()
                Perceptron(max_iter=EPOCHS, tol=None, random_state=0).fit(X[tr], t[tr])
                times.append(time.process_time() - start)
        sk = statistics.median(times) * 1000
        n, d = len(folds[0][0]), X.shape[1] + 1
        floors = [mistakes * scan_cost(256) * 1000]
        for block, rounds in ((64, r64), (256, r256)):
            per_round, per_block = round_costs(block, d)
            floors.append((rounds * per_round + EPOCHS * -(-n // block) * per_block) * 1000)
        print(f"| {name} | {n} | {mistakes:,.0f} | {r64:,.0f} | {r256:,.0f} | {sk:.2f} | "
              + " | ".join(f"{f:.2f}" for f in floors) + f" | {min(floors) / sk:.2f} |", flush=True)


if __name__ == "__main__":
    main()
