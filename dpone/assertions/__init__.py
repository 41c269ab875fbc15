"""dpone assertions."""
