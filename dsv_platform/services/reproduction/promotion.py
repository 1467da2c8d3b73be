"""The promotion gate: a model reaches the ``production`` alias only with its evidence intact.

``promote(platform, run_hash)`` refuses, saying which, when
- the run manifest is missing (or does not hash to its name): RUN_MANIFEST_MISSING / HASH_MISMATCH;
- the realization it was trained on does not resolve (NOT_FOUND, EXPIRED, REDACTED, ...): REALIZATION_UNRESOLVED;
- the realization's hashes do not match (manifest, objects, content, split assignment): HASH_MISMATCH;
- the realization is not ELIGIBLE (not approved: ``dsv approve REF --reason TEXT``): NOT_ELIGIBLE.
Otherwise it moves the training set's ``production`` alias to that realization
(compare-and-swap through :meth:`Publisher.move_alias`) and records a lineage
edge ``model_run:<run hash> --promoted_to--> alias``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsv_platform.core.errors import CorruptError, DsvError, FailureKind, ResolutionError
from dsv_platform.core.lineage.lineage import NodeKind, Relation, node_label
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.reproduction.reproduction import Check, Outcome
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform.services.publication.publisher import Publisher
from dsv_platform.services.reproduction.reproduce import locate, verify_dataset
from dsv_platform.services.trust.trust import gatekeeper

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

PRODUCTION = "production"


class Refusal(enum.Enum):
    RUN_MANIFEST_MISSING = "RUN_MANIFEST_MISSING"
    REALIZATION_UNRESOLVED = "REALIZATION_UNRESOLVED"
    HASH_MISMATCH = "HASH_MISMATCH"
    NOT_ELIGIBLE = "NOT_ELIGIBLE"


class PromotionRefusedError(DsvError):
    """The promotion gate refused; ``refusal`` says which evidence is missing or broken."""

    kind = FailureKind.PROMOTION_REFUSED

    def __init__(self, refusal: Refusal, message: str) -> None:
        super().__init__(f"promotion refused ({refusal.value}): {message}")
        self.refusal = refusal


@dataclass(frozen=True)
class Promotion:
    run_hash: str
    model_id: str
    realization: Realization
    alias: str

    def to_document(self) -> dict[str, Any]:
        return {
            "run_hash": self.run_hash,
            "model": self.model_id,
            "ref": self.realization.ref,
            "alias": self.alias,
            "alias_ref": f"{self.realization.dataset}:{self.realization.version}@{self.alias}",
        }


def check_promotable(platform: Platform, run_hash: str, *, actor: str) -> tuple[Realization, str]:
    """The realization a promotable run was trained on and the model's lineage node (``model_run:<hash>``); else PromotionRefusedError."""
    registry = platform.registry
    digest = run_hash.strip().removeprefix("sha256:").lower()
    found = locate(registry, platform.store, digest)
    if isinstance(found, Check):
        kind = Refusal.HASH_MISMATCH if found.failure is Outcome.CORRUPT else Refusal.RUN_MANIFEST_MISSING
        raise PromotionRefusedError(kind, f"run manifest {digest}: {found.detail.get('reason', 'not found')}")
    if found.run is None:
        raise PromotionRefusedError(Refusal.RUN_MANIFEST_MISSING, f"{digest} names a realization, not a model run manifest")
    recorded = found.run["realization"]
    try:
        realization = registry.resolve_ref(str(recorded["ref"]), actor=platform.actor)
    except ResolutionError as exc:
        raise PromotionRefusedError(Refusal.REALIZATION_UNRESOLVED, f"realization {recorded['ref']} does not resolve: {exc}") from exc
    if realization.manifest_hash != recorded["manifest_hash"]:
        raise PromotionRefusedError(
            Refusal.HASH_MISMATCH, f"run records manifest {recorded['manifest_hash']}, {recorded['ref']} resolves to {realization.manifest_hash}"
        )
    if realization.state is not RealizationState.ELIGIBLE:
        raise PromotionRefusedError(
            Refusal.NOT_ELIGIBLE,
            f"the model was trained on {realization.ref}, which is {realization.state.value}, not ELIGIBLE; "
            f"approve it first: dsv approve {realization.ref} --reason TEXT",
        )
    try:
        verify_dataset(open_dataset(platform, realization.ref, actor=actor))
    except CorruptError as exc:
        raise PromotionRefusedError(Refusal.HASH_MISMATCH, f"{realization.ref}: {exc}") from exc
    except ResolutionError as exc:
        raise PromotionRefusedError(Refusal.REALIZATION_UNRESOLVED, f"realization {realization.ref} does not resolve: {exc}") from exc
    return realization, node_label((NodeKind.MODEL_RUN.value, digest))


def promote(platform: Platform, run_hash: str, *, actor: str | None = None, alias: str = PRODUCTION) -> Promotion:
    """Gate, then move ``alias`` (default ``production``) to the model's realization and record the promotion."""
    who = platform.actor  # the proven identity; ``actor`` is kept for callers, never recorded
    realization, model_id = check_promotable(platform, run_hash, actor=who)
    registry = platform.registry
    Publisher(registry, platform.store, actor=who, gate=gatekeeper(platform)).move_alias(realization, alias)
    digest = run_hash.strip().removeprefix("sha256:").lower()
    target = f"{realization.dataset}:{realization.version}@{alias}"
    edge = (NodeKind.MODEL_RUN.value, digest, NodeKind.ALIAS.value, target, Relation.PROMOTED_TO.value, {"run_hash": digest, "ref": realization.ref})
    registry.record_lineage([edge], actor=who)
    return Promotion(digest, model_id, realization, alias)
