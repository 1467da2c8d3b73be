"""Pure domain logic: no Dagster, pyiceberg, boto3 or SQLAlchemy imports here."""
