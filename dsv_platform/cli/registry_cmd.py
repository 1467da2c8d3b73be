"""`dsv resolve`, `dsv versions`, `dsv alias`, `dsv verify`: reading the metadata authority."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.cli.progress import row_progress
from dsv_platform.core.errors import ConfigurationError, ResolutionError
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.publication.refs import HASH_PREFIX, DatasetRef, parse_ref
from dsv_platform.services.publication.datasets import Dataset, load_manifest, read_object
from dsv_platform.services.publication.record import dataset_record

if TYPE_CHECKING:
    from dsv_platform.services.trust.signing import SignatureStatus


def _record(r: Realization) -> dict[str, Any]:
    return {
        "ref": r.ref,
        "dataset": r.dataset,
        "version": r.version,
        "human_version": r.human_version,
        "state": r.state.name,
        "manifest_hash": r.manifest_hash,
        "content_hash": r.content_hash,
        "schema_hash": r.schema_hash,
        "created_at": r.created_at.isoformat(),
        "created_by": r.created_by,
        "published_at": r.published_at.isoformat() if r.published_at else None,
        "redaction_generation": r.redaction_generation,
    }


def _failure_json(exc: ResolutionError) -> str:
    return json.dumps({"error": exc.kind.name, "exit_code": exc.exit_code, "ref": exc.ref, "message": str(exc), "detail": exc.detail}, default=str)


@with_platform
def _resolve(args: argparse.Namespace, platform: Platform) -> int:
    from dsv_platform.services.trust.access import authorize  # imported here (with the trust service): `dsv resolve --help` stays light
    from dsv_platform.services.trust.signing import require_trusted

    registry = platform.registry
    try:
        ref = parse_ref(args.ref)
        access = authorize(platform, ref.name, ref.version, purpose=args.purpose, ref=args.ref)  # ACCESS_DENIED before anything is revealed
        realization = registry.resolve_ref(ref, actor=platform.actor)
        manifest = load_manifest(registry, realization)
        signature = require_trusted(platform, realization) if args.verify_signature else None
    except ResolutionError as exc:
        if args.json:
            print(_failure_json(exc))
        raise
    record = dataset_record(registry, realization, manifest)  # the design's record: purpose, retention, features, pins, code
    doc = _record(realization) | {"rows": manifest.rows, "partitions": len(manifest.partitions), "access": access.to_document()} | record
    if signature is not None:
        doc["signature"] = signature.to_document()
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(
            f"{realization.ref}\n  state {realization.state.name}  version {realization.human_version}  rows {manifest.rows:,}  "
            f"partitions {len(manifest.partitions)}\n  content {realization.content_hash}\n  schema  {realization.schema_hash}"
        )
        _print_record(record)
        if access.withheld:
            print(f"  withheld for {access.identity}: {', '.join(access.withheld)}")
        if signature is not None:
            print(f"  signature {signature.status}: {signature.reason}")
    return 0


def _print_record(record: dict[str, Any]) -> None:
    from dsv_platform.core.config.dataset_record import feature_names

    code = record["code"] or {}
    print(f"  purpose {record['purpose'] or '-'}  owner {record['owner'] or '-'}  retained until {record['retention_until'] or '-'}")
    print(f"  features {', '.join(feature_names(record['feature_versions'])) or '-'}")
    print(f"  code {code.get('commit', '-')}{' (dirty)' if code.get('dirty') else ''} in {code.get('repo') or '-'}")


@with_platform
def _versions(args: argparse.Namespace, platform: Platform) -> int:
    name, _, version = args.name.partition(":")  # NAME:VERSION, as every other output names a dataset, keeps that version's
    rows = [_record(r) for r in platform.registry.versions(name, include_candidates=args.all) if not version or r.version == version]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        known = sorted({d.name for d in platform.config.datasets})
        print(f"no realizations of {args.name}" + ("" if name in known else f" (datasets of the configuration: {', '.join(known) or 'none'})"))
        return 0
    for r in rows:
        print(f"{r['version']:<6} {r['human_version'] or '-':<14} {r['state']:<12} {r['manifest_hash'] or '-'}  {r['created_at'][:19]}")
    return 0


def _alias_ref(text: str) -> DatasetRef:
    ref = parse_ref(text)
    if ref.alias is None:
        raise ConfigurationError(f"{text!r}: name the alias as NAME:VERSION@ALIAS")
    return ref


def _manifest_hash_arg(option: str, text: str) -> str:
    """A manifest hash given as ``<64 lowercase hex>`` or ``sha256:<64 hex>``; anything else is a usage error (exit 2), not NOT_FOUND."""
    bare = text.removeprefix(HASH_PREFIX)
    if len(bare) != 64 or any(c not in "0123456789abcdef" for c in bare):
        raise ConfigurationError(f"{option} {text!r}: not a manifest hash; expected 64 lowercase hex digits (optionally prefixed sha256:)")
    return bare


@with_platform
def _alias_set(args: argparse.Namespace, platform: Platform) -> int:
    ref = _alias_ref(args.ref)
    args.manifest_hash = _manifest_hash_arg("manifest hash", args.manifest_hash)
    args.expect = _manifest_hash_arg("--expect", args.expect) if args.expect else None
    reason = args.reason or ""
    from dsv_platform.core.trust.trust import Role  # imported here: `dsv resolve` (same module) stays light
    from dsv_platform.services.trust import trust

    grant = trust.require(platform, Role.PUBLISHER, definition=f"{ref.name}:{ref.version}")  # moving a name is publishing (docs/trust.md)
    move = platform.registry.set_alias(
        ref.name, ref.version, ref.alias or "", args.manifest_hash, expect=args.expect, actor=platform.actor, reason=reason, audit_as=grant.identity
    )  # the alias.move audit entry is written in the move's transaction
    print(
        json.dumps({"alias": str(ref), "target": args.manifest_hash, "generation": getattr(move, "generation", None)})
        if args.json
        else f"{ref} -> {args.manifest_hash}"
    )
    return 0


@with_platform
def _alias_history(args: argparse.Namespace, platform: Platform) -> int:
    ref = _alias_ref(args.ref)
    moves = platform.registry.alias_history(ref.name, ref.version, ref.alias or "")
    docs = [
        {"generation": m.generation, "old_target": m.old_target, "new_target": m.new_target, "actor": m.actor, "reason": m.reason, "at": m.at.isoformat()}
        for m in moves
    ]
    if args.json:
        print(json.dumps(docs, indent=2))
    else:
        for d in docs:
            print(f"#{d['generation']:<3} {str(d['at'])[:19]}  {d['old_target'] or '(created)'} -> {d['new_target']}  by {d['actor']}  {d['reason']}")
    return 0


@with_platform
def _verify(args: argparse.Namespace, platform: Platform) -> int:
    from dsv_platform.services.trust.data_files import check_manifest_sources
    from dsv_platform.services.trust.signing import check_signature, require_trusted

    registry = platform.registry
    try:
        realization = registry.resolve_ref(args.ref, actor=platform.actor)
        dataset = Dataset(realization=realization, manifest=load_manifest(registry, realization), store=platform.store)
        with row_progress("verifying", dataset.manifest.rows) as advance:
            for entry in dataset.partitions:
                read_object(dataset.store, dataset.ref, entry)  # the object's file hash
                if advance:
                    advance(entry.rows)
            if dataset.manifest.splits is not None:
                dataset.split_assignment  # noqa: B018 - reading verifies the assignment object
            content = dataset.verify_content()
        data_files = check_manifest_sources(platform, dataset.manifest.sources)  # the pinned canonical files, against their digests (CORRUPT)
        splits = _splits(platform, dataset) if args.splits else None
    except ResolutionError as exc:
        if args.json:
            print(_failure_json(exc))
        raise
    signature = check_signature(platform, realization)
    who = _provenance(platform, realization, signature)
    result: dict[str, Any] = {"ref": dataset.ref, "ok": signature.trusted, "objects": len(dataset.partitions), "content_hash": content}
    result["data_files"] = data_files
    if args.splits:
        result["splits"] = splits
    result |= who | {"signature": signature.to_document()}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{'OK' if signature.trusted else 'UNTRUSTED'} {dataset.ref}: {len(dataset.partitions)} objects and the content hash {content} verified")
        print(f"  built by {who['built_by']}, published by {who['published_by'] or '-'}, approved by {', '.join(who['approved_by']) or '-'}")
        if (launch := who["launch"]) is not None:
            state = "verified launch request" if launch["verified"] else f"unverified launch: {launch['reason']}"
            print(f"  Dagster run {launch['run_id']} as {launch['service']!r}: {state}")
        print(f"  signature {signature.status}: {signature.reason} (signer {signature.signer or '-'}, keyid {signature.keyid or '-'})")
        print(f"  {_files_line(data_files)}")
        if args.splits:
            print(f"  {_splits_line(splits)}")
    if not signature.trusted:
        require_trusted(platform, realization)  # raises UNTRUSTED (exit 13) naming the ref and what failed
    return 0


def _splits(platform: Platform, dataset: Dataset) -> dict[str, Any] | None:
    from dsv_platform.services.publication.split_verify import verify_splits

    checked = verify_splits(platform, dataset)  # CORRUPT (exit 6) when the recomputation differs
    return None if checked is None else checked.to_document()


def _splits_line(doc: dict[str, Any] | None) -> str:
    if doc is None:
        return "split assignment: none recorded"
    counts = ", ".join(f"{k} {v}" for k, v in doc["recomputed"]["counts"].items())
    return f"split assignment recomputed from its policy {doc['policy']} over {doc['rows']} rows: equal to the stored one ({counts})"


def _files_line(doc: dict[str, Any]) -> str:
    line = f"source data files: {doc['files']} ({doc['bytes']} bytes) match the digests recorded when they were written"
    if doc["unverified"]:
        line += f"; {len(doc['unverified'])} unverified (written before digests were recorded)"
    if doc["not_checked"]:
        line += f"; not checked (snapshot gone): {', '.join(doc['not_checked'])}"
    return line


def _provenance(platform: Platform, realization: Realization, signature: SignatureStatus) -> dict[str, Any]:
    """Who built, published and approved it: the signed statement's names where it verifies, else the registry's records."""
    from dsv_platform.services.trust.signing import approvers, built_by

    trusted = signature.status == "valid"
    return {
        "built_by": (signature.builder if trusted else None) or built_by(platform, realization),
        "published_by": signature.publisher if trusted else None,
        "approved_by": approvers(platform, realization),
        "launch": _launch(platform, realization),
    }


def _launch(platform: Platform, realization: Realization) -> dict[str, Any] | None:
    """Who launched its Dagster run: ``verified`` when a signed launch request proved ``launcher`` (None: not built in Dagster)."""
    from dsv_platform.services.trust import trust

    launch = trust.records(platform).launch_of(realization.id)
    if launch is None:
        return None
    return {"launcher": launch.launcher, "verified": launch.launcher is not None, "service": launch.service, "run_id": launch.run_id,
            "reason": launch.reason}  # fmt: skip


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("resolve", help="resolve a reference to exactly one realization, or a typed failure")
    p.add_argument("ref", help="NAME:VERSION, NAME:VERSION@sha256:<hash> or NAME:VERSION@ALIAS")
    p.add_argument("--purpose", help="why you read it; required where the definition declares access purposes (exit 7 without a grant for it)")
    p.add_argument("--verify-signature", action="store_true", help="also verify the publisher's signed statement (exit 13 UNTRUSTED)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_resolve)

    p = sub.add_parser("versions", help="realizations of a dataset with their states, newest first")
    p.add_argument("name", metavar="NAME[:VERSION]", help="a dataset (fraud_training_set), or one of its versions (fraud_training_set:v6)")
    p.add_argument("--all", action="store_true", help="include candidates that were never published")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_versions)

    alias = sub.add_parser("alias", help="move or inspect an alias").add_subparsers(dest="alias_command", metavar="ACTION")
    alias.required = True
    p = alias.add_parser("set", help="point NAME:VER@ALIAS at a published manifest, by compare-and-swap")
    p.add_argument("ref", metavar="NAME:VER@ALIAS")
    p.add_argument("manifest_hash")
    p.add_argument("--expect", metavar="OLD", help="the alias's current target; the move is refused if it has moved (omit when creating)")
    p.add_argument("--reason")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_alias_set)
    p = alias.add_parser("history", help="every move of an alias")
    p.add_argument("ref", metavar="NAME:VER@ALIAS")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_alias_history)

    p = sub.add_parser("verify", help="re-hash every object and the content, show who built, published, approved it and check its signature (6, 13)")
    p.add_argument("ref")
    p.add_argument("--splits", action="store_true", help="also recompute the split assignment from its policy and compare it with the stored one (6)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_verify)
