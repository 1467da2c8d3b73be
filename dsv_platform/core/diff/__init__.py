"""Row-level diff of two tables and the diff report of two realizations."""
