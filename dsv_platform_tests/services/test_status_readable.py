"""Issue 23 item 7: ``dsv status`` no longer contradicts ``dsv resolve``.

A realization that passed its blocking gates but failed a warning gate is readable (it resolves, and may be
ELIGIBLE behind ``@production``), yet "usable" counts only realizations passing every gate. The status now
names the realization that resolves, its state and the warning gates it failed.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.publication.gates import GateResult, rows_at_least
from dsv_platform.services.publication.status import definition_status
from dsv_platform_tests.services import publisher_worker as pw

DEFINITION: Any = SimpleNamespace(name=pw.NAME, version=pw.VERSION, ref=f"{pw.NAME}:{pw.VERSION}")


def test_status_names_what_resolves_and_the_warning_it_failed(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "objects", fsync=False)
    with Registry.from_url(f"sqlite:///{tmp_path / 'registry.db'}") as reg:
        pw.register(reg)
        clean = pw.build(reg, store, "r-clean", logical_key="a", parts=pw.partitions(seed=1))
        now = dt.datetime.now(dt.UTC)
        status = definition_status(reg, store, DEFINITION, now=now)
        assert status.usable_ref == clean.realization.ref and status.readable == {"ref": clean.realization.ref, "state": "PUBLISHED", "warnings": []}

        def warn(manifest, parts):  # type: ignore[no-untyped-def]
            return [rows_at_least(manifest.rows, 1), GateResult("integrity_exclusion_rules_changed", False, {"note": "a warning"}, blocking=False)]

        warned = pw.build(reg, store, "r-warn", logical_key="b", parts=pw.partitions(seed=2), gates=warn)
        assert reg.resolve(pw.NAME, pw.VERSION).manifest_hash == warned.manifest.manifest_hash  # what `dsv resolve` answers
        status = definition_status(reg, store, DEFINITION, now=now)
        assert status.usable_ref == clean.realization.ref  # usable: every gate passed, warnings included
        assert status.readable == {"ref": warned.realization.ref, "state": "PUBLISHED", "warnings": ["integrity_exclusion_rules_changed"]}
