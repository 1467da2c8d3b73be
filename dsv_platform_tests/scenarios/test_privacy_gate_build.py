"""A build does not publish rows of a subject whose privacy deletion came while it ran (issue 27 item 9, second gate).

A real world (SQLite catalog and registry, encrypting local objects). The deletion is applied from the build's own
progress stages: when the gates start (the examples were read and filtered before it), and when the parts are being
written (the gates had run; the publisher asks for them again just before publishing). Both builds are blocked,
the failure names how many subjects and the fix, never the subject; the rebuild publishes without the subject.
"""

from __future__ import annotations

import dataclasses

import pyarrow.compute as pc
import pytest

from dsv_platform import open_dataset
from dsv_platform.core.privacy.publication_gates import SUBJECTS
from dsv_platform.core.publication.gates import GatesFailedError
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.services.privacy.privacy import build_coordinator
from dsv_platform.services.publication.realization import ALIAS, build_realization
from dsv_platform.services.publication.semantic_gate import stored_gates
from dsv_platform_tests.scenarios.support import World, definition


class DeleteAt:
    """A build's progress that deletes ``subject`` (a real privacy deletion) when stage ``at`` starts."""

    def __init__(self, world: World, subject: str, at: str) -> None:
        self.world, self.subject, self.at, self.applied = world, subject, at, False

    def stage(self, name: str, total: int | None = None, unit: str = "rows") -> None:
        if name == self.at and not self.applied:
            self.applied = True
            build_coordinator(self.world.platform).delete(self.subject, "GDPR art. 17 request #27")

    def advance(self, n: int = 1) -> None:
        pass

    def done(self) -> None:
        pass


def _a_subject(world: World) -> str:
    accounts = world.tables.table(world.platform.config.sources["transactions"]).scan(selected_fields=("account_id",)).to_arrow()
    return str(sorted(pc.unique(accounts.column("account_id")).to_pylist())[0])


@pytest.mark.parametrize("at", ["gates", "parts"])
def test_a_deletion_while_the_build_runs_blocks_it_naming_the_count_and_the_rebuild_excludes_the_subject(tmp_path, at) -> None:
    world = World.create(tmp_path / "dsv", days=3)
    subject = _a_subject(world)
    progress = DeleteAt(world, subject, at)
    with pytest.raises(GatesFailedError) as info:
        build_realization(world.platform, definition("v6"), progress=progress)
    assert progress.applied
    message = str(info.value)
    assert SUBJECTS in message and "1 subject(s) under deletion in the output" in message and "fix:" in message, message
    hashed = world.registry.privacy.requests()[0].subject_key_hash
    assert subject not in message and hashed not in message, "the failure names how many, never who"
    [gate] = [g for g in stored_gates(world.platform, info.value.report.manifest_hash, None) if g.name == SUBJECTS]
    assert not gate.passed and gate.detail["subjects"] == 1 and gate.detail["read_generation"] == 0 and gate.detail["registry_generation"] == 1
    assert subject not in str(gate.to_document()) and hashed not in str(gate.to_document())
    [failed] = world.registry.versions("fraud_training_set", include_candidates=True)
    assert failed.state is RealizationState.FAILED and world.registry.get_alias("fraud_training_set", "v6", ALIAS) is None

    rebuilt = build_realization(world.platform, definition("v6"))  # the deletion raised the generation: a new logical version
    [passed] = [g for g in rebuilt.gates if g.name == SUBJECTS]
    assert passed.passed and passed.detail["read_generation"] == 1
    with open_dataset(rebuilt.ref, settings=world.settings) as ds:
        assert subject not in set(ds.to_arrow().column("account_id").to_pylist())


def test_the_gate_is_on_by_default_and_passes_without_deletion_requests(tmp_path) -> None:
    world = World.create(tmp_path / "dsv", days=2)
    [gate] = [g for g in world.build().gates if g.name == SUBJECTS]
    assert gate.passed and gate.blocking and gate.detail["subjects"] == 0, "on by default, with nothing to declare"


def test_a_fanned_out_seal_after_a_deletion_since_its_plan_fails_closed(tmp_path) -> None:
    from dsv_platform.services.publication.fanout import plan_fanout, prepare_group, seal_fanout

    world = World.create(tmp_path / "dsv", days=3)
    fanned = dataclasses.replace(definition("v6"), fan_out=2)
    plan = plan_fanout(world.platform, fanned)
    groups = [prepare_group(world.platform, fanned, plan, keys) for keys in plan.groups(2)]
    build_coordinator(world.platform).delete(_a_subject(world), "GDPR art. 17 request #28")  # after every group was prepared
    with pytest.raises(GatesFailedError) as info:
        seal_fanout(world.platform, fanned, plan, groups)
    assert "cannot check: a privacy deletion request came after the gates ran (generation 0 -> 1)" in str(info.value), info.value
    assert world.registry.get_alias("fraud_training_set", "v6", ALIAS) is None
