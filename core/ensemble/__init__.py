"""ensemble."""
