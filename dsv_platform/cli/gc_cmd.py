"""`dsv gc plan|apply|why|cost` and `dsv retention add|list|release`."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.cli.gc_refs import check_root_ref
from dsv_platform.core.errors import ConfigurationError, DsvError, FileAccessError, InputError, ReferenceSyntaxError
from dsv_platform.core.publication.refs import parse_ref
from dsv_platform.core.retention.gc import GcPlan, GcPolicy, build_graph, plan_gc, root_costs
from dsv_platform.core.trust.trust import Role
from dsv_platform.services.retention import gc as gc_adapter
from dsv_platform.services.trust import trust
from dsv_platform.services.trust.trust import gatekeeper


def backends(platform: Platform) -> dict[str, Any]:
    """Registry, object store, and (when they exist) the canonical tables and the landing index."""
    return {"registry": platform.registry, "store": platform.store, "tables": platform.existing_tables(), "landing": platform.existing_landing()}


def _policy(args: argparse.Namespace, platform: Platform) -> GcPolicy:
    """The configuration's GC policy (platform.yaml ``gc:``), its window overridden by ``--safety-window-hours``."""
    return platform.config.options.gc.with_hours(args.safety_window_hours, where="--safety-window-hours")


def _parse_time(option: str, text: str) -> datetime:
    """An ISO time (UTC when it names no offset); anything else is a one-line usage error naming the option."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ConfigurationError(f"{option} {text!r}: not an ISO time such as 2026-03-14T12:00:00+00:00") from exc
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _now(args: argparse.Namespace) -> datetime | None:
    return _parse_time("--now", args.now) if getattr(args, "now", None) else None


def _read_plan(path_text: str) -> GcPlan:
    """A plan written by ``dsv gc plan --out``; a missing or malformed file is a one-line error naming it."""
    path = Path(path_text)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FileAccessError(f"{path}: cannot read the plan file ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not a plan file (not UTF-8 text)") from exc
    try:
        return GcPlan.from_document(json.loads(text))
    except DsvError as exc:
        raise InputError(f"{path}: {exc}") from exc
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise InputError(f"{path}: not a plan written by `dsv gc plan --out` ({type(exc).__name__}: {exc})") from exc


def _inventory(args: argparse.Namespace, platform: Platform) -> tuple[dict[str, Any], Any]:
    b = backends(platform)
    inv = gc_adapter.collect_inventory(b["registry"], b["store"], tables=b["tables"], landing=b["landing"], now=_now(args), policy=_policy(args, platform))
    return b, inv


@with_platform
def _plan(args: argparse.Namespace, platform: Platform) -> int:
    _, inv = _inventory(args, platform)
    plan = plan_gc(inv, _policy(args, platform))
    doc = plan.to_document()
    if args.out:
        Path(args.out).write_text(json.dumps(doc))
    if args.json:
        print(
            json.dumps(
                {k: doc[k] for k in ("format", "created_at", "watermark", "safety_window_s", "figures", "dangling_roots")}
                | {
                    "collectable": [{"node": f"{d.kind}:{d.id}", "reason": d.reason, "action": d.action, "bytes": d.bytes} for d in plan.collectable()],
                    "upkeep": [{"node": f"{d.kind}:{d.id}", "reason": d.reason, "action": d.action, "detail": d.detail} for d in plan.upkeep()],
                },
                indent=2,
            )
        )
        return 0
    print(f"GC plan at {plan.created_at.isoformat()} (safety window {plan.safety_window_s / 3600:g} h)")
    for key, value in plan.figures().items():
        print(f"  {key:<32} {value}")
    for root in plan.dangling_roots:
        print(f"  warning: root {root} reaches nothing")
    for d in plan.collectable():
        print(f"  collect {d.kind}:{d.id}  ({d.reason}; {d.action}; {d.bytes} bytes)")
    for d in plan.upkeep():
        print(f"  keep {d.kind}:{d.id}  ({d.reason}; {d.action} {d.detail})")
    if args.out:
        print(f"plan written to {args.out}; apply with `dsv gc apply --plan {args.out} --yes`")
    return 0


@with_platform
def _apply(args: argparse.Namespace, platform: Platform) -> int:
    if args.plan:
        b, plan = backends(platform), _read_plan(args.plan)
    else:
        b, inv = _inventory(args, platform)
        plan = plan_gc(inv, _policy(args, platform))
    report = gc_adapter.apply_plan(
        plan, registry=b["registry"], store=b["store"], tables=b["tables"], dry_run=not args.yes, actor=platform.actor, gate=gatekeeper(platform)
    )
    if args.json:
        print(json.dumps(report.to_document(), indent=2))
    else:
        print(("DRY RUN (pass --yes to apply): " if report.dry_run else "") + report.summary())
    return 0


def _realization_of(text: str, platform: Platform) -> str:
    """The manifest hash a dataset reference names (``NAME:VERSION@sha256:HASH`` as written; an alias or ``NAME:VERSION``
    as the registry resolves it, a typed failure otherwise); ``text`` itself when it names no dataset the registry holds."""
    try:
        ref = parse_ref(text)
    except ReferenceSyntaxError:
        return text
    if ref.manifest_hash or not platform.registry.versions(ref.name, include_candidates=True):  # no dataset of that name: a kind:id
        return ref.manifest_hash or text
    return str(platform.registry.resolve_ref(ref, actor=platform.actor).manifest_hash)


@with_platform
def _why(args: argparse.Namespace, platform: Platform) -> int:
    _, inv = _inventory(args, platform)
    plan = _read_plan(args.plan) if args.plan else plan_gc(inv, _policy(args, platform))
    graph = build_graph(inv)
    explanations = plan.explain(args.object, graph) or plan.explain(_realization_of(args.object, platform), graph)
    if not explanations:
        raise ConfigurationError(f"{args.object!r} is nothing the platform owns (not in the GC inventory)")
    if args.json:
        print(json.dumps([e.to_document() for e in explanations], indent=2))
    else:
        print("\n".join(e.text() for e in explanations))
    return 0


@with_platform
def _cost(args: argparse.Namespace, platform: Platform) -> int:
    _, inv = _inventory(args, platform)
    plan = plan_gc(inv, _policy(args, platform))
    rows = sorted(root_costs(inv, plan), key=lambda r: -r["bytes"])
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        print(f"{r['bytes']:>14} B  {r['exclusive_bytes']:>14} B only  {r['kind']:<16} {r['ref']}  ({r['owner']}: {r['reason']})")
    return 0


def _root_doc(root: Any) -> dict[str, Any]:
    return dict(root.as_dict())


@with_platform
def _retention_add(args: argparse.Namespace, platform: Platform) -> int:
    expires = _parse_time("--expires", args.expires) if args.expires else None
    trust.require(platform, Role.OPERATOR)  # retention changes are an operator's (docs/trust.md)
    check_root_ref(args.ref, platform)
    rid = platform.registry.add_retention_root(args.kind, args.ref, args.reason, args.owner or platform.actor, expires)
    print(json.dumps({"id": rid}) if args.json else f"retention root #{rid}: {args.kind} {args.ref}")
    return 0


@with_platform
def _retention_list(args: argparse.Namespace, platform: Platform) -> int:
    roots = platform.registry.list_retention_roots(None if args.all else datetime.now(UTC))
    docs = [_root_doc(r) for r in roots]
    if args.json:
        print(json.dumps(docs, indent=2))
        return 0
    for d in docs:
        status = "released" if d["released_at"] else ("expires " + d["expires_at"][:19] if d["expires_at"] else "active")
        print(f"#{d['id']:<5} {d['kind']:<16} {d['ref']}  owner {d['owner']}  ({d['reason']})  {status}")
    if not docs:
        print("no retention roots" + ("" if args.all else " in force (--all: released and expired ones too)"))
    return 0


@with_platform
def _retention_release(args: argparse.Namespace, platform: Platform) -> int:
    from dsv_platform.services.retention.roots import release_root

    root, now = release_root(platform, args.id, reason=args.reason)
    text = f"released retention root #{root.id} ({root.kind} {root.ref})" if now else f"retention root #{root.id} ({root.kind} {root.ref}) was released already"
    print(json.dumps(_root_doc(root)) if args.json else text)
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true")
    p.add_argument("--safety-window-hours", type=float, default=None, help="keep anything newer than this (default: platform.yaml gc:, else 24)")
    p.add_argument("--now", help=argparse.SUPPRESS)  # planning clock for tests and what-if runs


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    gc = sub.add_parser("gc", help="reachability garbage collection: plan, apply (dry run by default), why").add_subparsers(dest="gc_command", metavar="ACTION")
    gc.required = True
    p = gc.add_parser("plan", help="what would be kept (and by which root) and what is collectable")
    _common(p)
    p.add_argument("--out", metavar="FILE", help="write the full plan document here")
    p.set_defaults(handler=_plan)
    p = gc.add_parser("apply", help="apply a plan (a fresh one unless --plan); a dry run unless --yes")
    _common(p)
    p.add_argument("--plan", metavar="FILE", help="a plan written by `dsv gc plan --out`; refused if the registry changed since")
    p.add_argument("--yes", action="store_true", help="really delete")
    p.set_defaults(handler=_apply)
    p = gc.add_parser("why", help="why an object (digest, manifest hash, kind:id, snapshot table@id, dataset reference) is kept or collectable")
    _common(p)
    p.add_argument("object")
    p.add_argument("--plan", metavar="FILE")
    p.set_defaults(handler=_why)
    p = gc.add_parser("cost", help="bytes each retention root keeps (all it reaches, and what only it keeps)")
    _common(p)
    p.set_defaults(handler=_cost)

    ret = sub.add_parser("retention", help="retention roots: what GC must keep, who asked, until when").add_subparsers(
        dest="retention_command", metavar="ACTION"
    )
    ret.required = True
    p = ret.add_parser("add", help="add a root")
    p.add_argument("kind", choices=["model_version", "legal_hold", "report", "experiment", "alias", "rollback_window"])
    p.add_argument("ref", help="NAME:VER@sha256:<hash>, NAME:VER@ALIAS, NAME:VER~N (newest N), or KIND:ID such as model_run:<hash>")
    p.add_argument("--reason", required=True)
    p.add_argument("--owner")
    p.add_argument("--expires", help="ISO time (UTC if no offset)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_retention_add)
    p = ret.add_parser("list", help="active roots (all with --all)")
    p.add_argument("--all", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_retention_list)
    p = ret.add_parser("release", help="release a root")
    p.add_argument("id", type=int)
    p.add_argument("--reason", required=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_retention_release)
