"""Reproduction's vocabulary: the audit comparisons, the seven steps, model runs and artifact manifests (pure)."""
