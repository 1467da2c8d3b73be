"""The readings demo's home: a fresh world per run, the previous one moved aside (never deleted).

The demo tells a story on a simulated clock (a quarter, then six months later), so it
needs a world where that story has not happened yet: a home whose registry already
holds one of the configuration's dataset definitions is renamed
``<home>.old-<UTC timestamp>``, its canonical tables relocated there (it reads as
``DSV_HOME=<home>.old-<UTC timestamp>``), and the demo starts fresh.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from dsv_platform.adapters.iceberg.iceberg_relocate import relocate_home
from dsv_platform.cli.context import open_platform
from dsv_platform.cli.runs import ensure_dagster_yaml


@dataclass(frozen=True)
class Home:
    home: Path
    dagster_home: Path
    moved_to: Path | None  # where the previous run's world went, or None for a fresh home


def prepare_home() -> Home:
    """Move a used home aside and give the Dagster home its ``dagster.yaml`` (telemetry disabled)."""
    with open_platform() as platform:
        home, dagster_home = platform.settings.home, platform.settings.dagster_home
        used = any(platform.registry.get_definition(d.name, d.version) is not None for d in platform.config.datasets)
    moved = None
    if used:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        moved = home.with_name(f"{home.name}.old-{stamp}")
        home.rename(moved)
        relocate_home(moved)  # the catalog names files by absolute path: relocated, the moved world reads where it now is
    ensure_dagster_yaml(dagster_home)
    return Home(home, dagster_home, moved)
