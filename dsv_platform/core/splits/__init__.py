"""Split policies, their assignment and the invariant checks on split assignments."""
