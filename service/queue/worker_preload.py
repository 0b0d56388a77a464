"""Imported once by the embedded pool's forkserver (``multiprocessing.set_forkserver_preload``).

The forkserver is a fresh process: it limits BLAS/OpenMP to one thread per process *before* NumPy/SciPy load
(OpenBLAS reads the variables when it initialises), then imports the training stack, so every worker, and
every worker restarted after a crash, is a cheap fork of a warm, single-threaded process. Nothing here may
start a thread (forking a process that has threads is unsafe): logging is configured in each worker.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread per worker: N workers do not oversubscribe the cores

# scipy.stats: the t-tests of compare/automl (a cold import costs seconds under load, past an AutoML budget)
import scipy.stats  # noqa: E402,F401

import core  # noqa: E402,F401 - every algorithm family (fills the registry)
from core import registry  # noqa: E402,F401

from .. import observability  # noqa: E402,F401 - imported only: no handler, no thread
from ..services import selection_jobs, training  # noqa: E402,F401 - training and model-selection jobs
from ..settings import Settings  # noqa: E402,F401
from ..storage import stores  # noqa: E402,F401
from . import embedded  # noqa: E402,F401
