"""radix."""
