"""dpone connectors."""
