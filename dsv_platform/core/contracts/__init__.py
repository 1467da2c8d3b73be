"""Data contracts: the contract file, validation, schema diff, semantic rules, drift and integrity signals."""
