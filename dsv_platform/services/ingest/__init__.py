"""Ingest: landed batches into canonical tables, and label versions built from canonical tables."""
