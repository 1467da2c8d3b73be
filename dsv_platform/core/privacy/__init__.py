"""Privacy deletion planning: which descendants of a subject get which outcome (pure)."""
