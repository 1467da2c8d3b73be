"""Retention: garbage collection against the backends and the integrity scan."""
