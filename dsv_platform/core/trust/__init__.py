"""Trust: roles, grants, the audit chain, access policies and DSSE envelopes (pure; no key handling)."""
