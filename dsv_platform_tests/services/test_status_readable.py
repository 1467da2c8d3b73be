"""Issue 23 item 7: ``dsv status`` no longer contradicts ``dsv resolve``.

A realization that passed its blocking gates but failed a warning gate is readable (it resolves, and may be
ELIGIBLE behind ``@production``), yet "usable" counts only realizations passing every gate. The status now
names the realization that resolves, its state, the warning gates it failed, the aliases at it and its publication lag.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.cli.reproduce_cmd import _build_line, _resolution_lines
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
        assert status.usable_ref == clean.realization.ref and status.readable is not None
        assert (status.readable["ref"], status.readable["state"], status.readable["warnings"]) == (clean.realization.ref, "PUBLISHED", [])

        def warn(manifest, parts):  # type: ignore[no-untyped-def]
            return [rows_at_least(manifest.rows, 1), GateResult("integrity_exclusion_rules_changed", False, {"note": "a warning"}, blocking=False)]

        warned = pw.build(reg, store, "r-warn", logical_key="b", parts=pw.partitions(seed=2), gates=warn)
        assert reg.resolve(pw.NAME, pw.VERSION).manifest_hash == warned.manifest.manifest_hash  # what `dsv resolve` answers
        status = definition_status(reg, store, DEFINITION, now=now)
        assert status.usable_ref == clean.realization.ref  # usable: every gate passed, warnings included
        assert status.readable is not None
        assert (status.readable["ref"], status.readable["state"]) == (warned.realization.ref, "PUBLISHED")
        assert status.readable["warnings"] == ["integrity_exclusion_rules_changed"]


def _warn(manifest, parts):  # type: ignore[no-untyped-def]
    return [rows_at_least(manifest.rows, 1), GateResult("integrity_exclusion_rules_changed", False, {"note": "a warning"}, blocking=False)]


def test_status_with_only_a_warned_realization_says_why_none_is_usable_and_what_resolves(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "objects", fsync=False)
    with Registry.from_url(f"sqlite:///{tmp_path / 'registry.db'}") as reg:
        pw.register(reg)
        warned = pw.build(reg, store, "r-warn", logical_key="b", parts=pw.partitions(seed=2), gates=_warn)
        digest = warned.manifest.manifest_hash
        reg.approve(warned.realization.id, reason="reviewed the warning", actor="auditor")  # ELIGIBLE, as @production needs
        reg.set_alias(pw.NAME, pw.VERSION, "production", digest, expect=None, actor="admin", reason="ship it")
        assert reg.resolve(pw.NAME, pw.VERSION, alias="production").manifest_hash == digest
        doc = definition_status(reg, store, DEFINITION, now=dt.datetime.now(dt.UTC)).to_document()
        assert doc["approval"] is None and doc["readable"]["state"] == "ELIGIBLE"
        assert doc["usable_ref"] is None and doc["publication_lag_seconds"] is None  # the existing keys keep their meaning
        readable = doc["readable"]
        assert readable["ref"] == warned.realization.ref and readable["aliases"] == [f"{DEFINITION.ref}@production"]
        assert "publication_lag_seconds" in readable  # None here: these test manifests record no watermark
        first, second = _resolution_lines(doc)
        ref, warn = warned.realization.ref, "warn: integrity_exclusion_rules_changed"
        assert first == f"{DEFINITION.ref}: usable: none passing every warning; newest readable {ref} ELIGIBLE, {warn}"
        assert second == f"  resolves to {ref} (ELIGIBLE, {warn}; `dsv resolve {DEFINITION.ref}`; {DEFINITION.ref}@production): publication lag -"
        assert _build_line(doc) == "  build: no realization passing every gate yet (rows and stages: none); 1 attempts, 0 gate failures"
