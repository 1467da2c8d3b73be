"""Lineage: edges derived from what the pipeline recorded, and OpenLineage run events."""
