"""Values the registry returns: realization records, publication outcomes, aliases, definitions."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dsv_platform.core.errors import AliasConflictError, DsvError, ReferenceSyntaxError
from dsv_platform.core.publication.refs import ALIAS_PATTERN, NAME_PATTERN, VERSION_PATTERN
from dsv_platform.core.publication.states import RealizationState


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ReferenceSyntaxError(f"dataset name {name!r} must match [a-z0-9_][a-z0-9_.-]*")
    return name


def check_version(version: str) -> str:
    """A definition version exactly as written in references (``v6``); the registry keys on this text."""
    if not isinstance(version, str) or not VERSION_PATTERN.match(version):
        raise ReferenceSyntaxError(f"definition version {version!r} must be text matching [A-Za-z0-9_.-]+, e.g. 'v6'")
    return version


def check_alias_name(alias: str) -> str:
    if not isinstance(alias, str) or not ALIAS_PATTERN.match(alias) or alias == "sha256":
        raise ReferenceSyntaxError(f"alias name {alias!r} must match [A-Za-z][A-Za-z0-9_.-]* (and not be 'sha256')")
    return alias


class DefinitionConflictError(DsvError):
    """A definition version is immutable: registering it again with a different contract or recipe is refused."""


class StaleAliasError(AliasConflictError):
    """The alias compare-and-swap lost; ``actual`` is the current target (None: the alias does not exist)."""

    def __init__(self, message: str, *, actual: str | None, generation: int | None) -> None:
        super().__init__(message)
        self.actual = actual
        self.generation = generation


class PublishResult(enum.Enum):
    CREATED = "created"  # this call published the candidate
    REPLAYED = "replayed"  # the request id (or the candidate) was already published: same answer again
    SAME_MANIFEST = "same_manifest"  # the identical manifest was already published; the candidate is ABANDONED
    LOST_RACE = "lost_race"  # another manifest holds the logical key; the candidate is ABANDONED


@dataclass(frozen=True)
class Realization:
    id: int
    dataset: str
    version: str
    state: RealizationState
    request_id: str
    logical_key: str
    manifest_hash: str | None
    content_hash: str | None
    schema_hash: str | None
    human_version: str | None
    created_at: datetime
    created_by: str
    state_changed_at: datetime
    published_at: datetime | None
    redaction_generation: int | None

    @property
    def ref(self) -> str:
        base = f"{self.dataset}:{self.version}"
        return f"{base}@sha256:{self.manifest_hash}" if self.manifest_hash else base


@dataclass(frozen=True)
class PublishOutcome:
    """``realization`` is the published winner; ``created`` is True only for the call that published it."""

    realization: Realization
    created: bool
    result: PublishResult
    candidate_id: int


@dataclass(frozen=True)
class RealizationEvent:
    id: int
    realization_id: int
    from_state: RealizationState | None
    to_state: RealizationState
    reason: str
    actor: str
    at: datetime


@dataclass(frozen=True)
class Definition:
    name: str
    version: str
    contract_json: str
    contract_hash: str
    recipe_json: str
    recipe_hash: str
    owner: str
    created_at: datetime
    allowed_readers: tuple[str, ...]


@dataclass(frozen=True)
class AliasRecord:
    dataset: str
    version: str
    alias: str
    target: str
    generation: int
    updated_at: datetime
    updated_by: str


@dataclass(frozen=True)
class AliasMove:
    """One row of alias history: ``old_target`` None means the alias was created."""

    dataset: str
    version: str
    alias: str
    old_target: str | None
    new_target: str
    generation: int
    actor: str
    reason: str
    at: datetime


@dataclass(frozen=True)
class RetentionRoot:
    """A reason to keep something: GC keeps everything a live root reaches."""

    id: int
    kind: str
    ref: str
    reason: str
    owner: str
    created_at: datetime
    expires_at: datetime | None
    released_at: datetime | None

    def active_at(self, at: datetime) -> bool:
        return self.released_at is None and (self.expires_at is None or self.expires_at > at)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "ref": self.ref,
            "reason": self.reason,
            "owner": self.owner,
            "created_at": self.created_at.isoformat(),
            "expires_at": None if self.expires_at is None else self.expires_at.isoformat(),
            "released_at": None if self.released_at is None else self.released_at.isoformat(),
        }
