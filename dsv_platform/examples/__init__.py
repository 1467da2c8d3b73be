"""Worked examples: configuration folders (and their Python labels) the platform runs as-is."""
