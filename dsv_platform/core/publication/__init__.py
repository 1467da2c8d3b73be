"""Publication: the realization manifest and its entries, states, references, gates, approval rules and the records the registry returns."""
