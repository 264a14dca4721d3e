"""Profile commands (filled in below)."""
