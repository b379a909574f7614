"""`make similarity` (placeholder docstring, rewritten below)."""
