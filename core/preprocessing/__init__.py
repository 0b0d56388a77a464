"""preprocessing."""
