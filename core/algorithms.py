"""The one explicit list of algorithm families: importing it fills the registry.

No directory scanning: add a family here when it exists.  Each family package
imports its own estimator modules in its ``__init__``.
"""

from . import (
    cluster,  # noqa: F401
    decomposition,  # noqa: F401
    density,  # noqa: F401
    discriminant,  # noqa: F401
    ensemble,  # noqa: F401
    graphical,  # noqa: F401
    kernel_methods,  # noqa: F401
    linear,  # noqa: F401
    mixture,  # noqa: F401
    naive_bayes,  # noqa: F401
    neighbors,  # noqa: F401
    neural,  # noqa: F401
    rl,  # noqa: F401
    svm,  # noqa: F401
    tree,  # noqa: F401
)
