"""The SQL registry (SQLite embedded default, PostgreSQL in production): import the module you need; this package exports nothing."""
