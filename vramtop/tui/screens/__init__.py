"""tui/screens."""
