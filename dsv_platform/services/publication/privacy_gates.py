"""The privacy-policy gates of a build (core/privacy/publication_gates.py) over its examples, the registry and the key store.

Every build runs both. The subjects gate reads the deletion requests when the gates run and again just before
publication (:func:`recheck`): a deletion applied while the build ran blocks it. Only an empty request list
skips hashing the output's subjects. Errors other than the expected ones stop the build (fail closed).
Details: docs/gc-and-privacy.md ("Publication gates")
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from dsv_platform.adapters.objects.encrypted_store import EncryptingObjectStore
from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.errors import ConfigurationError
from dsv_platform.core.privacy.publication_gates import (
    SUBJECTS,
    Request,
    coverage_key,
    restricted_columns,
    restricted_gate,
    subjects_gate,
    unhashable_gate,
)
from dsv_platform.core.publication.gates import GateResult
from dsv_platform.core.trust.access import access_of
from dsv_platform.services.privacy.privacy import PrivacyCoordinator
from dsv_platform.services.privacy.privacy_index import subject_hashes
from dsv_platform.services.privacy.privacy_key import load_subject_key
from dsv_platform.services.publication.examples import Examples

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


def _file(definition: DatasetDefinition) -> str:
    return str(definition.contract.source or f"the definition file of {definition.ref}")


def restricted_of(platform: Platform, definition: DatasetDefinition) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    """The restricted output columns (-> the contracts marking them) and the columns the definition's access block restricts."""
    sources = {s: platform.config.sources[s].contract for s in definition.sources if s in platform.config.sources}
    missing = [s for s in definition.sources if s not in platform.config.sources]
    if missing:  # a source the configuration does not define: its contract's marks cannot be read (fail closed)
        raise ConfigurationError(f"{definition.ref}: source(s) {missing} are not in the configuration {platform.config.folder}")
    policy = access_of(definition.document.get("access"), file=_file(definition), columns=definition.contract.column_names)
    return restricted_columns(definition.contract, sources), policy.restricted_columns


def access_key(platform: Platform, definition: DatasetDefinition) -> str | None:
    """The logical key's part for restricted output columns and their coverage (None when the output has none)."""
    marked, covered = restricted_of(platform, definition)
    return coverage_key(marked, covered)


def restricted_columns_gate(platform: Platform, definition: DatasetDefinition) -> GateResult:
    marked, covered = restricted_of(platform, definition)
    return restricted_gate(marked, covered, file=_file(definition))


def subject_columns(platform: Platform, definition: DatasetDefinition) -> tuple[str, ...]:
    """The entity (subject) columns of the definition's sources that are output columns: what the build's exclusion filter and the index read."""
    entities = (platform.config.sources[s].entity for s in definition.sources if s in platform.config.sources)
    return tuple(dict.fromkeys(e for e in entities if e is not None and e in definition.contract.column_names))


def subjects_under_deletion_gate(platform: Platform, definition: DatasetDefinition, examples: Examples, read_generation: int) -> GateResult:
    """The subjects gate now: the registry's requests against the keyed hashes of the output's subject values."""
    registry = platform.registry
    generation = registry.redaction_generation()
    requests = [Request(r.subject_key_hash, r.generation, r.completed) for r in registry.privacy.requests()]
    if not requests:
        return subjects_gate(set(), [], read_generation=read_generation, registry_generation=generation)
    store = platform.store
    if not isinstance(store, EncryptingObjectStore):
        return unhashable_gate("the object store keeps no subject-hash salt", read_generation=read_generation, registry_generation=generation)
    subject_key = load_subject_key(platform.settings.subject_key_path)
    coordinator = PrivacyCoordinator(registry, store, actor=platform.actor, config=platform.config, subject_key=subject_key)
    key, salt = coordinator.hash_key(), store.keys.salt()  # a subject-hash key the registry does not record stops the build
    present: set[str] = set()
    for column in subject_columns(platform, definition):
        values = examples.distinct(column)
        present.update(h for h in subject_hashes(pa.array(values), salt, key) if h is not None)
    return subjects_gate(present, requests, read_generation=read_generation, registry_generation=generation)


def privacy_gates(platform: Platform, definition: DatasetDefinition, examples: Examples, read_generation: int) -> list[GateResult]:
    """Both privacy gates of a build whose inputs were pinned at redaction generation ``read_generation``."""
    return [subjects_under_deletion_gate(platform, definition, examples, read_generation), restricted_columns_gate(platform, definition)]


def recheck(platform: Platform, definition: DatasetDefinition, examples: Examples, gates: list[GateResult]) -> list[GateResult]:
    """``gates`` with the subjects gate evaluated again when the redaction generation moved since it ran (in place, and returned)."""
    for i, gate in enumerate(gates):
        if gate.name == SUBJECTS and gate.detail.get("registry_generation") != platform.registry.redaction_generation():
            read = gate.detail.get("read_generation")
            gates[i] = subjects_under_deletion_gate(platform, definition, examples, int(read) if isinstance(read, int) else 0)
    return gates


def moved_since(platform: Platform, gates: Sequence[GateResult]) -> list[GateResult]:
    """``gates`` with the subjects gate failed when a deletion request came after it ran and its rows are not at hand to check."""
    out, generation = list(gates), platform.registry.redaction_generation()
    for i, gate in enumerate(out):
        if gate.name == SUBJECTS and gate.detail.get("registry_generation") != generation:
            read = gate.detail.get("read_generation")
            reason = f"a privacy deletion request came after the gates ran (generation {gate.detail.get('registry_generation')} -> {generation})"
            out[i] = unhashable_gate(reason, read_generation=int(read) if isinstance(read, int) else 0, registry_generation=generation)
    return out


__all__ = ["access_key", "moved_since", "privacy_gates", "recheck", "restricted_columns_gate", "restricted_of", "subjects_under_deletion_gate"]
