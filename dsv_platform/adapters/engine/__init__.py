"""The out-of-core relational engine (DuckDB) the builds run their joins in."""
