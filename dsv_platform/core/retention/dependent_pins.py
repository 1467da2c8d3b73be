"""Dependent pins: Iceberg tags made for a report or a model, named for it, and how long each outlives its retention.

A report (artifact) pins its inputs' source snapshots as ``report-<name>-<hash12>``, a model run as
``model-<name>-<hash12>`` (hash12: the artifact or run manifest hash's first 12 hex; ``@<snapshot id>`` follows when
the inputs name several snapshots of one table). The registry records each
pin as a lineage edge ``iceberg_tag:<table>#<tag> --pinned_by--> artifact|model_run:<hash>``; a tag is a dependent
pin only when both its name and such a record agree (:func:`dependent_pins`), never by its name alone. While its
owner is reached from a root the pin keeps :data:`RETAINED_REF_AGE_MS`; after, it ages out over ``gc.max_ref_age_days``.
Details: docs/gc-and-privacy.md
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from dsv_platform.core.errors import DsvError
from dsv_platform.core.lineage.lineage import Edge, Node, NodeKind, Relation
from dsv_platform.core.retention.gc_inventory import Inventory, SnapshotInfo, TagInfo

RETAINED_REF_AGE_MS = 3650 * 24 * 3600 * 1000
"""``max-ref-age-ms`` of a pin something retained depends on: ten years, beyond any retention (Iceberg measures a
ref's age from its snapshot's timestamp; an engine that enforces ref ages would drop only a pin leaked long ago)."""
PREFIXES = {NodeKind.ARTIFACT.value: "report", NodeKind.MODEL_RUN.value: "model"}
_KIND_OF = {prefix: kind for kind, prefix in PREFIXES.items()}
_NAME = re.compile(r"^(report|model)-(.+)-([0-9a-f]{12})(?:@([0-9]+))?\Z")
_BAD_NAME = re.compile(r"[#\s/@]")
_K_TAG = NodeKind.ICEBERG_TAG.value
_PINNED_BY = Relation.PINNED_BY.value
AGEING = "ageing_pin"
"""The root kind GC gives a dependent pin whose owner is no longer retained, until its max ref age passes."""


class DependentPinError(DsvError):
    """A dependent pin cannot be named (an owner kind without pins, an empty name, a hash that is not hex)."""


def tag_part(name: str) -> str:
    """``name`` as a tag carries it: ``#``, ``/``, ``@`` and white space become ``_`` (a node id is ``<table>#<tag>``)."""
    return _BAD_NAME.sub("_", name)


def dependent_tag(owner_kind: str, name: str, owner_hash: str, *, snapshot_id: int | None = None) -> str:
    """``report-<name>-<hash12>`` for an artifact, ``model-<name>-<hash12>`` for a model run (``@<snapshot_id>`` when given)."""
    prefix = PREFIXES.get(owner_kind)
    if prefix is None:
        raise DependentPinError(f"a {owner_kind} gets no dependent pin (only {', '.join(sorted(PREFIXES))})")
    if not name:
        raise DependentPinError(f"a {owner_kind} without a name gets no dependent pin")
    if not re.fullmatch(r"[0-9a-f]{12,}", owner_hash):
        raise DependentPinError(f"{owner_kind} hash {owner_hash!r} is not hex")
    return f"{prefix}-{tag_part(name)}-{owner_hash[:12]}" + ("" if snapshot_id is None else f"@{snapshot_id}")


def parse_dependent_tag(tag: str) -> tuple[str, str, str, int | None] | None:
    """``(owner kind, name, hash12, snapshot id or None)`` of a tag named like a dependent pin, else None (a realization's pin, scratch)."""
    m = _NAME.match(tag)
    return None if m is None else (_KIND_OF[m.group(1)], m.group(2), m.group(3), None if m.group(4) is None else int(m.group(4)))


def pin_edge(table: str, tag: str, snapshot_id: int, owner: Node, *, name: str) -> Edge:
    """The registry record of a dependent pin: ``iceberg_tag:<table>#<tag> --pinned_by--> <owner>`` (``name``: the owner's)."""
    attrs = {"table": table, "tag": tag, "snapshot_id": str(snapshot_id), "owner": tag_part(name)}
    return Edge(_K_TAG, f"{table}#{tag}", owner[0], owner[1], _PINNED_BY, attrs)


def is_pin_edge(edge: Edge) -> bool:
    return edge.src_kind == _K_TAG and edge.relation == _PINNED_BY and edge.dst_kind in PREFIXES


@dataclass(frozen=True)
class DependentPin:
    """A tag that is a dependent pin: recorded in the registry for ``owner`` and named for it."""

    table: str
    tag: str
    snapshot_id: int
    owner: Node

    @property
    def node(self) -> Node:
        return (_K_TAG, f"{self.table}#{self.tag}")

    @property
    def snapshot_node(self) -> Node:
        return (NodeKind.ICEBERG_SNAPSHOT.value, f"{self.table}@{self.snapshot_id}")


def recorded_pin(edge: Edge) -> DependentPin | None:
    """The pin a registry record names, when the record is one and its tag's name agrees with it (kind, name, hash)."""
    if not is_pin_edge(edge):
        return None
    table, _, tag = edge.src_id.partition("#")
    parsed = parse_dependent_tag(tag)
    attrs = edge.attributes
    if parsed is None or parsed[0] != edge.dst_kind or not edge.dst_id.startswith(parsed[2]) or attrs.get("owner") != parsed[1]:
        return None
    try:
        snapshot_id = int(str(attrs.get("snapshot_id")))
    except ValueError:
        return None
    if parsed[3] is not None and parsed[3] != snapshot_id:
        return None
    return DependentPin(table, tag, snapshot_id, edge.dst)


def dependent_pins(inv: Inventory) -> dict[Node, DependentPin]:
    """Tag node -> pin, for every registry record that agrees with its tag's name (whether the tag still exists or not)."""
    out: dict[Node, DependentPin] = {}
    for edge in inv.lineage:
        pin = recorded_pin(edge)
        if pin is not None:
            out.setdefault(pin.node, pin)
    return out


@dataclass(frozen=True)
class Ageing:
    """A dependent pin whose owner no root reaches: kept until ``until``; ``set_age_ms``: the ref age to write (None: as set)."""

    tag: TagInfo
    until: datetime
    set_age_ms: int | None

    @property
    def node(self) -> Node:
        return (_K_TAG, f"{self.tag.table}#{self.tag.tag}")


def ageing_pins(inv: Inventory, pins: dict[Node, DependentPin], reached: dict[Node, str], max_ref_age: timedelta) -> tuple[list[Ageing], list[TagInfo]]:
    """The dependent pins no root reaches: those still ageing out (ref age set now if it was the retained one) and those aged out.

    Iceberg's semantics: a ref expires once its snapshot is older than its ``max-ref-age-ms``. A pin still at
    :data:`RETAINED_REF_AGE_MS` gets ``now - snapshot time + max_ref_age``, so it lasts ``max_ref_age`` from now.
    """
    snaps: dict[tuple[str, int], SnapshotInfo] = {(s.table, s.snapshot_id): s for s in inv.snapshots}
    ageing: list[Ageing] = []
    aged: list[TagInfo] = []
    now = inv.observed_at
    for tag in inv.tags:
        node = (_K_TAG, f"{tag.table}#{tag.tag}")
        pin = pins.get(node)
        snap = snaps.get((tag.table, tag.snapshot_id))
        if pin is None or node in reached or snap is None:
            continue
        if tag.max_ref_age_ms is None or tag.max_ref_age_ms >= RETAINED_REF_AGE_MS:
            age = now - snap.timestamp + max_ref_age
            ageing.append(Ageing(tag, now + max_ref_age, max(int(age.total_seconds() * 1000), 0)))
            continue
        until = snap.timestamp + timedelta(milliseconds=tag.max_ref_age_ms)
        if until > now:
            ageing.append(Ageing(tag, until, None))
        else:
            aged.append(tag)
    return ageing, aged


__all__ = [
    "AGEING",
    "PREFIXES",
    "RETAINED_REF_AGE_MS",
    "Ageing",
    "DependentPin",
    "DependentPinError",
    "ageing_pins",
    "dependent_pins",
    "dependent_tag",
    "is_pin_edge",
    "parse_dependent_tag",
    "pin_edge",
    "recorded_pin",
    "tag_part",
]
