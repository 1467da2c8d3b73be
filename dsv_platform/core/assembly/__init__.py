"""Point-in-time assembly of a dataset's examples and its declarative row transforms (pure pyarrow)."""
