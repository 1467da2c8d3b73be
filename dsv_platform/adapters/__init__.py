"""I/O behind small interfaces: object stores, registry, Iceberg, key store."""
