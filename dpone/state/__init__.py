"""dpone state."""
