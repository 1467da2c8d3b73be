"""Raw batches as they land: reading CSV, JSON Lines and Parquet bytes into contract rows, validated."""
