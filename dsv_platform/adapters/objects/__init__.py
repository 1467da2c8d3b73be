"""Object storage: the content-addressed store interface, local and S3 backends, encryption and its key store, raw landing, Parquet sources."""
