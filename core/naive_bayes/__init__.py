"""naive_bayes."""
