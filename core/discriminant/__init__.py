"""discriminant."""
