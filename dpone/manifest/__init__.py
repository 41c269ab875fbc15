"""dpone manifest."""
