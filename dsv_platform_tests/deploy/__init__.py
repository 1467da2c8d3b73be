"""The production Dagster deployment (deploy/dagster.yaml) started as real processes."""
