"""decomposition."""
