"""graphical: discrete Bayesian networks (inference API in ``bayesian_network``)."""

from . import bayesian_network_classifier  # noqa: F401
from .bayesian_network import BayesianNetwork  # noqa: F401
