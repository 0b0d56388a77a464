"""Figures behind parts of a gradient boosting fit outside the split loop (bench/results/boosting.md).

    python bench/boosting_parts.py [gradients] [chunks] [binning]     (default: all)

- gradients: the binary log-loss's ``grad_hess`` (NumPy's exp) against the same with ``scipy.special.expit``,
  on 25,000 and 50,000 rows written into the fit's interleaved (n, 3) weight matrix; calls interleaved in one
  process, medians of 250 calls each.
- chunks: gradients of 50,000 and 200,000 rows in one ``grad_hess`` call (as the fit does) against calls of
  32,768 rows (measured slower, not used by the fit); medians of 100 calls each, interleaved.
- binning: ``BinMapper.fit_transform_T`` of make_classification(50000, 20) on one and two threads; medians of
  7 calls each, interleaved.
"""

from __future__ import annotations

import os
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
from scipy.special import expit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.ensemble._binning import BinMapper  # noqa: E402
from core.ensemble._hist_gbm_loss import BinaryLogLoss  # noqa: E402


def _median_us(fns, calls, rounds=5):
    """Median call time (us) of each function, the calls interleaved in ``rounds`` rounds."""
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(calls // rounds):
                t = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t)
    return {name: float(np.median(v)) * 1e6 for name, v in times.items()}


def _problem(n):
    rng = np.random.default_rng(0)
    raw = rng.normal(size=n) * 3
    y = (rng.random(n) > 0.5).astype(float)
    W = np.empty((n, 3))  # the fit's [g, h, 1] rows
    return y, raw, W[:, 0], W[:, 1]


def _expit_grad_hess(y, raw, w, g, h):  # the binary log-loss's gradients with scipy.special.expit
    p = expit(raw)
    np.subtract(p, y, out=g)
    np.multiply(p, 1.0 - p, out=h)


def gradients():
    print("| rows | grad_hess with scipy.special.expit (us) | grad_hess with NumPy's exp (us) | ratio |")
    print("|---|---|---|---|")
    for n in (25_000, 50_000):
        y, raw, g, h = _problem(n)
        args = (y, raw, None, g, h)
        t = _median_us({"expit": partial(_expit_grad_hess, *args), "exp": partial(BinaryLogLoss.grad_hess, *args)},
                       250)
        print(f"| {n:,} | {t['expit']:.0f} | {t['exp']:.0f} | {t['exp'] / t['expit']:.2f} |")


def _by_chunks(chunk, y, raw, g, h):
    for a in range(0, len(y), chunk):
        b = min(len(y), a + chunk)
        BinaryLogLoss.grad_hess(y[a:b], raw[a:b], None, g[a:b], h[a:b])


def chunks():
    chunk = 32_768
    print(f"| rows | one grad_hess call (us) | calls of {chunk:,} rows (us) | ratio |")
    print("|---|---|---|---|")
    for n in (50_000, 200_000):
        y, raw, g, h = _problem(n)
        t = _median_us({"one": partial(BinaryLogLoss.grad_hess, y, raw, None, g, h),
                        "chunks": partial(_by_chunks, chunk, y, raw, g, h)}, 100)
        print(f"| {n:,} | {t['one']:.0f} | {t['chunks']:.0f} | {t['chunks'] / t['one']:.2f} |")


def _bin(X, n_threads):
    BinMapper(255).fit_transform_T(X, np.random.default_rng(0), n_threads=n_threads)


def binning():
    from sklearn.datasets import make_classification

    X, _ = make_classification(50_000, 20, n_informative=10, random_state=0)
    fns = {k: partial(_bin, X, k) for k in (1, 2)}
    t = _median_us(fns, 7, rounds=7)
    print("| binning 50,000 x 20 | one thread (ms) | two threads (ms) | ratio |")
    print("|---|---|---|---|")
    print(f"| fit_transform_T | {t[1] / 1e3:.1f} | {t[2] / 1e3:.1f} | {t[2] / t[1]:.2f} |")


def main():
    modes = sys.argv[1:] or ["gradients", "chunks", "binning"]
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for mode in modes:
        print(f"\n## {mode}")
        {"gradients": gradients, "chunks": chunks, "binning": binning}[mode]()


if __name__ == "__main__":
    main()
