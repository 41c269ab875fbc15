"""dpone runtime."""
