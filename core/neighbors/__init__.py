"""neighbors."""
