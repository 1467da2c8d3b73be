"""Reproduction: artifacts, model runs, code pins, restored environments, rehearsals, rebuilds from raw, the promotion gate and the audit procedure."""
