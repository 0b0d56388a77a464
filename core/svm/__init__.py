"""Support vector machines: C-SVC (SMO / Pegasos) and epsilon-SVR."""

from . import svm_classifier, svm_regressor  # noqa: F401
