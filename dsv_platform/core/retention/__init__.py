"""Garbage collection as reachability: inventory, roots, graph, decisions and the plan (pure)."""
