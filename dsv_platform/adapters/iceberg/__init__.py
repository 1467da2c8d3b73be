"""Canonical tables on Apache Iceberg (pyiceberg), their metadata maintenance, and DuckDB reads of them."""
