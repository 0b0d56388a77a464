"""discriminant: linear, quadratic and regularised discriminant analysis."""

from . import (  # noqa: F401
    linear_discriminant_analysis,
    quadratic_discriminant_analysis,
    regularized_discriminant_analysis,
)
