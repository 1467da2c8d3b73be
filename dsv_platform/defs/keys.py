"""The platform's asset keys as Dagster ``AssetKey`` values (the paths: core/config/asset_keys.py)."""

import dagster as dg

from dsv_platform.core.config import asset_keys as paths
from dsv_platform.core.config.dataset_definition import DatasetDefinition


def raw(source: str) -> dg.AssetKey:
    return dg.AssetKey(list(paths.raw(source)))


def canonical(source: str) -> dg.AssetKey:
    return dg.AssetKey(list(paths.canonical(source)))


def head(source: str) -> dg.AssetKey:
    """``canonical/<source>/head``: the table's current Iceberg snapshot, observed (defs/canonical.py ``build_head_asset``)."""
    return dg.AssetKey(list(paths.head(source)))


def snapshot(definition: DatasetDefinition) -> dg.AssetKey:
    return dg.AssetKey(list(paths.snapshot(definition.name, definition.version)))


def splits(definition: DatasetDefinition) -> dg.AssetKey:
    return dg.AssetKey(list(paths.splits(definition.name, definition.version)))


def snapshot_of(name: str, version: str) -> dg.AssetKey:
    """:func:`snapshot` of the dataset ``name:version`` (for a module that names it without its definition)."""
    return dg.AssetKey(list(paths.snapshot(name, version)))


def splits_of(name: str, version: str) -> dg.AssetKey:
    return dg.AssetKey(list(paths.splits(name, version)))


def label(name: str) -> dg.AssetKey:
    return dg.AssetKey(list(paths.label(name)))


def model(name: str) -> dg.AssetKey:
    return dg.AssetKey(list(paths.model(name)))


def artifact(name: str) -> dg.AssetKey:
    return dg.AssetKey(list(paths.artifact(name)))


def op_name(key: dg.AssetKey) -> str:
    """The step of a single asset, and its ``ops:`` entry in run config: ``raw__transactions``."""
    return paths.op_name(tuple(key.path))


def parse(text: str) -> dg.AssetKey:
    """A key from its user string (``datasets/fraud_training_set/v6``), as a service reports it."""
    return dg.AssetKey.from_user_string(text)


def legacy(key: dg.AssetKey) -> dg.AssetKey | None:
    """The flat key ``key`` had before multi-part keys: an upgraded instance's history stays under it."""
    name = paths.legacy_name(tuple(key.path))
    return None if name is None else dg.AssetKey(name)


def latest_materialization(instance: dg.DagsterInstance, key: dg.AssetKey) -> dg.AssetMaterialization | None:
    """The latest materialization of ``key``, or else of its :func:`legacy` key (recorded before the upgrade)."""
    for k in (key, legacy(key)):
        event = None if k is None else instance.get_latest_materialization_event(k)
        if event is not None and event.asset_materialization is not None:
            return event.asset_materialization
    return None


__all__ = [
    "artifact", "canonical", "head", "label", "latest_materialization", "legacy", "model", "op_name", "parse", "raw", "snapshot", "snapshot_of", "splits",
    "splits_of",
]  # fmt: skip
