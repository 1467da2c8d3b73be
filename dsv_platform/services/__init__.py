"""Use cases: each receives a Platform (bootstrap.py) and composes core logic with the adapters."""
