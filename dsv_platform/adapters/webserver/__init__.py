"""A Dagster webserver's GraphQL API (the production instance): launch runs and follow them (``dsv build``/``dsv ingest --submit``)."""
