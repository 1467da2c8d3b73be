"""Progress of long work: named stages with counts, reported to the CLI and the Dagster run log (stages.py)."""
