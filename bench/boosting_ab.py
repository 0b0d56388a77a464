"""Interleaved A/B of gradient boosting fits: several code trees and worker counts, one subprocess each.

    python bench/boosting_ab.py ROUNDS SPEC [SPEC ...]

SPEC is ``<path to a checkout or export>:<workers>`` (ours; workers sets
the estimator's ``n_jobs``) or ``sklearn:<threads>`` (0 = scikit-learn's
default threads, else threadpoolctl's limit).  Each entry fits make_classification(50000, 20)
with max_iter=100, early_stopping=False and prints the best of 3 fits: wall (CPU of the process and its reaped children).
Entries run one after the other in each round, so all see similar machine load.
"""

import os
import subprocess
import sys

_TIMED = r'''
def cpu():  # this process and its reaped children (our worker process)
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system
X, y = make_classification(50000, 20, n_informative=10, random_state=0)
kw = dict(max_iter=100, early_stopping=False, random_state=0)
with limits:
    Model(max_iter=3, early_stopping=False).fit(X, y)  # warm-up
    best = (1e9, 1e9)
    for _ in range(3):
        t, c = time.perf_counter(), cpu()
        Model(**kw).fit(X, y)
        best = min(best, (time.perf_counter() - t, cpu() - c))
print('%.3f %.3f' % best)
'''
skcode = r'''
import contextlib, os, sys, time
from sklearn.datasets import make_classification
from sklearn.ensemble import HistGradientBoostingClassifier as Model
from threadpoolctl import threadpool_limits
limits = threadpool_limits(int(sys.argv[2]) or None)
''' + _TIMED
code = r'''
import contextlib, os, sys, time
sys.path.insert(0, sys.argv[1])
from sklearn.datasets import make_classification
import functools
from core.ensemble.gradient_boosting_classifier import GradientBoostingClassifier as Model
if "n_jobs" in Model.params:  # the worker count is the n_jobs parameter
    Model = functools.partial(Model, n_jobs=int(sys.argv[2]))
else:  # engines before it: a module attribute
    import core.ensemble._hist_gbm_tree as T
    T.N_WORKERS = int(sys.argv[2])
limits = contextlib.nullcontext()
''' + _TIMED


def main():
    rounds = int(sys.argv[1])
    specs = sys.argv[2:]
    res = {d: [] for d in specs}
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    for r in range(rounds):
        for d in specs:
            path, nt = d.rsplit(":", 1)
            src = skcode if path == "sklearn" else code
            out = subprocess.run([sys.executable, "-c", src, path, nt], capture_output=True, text=True,
                                 env=env, check=True).stdout.split()
            res[d].append(tuple(map(float, out)))
        cells = " ".join(f"{d}={w:.3f}({c:.3f})" for d in specs for w, c in [res[d][-1]])
        print(r, f"load {os.getloadavg()[0]:.2f}", cells, flush=True)
    for d in specs:
        w = sorted(x[0] for x in res[d])
        c = sorted(x[1] for x in res[d])
        print(d, f"wall min {w[0]:.3f} median {w[len(w) // 2]:.3f} | cpu min {c[0]:.3f} median {c[len(c) // 2]:.3f}")


if __name__ == "__main__":
    main()
