"""Gathering a realization's dataset card (core/publication/card.py builds it) and storing it at publication.

:func:`card_of` reads what the card is built from: the manifest, the registered recipe, the sources' contracts,
the stored quality report, the label balance (the label columns of the stored partitions, counted), the access
policy's restricted columns and, for a published realization, its uses (consumers, models, artifacts), aliases,
approval and retention. :func:`publication_card` is the card the publisher stores beside the quality report and
names in the signed statement (``dataset_card``): the same card as of publication (no uses yet). Details:
docs/publication.md
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc

from dsv_platform.adapters.registry.consumers import ConsumerRepository
from dsv_platform.adapters.registry.lineage import LineageQueries
from dsv_platform.core import canonical_json
from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.errors import ObjectStoreError
from dsv_platform.core.lineage.lineage import Relation
from dsv_platform.core.publication.card import CardInputs, build_card
from dsv_platform.core.publication.manifest import Manifest
from dsv_platform.core.publication.records import Realization
from dsv_platform.services.publication.approval import approval_metadata
from dsv_platform.services.publication.record import quality_report_object, retention_until

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

CARD_RELATION = Relation.DOCUMENTS.value  # object (the stored card) -> realization
MAX_LABEL_VALUES = 20  # a label column with more distinct values shows its 20 most frequent


def stored_card_object(platform: Platform, manifest_hash: str) -> str | None:
    """The card stored at publication (the ``documents`` lineage edge; the signed statement names it too), or None."""
    for edge in platform.registry.lineage_edges(node=("realization", manifest_hash)):
        if edge.relation == CARD_RELATION and edge.src_kind == "object":
            return str(edge.src_id)
    return None


def _definition(platform: Platform, manifest: Manifest) -> DatasetDefinition | None:
    return next((d for d in platform.config.datasets if (d.name, d.version) == (manifest.dataset, manifest.version)), None)


def _label_columns(platform: Platform, manifest: Manifest, recipe: dict[str, Any]) -> list[str]:
    """The integrity ``label_column``, else the label contract's non-key columns that the output contract has."""
    columns = [c["name"] for c in (manifest.to_document()["contract"] or {}).get("columns", [])]
    declared = (recipe.get("integrity") or {}).get("label_column")
    if declared:
        return [declared] if declared in columns else []
    label = recipe.get("label")
    if not label:
        return []
    try:
        contract = platform.config.label(label["name"], int(label["version"])).contract
    except ConfigError:  # the label is no longer configured: the card shows no balance
        return []
    return [c for c in contract.column_names if c not in contract.key and c in columns and not c.startswith("_")]


def label_balance(platform: Platform, manifest: Manifest, columns: list[str]) -> dict[str, dict[str, int]]:
    """Rows per value of each label column, counted over the stored partitions (each object re-hashed as read)."""
    from dsv_platform.services.publication.datasets import read_object

    counts: dict[str, Counter[str]] = {c: Counter() for c in columns}
    for part in manifest.partitions:
        table = read_object(platform.store, f"{manifest.dataset}:{manifest.version}", part, columns=columns)
        for c in columns:  # counted in Arrow: a partition's label values never become Python objects one by one
            for entry in pc.value_counts(table.column(c)).to_pylist():
                value = entry["values"]
                counts[c]["null" if value is None else str(value)] += int(entry["counts"])
    return {c: dict(sorted(n.most_common(MAX_LABEL_VALUES))) for c, n in counts.items()}


def _json_object(platform: Platform, digest: str | None) -> dict[str, Any] | None:
    if digest is None:
        return None
    try:
        return dict(json.loads(platform.store.get(digest)))
    except (ObjectStoreError, ValueError):  # unreadable: the card says the report was not read (quality.passed null)
        return None


def _uses(platform: Platform, manifest_hash: str) -> dict[str, list[str]]:
    edges = platform.registry.lineage_edges(node=("realization", manifest_hash))
    models = sorted({e.dst_id for e in edges if e.relation == Relation.TRAINED.value and e.src_id == manifest_hash})
    artifacts = sorted({e.dst_id for e in edges if e.relation == Relation.USED.value and e.src_id == manifest_hash})
    return {"models": models, "artifacts": artifacts}


def card_inputs(
    platform: Platform, manifest: Manifest, *, realization: Realization | None, report_object: str | None, balance: dict[str, dict[str, int]] | None = None
) -> CardInputs:
    """What the card of ``manifest`` is built from; ``realization`` None: as of publication (no uses, aliases or approval).

    ``balance``: the label balance already counted (the stored card's: the rows never change), else counted now."""
    registry = platform.registry
    registered = registry.get_definition(manifest.dataset, manifest.version)
    recipe = json.loads(registered.recipe_json) if registered is not None else {}
    definition = _definition(platform, manifest)
    sources = {
        name: {"owner": spec.contract.owner, "description": spec.contract.description, "version": f"v{spec.version}" if spec.version else None}
        for name, spec in platform.config.sources.items()
    }
    access = (definition.document.get("access") or {}) if definition is not None else {}
    restricted = tuple(access.get("restricted_columns") or ())
    balanced = [c for c in _label_columns(platform, manifest, recipe) if c not in restricted]  # a withheld column's values stay withheld
    inputs = CardInputs(
        ref=f"{manifest.dataset}:{manifest.version}@sha256:{manifest.manifest_hash}",
        manifest=manifest.to_document(),
        recipe=recipe,
        owner=registered.owner if registered is not None else None,
        sources=sources,
        quality_report=_json_object(platform, report_object),
        quality_report_object=report_object,
        label_balance=label_balance(platform, manifest, balanced) if balance is None else {c: balance[c] for c in balanced if c in balance},
        restricted_columns=restricted,
        retention_until=retention_until(registry, manifest.dataset, manifest.version),
    )
    if realization is None:
        return inputs
    facts = {"state": realization.state.name, "human_version": realization.human_version, "redaction_generation": realization.redaction_generation,
             "published_at": realization.published_at.isoformat() if realization.published_at else None}  # fmt: skip
    consumers = sorted({c.name for _, c in ConsumerRepository(registry).list(manifest.dataset)})
    uses = {"consumers": consumers, **_uses(platform, manifest.manifest_hash)}
    aliases = LineageQueries(registry.engine).aliases_targeting(manifest.manifest_hash)
    return CardInputs(**{**inputs.__dict__, "realization": facts, "uses": uses, "aliases": aliases, "approval": approval_metadata(registry, realization)})


def card_of(platform: Platform, realization: Realization, manifest: Manifest) -> dict[str, Any]:
    """The card of a published realization now, with ``stored_card``: the object of the card stored at its publication."""
    report = quality_report_object(platform.registry, manifest.manifest_hash)
    stored = stored_card_object(platform, manifest.manifest_hash)
    card = build_card(card_inputs(platform, manifest, realization=realization, report_object=report, balance=_stored_balance(platform, stored)))
    return {**card, "stored_card": stored}


def _stored_balance(platform: Platform, stored: str | None) -> dict[str, dict[str, int]] | None:
    """The label balance the card stored at publication counted, or None (no stored card, or one that does not read: count again)."""
    doc = _json_object(platform, stored)
    balance = ((doc or {}).get("composition") or {}).get("label_balance")
    return balance if isinstance(balance, dict) else None


def publication_card(platform: Platform, manifest: Manifest, report_object: str) -> bytes:
    """The canonical JSON of the card as of publication, which the publisher stores and the signed statement names."""
    return canonical_json.dumps(build_card(card_inputs(platform, manifest, realization=None, report_object=report_object)))
