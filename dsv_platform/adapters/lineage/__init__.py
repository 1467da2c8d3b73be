"""OpenLineage emission through openlineage-python."""
