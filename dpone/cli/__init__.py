"""dpone cli."""
