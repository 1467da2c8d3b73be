"""Trust: who runs a command, what it may do, the audit log, access at resolution and signed manifests."""
