"""The configuration folder: sources, dataset definitions, transforms, label registrations, platform options, time zones."""
