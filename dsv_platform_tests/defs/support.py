"""Test support shared by the adapter and defs tests: embedded Settings rooted in a temporary folder."""

from __future__ import annotations

from pathlib import Path

from dsv_platform.settings import Settings, load_settings

ROWS_PER_DAY = 200


def settings_at(home: Path) -> Settings:
    """The embedded default under ``home`` (never the process environment)."""
    return load_settings({}).with_home(home)
