"""dpone evidence."""
