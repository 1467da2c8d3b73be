"""Running the demo again on the same home: reuse it when it was built from this configuration, else move it aside.

A home whose registry holds a dataset definition registered with another
contract or recipe than this configuration's would refuse the rebuild
(DefinitionConflictError), so it is moved to ``<home>.old-<timestamp>`` (never
deleted), its canonical tables relocated there so that it stays readable as
``DSV_HOME=<home>.old-<timestamp>``, and the demo starts fresh. Rebuilds on a
reused home are idempotent: the same pinned inputs give the same realization.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from dsv_platform.adapters.iceberg.iceberg_relocate import relocate_home
from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import open_platform
from dsv_platform.cli.runs import ensure_dagster_yaml
from dsv_platform.core import canonical_json


@dataclass(frozen=True)
class HomeState:
    realizations: int
    conflict: str | None  # the first definition registered differently, or None


def home_state(platform: Platform) -> HomeState:
    """How many realizations the home's registry holds for this configuration's datasets, and any conflicting definition."""
    registry, count = platform.registry, 0
    for d in platform.config.datasets:
        registered = registry.get_definition(d.name, d.version)
        if registered is None:
            continue
        if (registered.contract_hash, registered.recipe_hash) != (canonical_json.sha256_hex(d.contract.to_document()), d.recipe_hash):
            return HomeState(count, f"{d.ref} is registered there with another contract or recipe")
        count += len([r for r in registry.versions(d.name, include_candidates=True) if r.version == d.version])
    return HomeState(count, None)


def move_aside(home: Path) -> Path:
    """Rename ``home`` to ``<home>.old-<UTC timestamp>`` (nothing is deleted) and relocate its canonical tables there.

    The embedded Iceberg catalog names files by absolute path: relocated, the moved home reads where it now is
    (``DSV_HOME=<home>.old-<timestamp>``), and the fresh home made at ``home`` never sees its files.
    """
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    target = home.with_name(f"{home.name}.old-{stamp}")
    home.rename(target)
    relocate_home(target)
    return target


def prepare_home() -> bool:
    """Reuse, start fresh or move the home aside, and say which; True when an existing home is reused.

    The Dagster home gets its ``dagster.yaml`` (telemetry disabled) unless it has one.
    """
    with open_platform() as platform:
        home, dagster_home = platform.settings.home, platform.settings.dagster_home
        state = home_state(platform)
    if state.conflict is not None:
        moved = move_aside(home)
        print(
            f"DSV_HOME={home} is incompatible with this configuration ({state.conflict}): moved it aside to {moved}; starting fresh "
            f"(its tables were relocated there: it reads as DSV_HOME={moved})"
        )
        ensure_dagster_yaml(dagster_home)
        return False
    ensure_dagster_yaml(dagster_home)
    if state.realizations:
        print(f"reusing DSV_HOME={home} ({state.realizations} realizations built from this configuration)")
        return True
    print(f"fresh DSV_HOME={home} (no realization of this configuration yet)")
    return False
