"""The split assignment of a published realization, re-read and checked against its manifest."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsv_platform.core.errors import CorruptError
from dsv_platform.core.splits.split_checks import CheckReport, assignment_hash, splits_are_entity_disjoint
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform.services.publication.realization_inputs import RealizationBuildError, example_id

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform
    from dsv_platform.core.config.dataset_definition import DatasetDefinition


@dataclass(frozen=True)
class SplitsCheck:
    ref: str
    assignment_hash: str
    counts: Mapping[str, int]
    policy: Mapping[str, object]
    report: CheckReport


def check_splits(platform: Platform, ref: str, definition: DatasetDefinition) -> SplitsCheck:
    """Re-read ``ref``'s assignment object, confirm its hash against the manifest, and check entity disjointness."""
    ds = open_dataset(platform, ref, actor=platform.actor)
    splits = ds.manifest.splits
    assignment = ds.split_assignment
    if splits is None or assignment is None:
        raise RealizationBuildError(f"{ref}: the manifest records no split assignment")
    recomputed = assignment_hash(assignment, example_id(definition.contract))
    if recomputed != splits.assignment_hash:
        raise CorruptError(f"split assignment {splits.assignment_object} hashes to {recomputed}, the manifest says {splits.assignment_hash}", ref=ref)
    disjoint = splits_are_entity_disjoint(assignment, definition.entity_column)
    return SplitsCheck(ds.ref, recomputed, dict(splits.counts), splits.to_document()["policy"], disjoint)


__all__ = ["SplitsCheck", "check_splits"]
