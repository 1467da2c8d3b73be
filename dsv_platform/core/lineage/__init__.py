"""Lineage: the edge vocabulary and graph walks (pure)."""
