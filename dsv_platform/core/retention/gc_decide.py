"""One GC decision per owned node (see :mod:`dsv_platform.core.retention.gc`).

A node reached from a root is kept with that root; otherwise it is kept when
inside the safety window (or, for tags, pinned by a build in flight) and
collectable, with the action that applies it, when not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from dsv_platform.core.lineage.lineage import Node, NodeKind, node_label
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.retention.dependent_pins import AGEING, RETAINED_REF_AGE_MS, Ageing, DependentPin, parse_dependent_tag
from dsv_platform.core.retention.gc_graph import GcGraph
from dsv_platform.core.retention.gc_inventory import Inventory, RealizationInfo, TagInfo
from dsv_platform.core.retention.gc_plan import Action, Decision

S = RealizationState
IN_FLIGHT = frozenset({S.STAGING.value, S.SEALED.value})
TERMINAL_DONE = frozenset({S.EXPIRED.value, S.REDACTED.value})
SAFETY_WINDOW = "within the safety window"
REACHABLE = "reachable from a root"
_REFERENCED = "referenced only by unreachable or expired nodes"
_UNREFERENCED = "referenced by nothing"
_DELETE_OBJECT = Action.DELETE_OBJECT.value
_EXPIRE_REALIZATION = Action.EXPIRE_REALIZATION.value


@dataclass
class Decider:
    """Decides nodes against what the roots reached and the safety-window horizon."""

    inv: Inventory
    graph: GcGraph
    reached_by: dict[Node, str]
    horizon: datetime
    pins: dict[Node, DependentPin] = field(default_factory=dict)  # dependent pins (dependent_pins.py)
    ageing: dict[Node, Ageing] = field(default_factory=dict)  # those whose owner is no longer retained, until they age out
    decisions: list[Decision] = field(default_factory=list)

    def recent(self, at: datetime | None) -> bool:
        return at is None or at > self.horizon

    def kept_by_root(self, node: Node, size: int) -> Decision | None:
        rid = self.reached_by.get(node)
        if rid is None:
            return None
        return Decision(node[0], node[1], True, REACHABLE, rid, None, size)

    def decide_all(self) -> list[Decision]:
        sizes = self.graph.manifest_bytes
        for r in self.inv.realizations:
            self.realization(r, sizes)
        self.objects()
        self.staging()
        self.iceberg_tags()
        self.iceberg_files()
        return self.decisions

    def realization(self, r: RealizationInfo, sizes: dict[str, int]) -> None:
        append, manifest_hash = self.decisions.append, r.manifest_hash
        node = (NodeKind.REALIZATION, manifest_hash or f"candidate-{r.id}")
        size = sizes.get(manifest_hash or "", 0)
        rid = self.reached_by.get(node) if manifest_hash else None
        if rid is not None:
            append(Decision(node[0], node[1], True, REACHABLE, rid, None, size, f"state {r.state}"))
        elif r.state in TERMINAL_DONE:
            append(Decision(node[0], node[1], False, f"already {r.state}", None, None, size, f"realization {r.id}"))
        elif self.recent(r.created_at):
            append(Decision(node[0], node[1], True, SAFETY_WINDOW, None, None, size, f"state {r.state}, created {r.created_at.isoformat()}"))
        else:
            append(Decision(node[0], node[1], False, "no root reaches it", None, _EXPIRE_REALIZATION, size, f"realization {r.id}, state {r.state}"))
        if manifest_hash:
            root = self.reached_by.get((NodeKind.MANIFEST, manifest_hash))
            append(Decision(NodeKind.MANIFEST, manifest_hash, True, "audit metadata (kept after expiry)", root, None, 0))

    def objects(self) -> None:
        """The hot loop (one pass over every stored object): locals only, decisions built with ``tuple.__new__``."""
        append, reached, new = self.decisions.append, self.reached_by.get, tuple.__new__
        downstream, horizon, kind, delete = self.graph.downstream, self.horizon, NodeKind.OBJECT, _DELETE_OBJECT
        for digest, size, modified_at in self.inv.objects:
            node = (kind, digest)
            rid = reached(node)
            if rid is not None:
                append(new(Decision, (kind, digest, True, REACHABLE, rid, None, size, "")))
            elif modified_at is None or modified_at > horizon:
                append(new(Decision, (kind, digest, True, SAFETY_WINDOW, None, None, size, "" if modified_at else "modification time unknown")))
            else:
                why = _REFERENCED if node in downstream else _UNREFERENCED
                append(new(Decision, (kind, digest, False, why, None, delete, size, "")))

    def staging(self) -> None:
        for st in self.inv.staging:
            node = (NodeKind.STAGING, st.attempt_id)
            if self.recent(st.last_modified):
                self.decisions.append(Decision(node[0], node[1], True, "within the safety window (build may be in flight)", None, None, st.size))
            else:
                detail = f"last modified {st.last_modified.isoformat()}"
                self.decisions.append(Decision(node[0], node[1], False, "abandoned staging attempt", None, Action.ABANDON_STAGING.value, st.size, detail))

    def iceberg_tags(self) -> None:
        inv, append = self.inv, self.decisions.append
        snap_time = {(s.table, s.snapshot_id): s.timestamp for s in inv.snapshots}
        in_flight_keys = {f"{r.dataset}-{r.version}-{r.logical_key}" for r in inv.realizations if r.state in IN_FLIGHT}
        for tag in inv.tags:
            node = (NodeKind.ICEBERG_TAG, f"{tag.table}#{tag.tag}")
            d = self.kept_by_root(node, 0)
            pin = self.pins.get(node)
            if d is not None:
                append(d if pin is None else self.pin_upkeep(d, tag))
            elif tag.tag in in_flight_keys:
                append(Decision(node[0], node[1], True, "pinned for a build in flight", None, None, 0))
            elif self.recent(snap_time.get((tag.table, tag.snapshot_id))):
                append(Decision(node[0], node[1], True, SAFETY_WINDOW, None, None, 0))
            elif pin is not None:
                why = f"past its max ref age ({tag.max_ref_age_ms} ms): {node_label(pin.owner)} is no longer retained"
                append(Decision(node[0], node[1], False, why, None, Action.REMOVE_TAG.value, 0, f"snapshot {tag.snapshot_id}"))
            else:
                scratch = parse_dependent_tag(tag.tag) is not None
                why = "named like a dependent pin, but the registry records no such pin (scratch)" if scratch else "no kept realization pins it"
                why = "staging branch of a blocked load, past its max ref age (write-audit-publish)" if tag.branch else why
                append(Decision(node[0], node[1], False, why, None, Action.REMOVE_TAG.value, 0, f"snapshot {tag.snapshot_id}"))

    def pin_upkeep(self, kept: Decision, tag: TagInfo) -> Decision:
        """A kept dependent pin, with the ref age to write when it is not the one it should carry (retained, or ageing out)."""
        ageing = self.ageing.get(kept.node)
        if ageing is not None and kept.root == f"{AGEING}:{kept.node[1]}":
            age = ageing.set_age_ms
            reason = f"no longer retained: ages out at {ageing.until.isoformat()}"
        else:
            age = None if tag.max_ref_age_ms == RETAINED_REF_AGE_MS else RETAINED_REF_AGE_MS
            reason = kept.reason
        action, detail = (None, "") if age is None else (Action.SET_REF_AGE.value, f"max_ref_age_ms={age}")
        return kept._replace(reason=reason, action=action, detail=detail)

    def iceberg_files(self) -> None:
        inv, append = self.inv, self.decisions.append
        for snap in inv.snapshots:
            node = (NodeKind.ICEBERG_SNAPSHOT, f"{snap.table}@{snap.snapshot_id}")
            d = self.kept_by_root(node, 0)
            if d is not None:
                append(d)
            elif self.recent(snap.timestamp):
                append(Decision(node[0], node[1], True, SAFETY_WINDOW, None, None, 0))
            else:
                append(Decision(node[0], node[1], False, "no kept realization or tag needs it", None, Action.EXPIRE_SNAPSHOT.value, 0, snap.table))
        for f in inv.data_files:
            node = (NodeKind.DATA_FILE, f.path)
            d = self.kept_by_root(node, f.size)
            if d is not None:
                append(d)
            elif self.recent(f.modified_at):
                append(Decision(node[0], node[1], True, SAFETY_WINDOW, None, None, f.size))
            else:
                append(Decision(node[0], node[1], False, "no live snapshot references it", None, Action.DELETE_DATA_FILE.value, f.size, f.table))
        for raw in inv.raw_batches:
            node = (NodeKind.RAW_BATCH, raw.batch_ref)
            d = self.kept_by_root(node, raw.size)
            fallback = Decision(node[0], node[1], False, "no live snapshot holds its rows", None, None, raw.size, "its object is collected with the objects")
            append(d if d is not None else fallback)
