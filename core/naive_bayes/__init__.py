"""naive_bayes: Gaussian, multinomial, Bernoulli and categorical naive Bayes."""

from . import bernoulli_nb, categorical_nb, gaussian_nb, multinomial_nb  # noqa: F401
