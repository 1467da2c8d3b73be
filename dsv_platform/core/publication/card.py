"""The dataset card of a realization (``dsv-card/1``): a datasheet built from the records, never written by hand.

:func:`build_card` turns the manifest document, the registered recipe, the sources' contracts, the quality
report and what the registry and lineage say (uses, aliases, approvals, retention) into the sections of
"Datasheets for Datasets": purpose, composition, collection, preprocessing, quality, privacy, uses and
maintenance. :func:`card_markdown` writes the same card as Markdown. Pure: the inputs are plain documents,
gathered by services/publication/card.py. Details: docs/publication.md
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsv_platform.core import canonical_json

FORMAT = "dsv-card/1"
SECTIONS = ("purpose", "composition", "collection", "preprocessing", "quality", "privacy", "uses", "maintenance")
_RECIPE_STEPS = ("base", "as_of_joins", "label", "features", "observation_window", "population_filter", "derive", "aggregate", "split_policy")


@dataclass(frozen=True)
class CardInputs:
    """Everything a card is built from, as plain documents (see :func:`build_card`)."""

    ref: str
    manifest: Mapping[str, Any]  # the manifest document (Manifest.to_document)
    recipe: Mapping[str, Any]  # the registered recipe (purpose, description, owner, base, joins, ...)
    owner: str | None
    sources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # table -> {owner, description, version}
    quality_report: Mapping[str, Any] | None = None  # the stored report document (dsv-quality-report/1)
    quality_report_object: str | None = None
    label_balance: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # column -> value -> rows
    restricted_columns: Sequence[str] = ()
    realization: Mapping[str, Any] = field(default_factory=dict)  # state, human_version, published_at, redaction_generation
    uses: Mapping[str, Sequence[str]] = field(default_factory=dict)  # consumers, models, artifacts
    aliases: Sequence[str] = ()
    approval: Mapping[str, Any] | None = None
    retention_until: str | None = None


def build_card(inputs: CardInputs) -> dict[str, Any]:
    """The structured card: ``format``, ``ref``, the identity hashes and one object per section of :data:`SECTIONS`."""
    m = inputs.manifest
    card: dict[str, Any] = {
        "format": FORMAT,
        "ref": inputs.ref,
        "dataset": m["dataset"],
        "version": m["version"],
        "manifest_hash": canonical_json.sha256_hex(m),
        "content_hash": m["content_hash"],
        "purpose": {"purpose": inputs.recipe.get("purpose"), "description": inputs.recipe.get("description"), "owner": inputs.owner},
        "composition": _composition(inputs),
        "collection": _collection(inputs),
        "preprocessing": _preprocessing(inputs),
        "quality": _quality(inputs),
        "privacy": {
            "redaction_generation": inputs.realization.get("redaction_generation"),
            "restricted_columns": list(inputs.restricted_columns),
            "excluded_batches": m["parameters"].get("excluded_batches"),
        },
        "uses": {k: list(inputs.uses.get(k, ())) for k in ("consumers", "models", "artifacts")},
        "maintenance": {
            "state": inputs.realization.get("state"),
            "human_version": inputs.realization.get("human_version"),
            "published_at": inputs.realization.get("published_at"),
            "retention_until": inputs.retention_until,
            "aliases": list(inputs.aliases),
            "approval": dict(inputs.approval) if inputs.approval else None,
        },
    }
    return card


def _composition(inputs: CardInputs) -> dict[str, Any]:
    m = inputs.manifest
    splits = m.get("splits")
    return {
        "rows": m["rows"],
        "partitions": len(m["partitions"]),
        "partition_rows": {p["key"]: p["rows"] for p in m["partitions"]},
        "split_sizes": dict(splits["counts"]) if splits else {},
        "label": m.get("labels"),
        "label_balance": {col: dict(counts) for col, counts in inputs.label_balance.items()},
        "columns": [c["name"] for c in (m.get("contract") or {}).get("columns", [])],
    }


def _collection(inputs: CardInputs) -> dict[str, Any]:
    m = inputs.manifest
    joins = inputs.recipe.get("as_of_joins") or []
    lateness = [{k: j.get(k) for k in ("source", "lag", "max_age", "as_known_at") if j.get(k) is not None} for j in joins]
    sources = []
    for s in m["sources"]:
        about = inputs.sources.get(s["table"], {})
        entry = {"table": s["table"], "snapshot_id": s["snapshot_id"], "tag": s["tag"], "owner": about.get("owner"), "version": about.get("version")}
        sources.append(entry)
    return {
        "sources": sources,
        "feature_versions": dict(m["feature_versions"]),
        "watermark": m["watermark"],
        "watermark_rule": m["parameters"].get("watermark_rule"),
        "observation_window": m["observation_window"],
        "lateness": lateness,
    }


def _preprocessing(inputs: CardInputs) -> dict[str, Any]:
    recipe = inputs.recipe
    steps = {k: recipe[k] for k in _RECIPE_STEPS if k in recipe}
    return {"recipe_hash": inputs.manifest["parameters"].get("recipe_hash"), "population_rows": inputs.manifest["parameters"].get("population_rows"), **steps}


def _quality(inputs: CardInputs) -> dict[str, Any]:
    report = inputs.quality_report
    if report is None:
        return {"report": inputs.quality_report_object, "passed": None, "gates": []}
    gates = [
        {"name": g["name"], "passed": bool(g["passed"]), "blocking": bool(g.get("blocking", True)), "observed": _observed(g.get("detail") or {})}
        for g in report.get("gates", [])
    ]
    return {"report": inputs.quality_report_object, "passed": bool(report.get("passed")), "gates": gates}


def _observed(detail: Mapping[str, Any]) -> str:
    """A gate's observed value in one line: its ``observed`` detail when it has one, else every detail ``key=value``."""
    if "observed" in detail:
        return str(detail["observed"])
    return ", ".join(f"{k}={v}" for k, v in sorted(detail.items())) or "-"


# ---------------------------------------------------------------- markdown


def card_markdown(card: Mapping[str, Any]) -> str:
    """The card as Markdown: a heading per section, the values as lists and tables."""
    out = [f"# Dataset card: {card['ref']}", "", f"Manifest `{card['manifest_hash']}`, content `{card['content_hash']}` ({card['format']}).", ""]
    p = card["purpose"]
    out += ["## Purpose and owner", "", f"- purpose: {p['purpose'] or '-'}", f"- description: {p['description'] or '-'}", f"- owner: {p['owner'] or '-'}", ""]
    out += _composition_md(card["composition"])
    out += _collection_md(card["collection"])
    pre = card["preprocessing"]
    out += ["## Preprocessing", "", f"- recipe: `{pre['recipe_hash']}`, population {pre.get('population_rows')} rows"]
    out += [f"- {k}: `{canonical_json.dumps(pre[k]).decode()}`" for k in _RECIPE_STEPS if k in pre] + [""]
    out += _quality_md(card["quality"])
    pv = card["privacy"]
    out += ["## Privacy", "", f"- redaction generation: {pv['redaction_generation'] if pv['redaction_generation'] is not None else 0}"]
    out += [f"- restricted columns: {', '.join(pv['restricted_columns']) or 'none'}", f"- quarantined batches not read: {pv['excluded_batches'] or 'none'}", ""]
    u = card["uses"]
    out += ["## Uses", ""] + [f"- {k}: {', '.join(u[k]) or 'none'}" for k in ("consumers", "models", "artifacts")] + [""]
    out += _maintenance_md(card["maintenance"])
    return "\n".join(out)


def _quality_md(q: Mapping[str, Any]) -> list[str]:
    verdict = "passed" if q["passed"] else "FAILED" if q["passed"] is False else "not read"
    out = ["## Quality", "", f"Report `{q['report'] or '-'}`: {verdict}.", "", "| gate | result | blocking | observed |", "|---|---|---|---|"]
    for g in q["gates"]:
        out.append(f"| {g['name']} | {'passed' if g['passed'] else 'FAILED'} | {'yes' if g['blocking'] else 'no (warning)'} | {_cell(g['observed'])} |")
    return [*out, ""]


def _maintenance_md(mt: Mapping[str, Any]) -> list[str]:
    a = mt["approval"] or {}
    approved = f"approved by {a['approved_by']} at {a['approved_at']}: {a['approval_reason']}" if a.get("approved_by") else "not approved"
    published = f"version {mt['human_version'] or '-'}, published {mt['published_at'] or '-'}"
    out = ["## Maintenance", "", f"- state: {mt['state'] or 'as of publication'} ({published})"]
    out += [f"- retention until: {mt['retention_until'] or 'not declared'}", f"- aliases: {', '.join(mt['aliases']) or 'none'}", f"- approval: {approved}"]
    return [*out, ""]


def _composition_md(c: Mapping[str, Any]) -> list[str]:
    splits = ", ".join(f"{k} {v:,}" for k, v in sorted(c["split_sizes"].items())) or "no split policy"
    label = c["label"]
    out = ["## Composition", "", f"- rows: {c['rows']:,}", f"- partitions: {c['partitions']}", f"- split sizes: {splits}"]
    out.append(f"- label: {label['name']}:{label['version']}" if label else "- label: none")
    for col, counts in c["label_balance"].items():
        out.append(f"- label balance of {col}: " + ", ".join(f"{v} {n:,}" for v, n in counts.items()))
    return [*out, f"- columns: {', '.join(c['columns'])}", ""]


def _collection_md(c: Mapping[str, Any]) -> list[str]:
    out = ["## Collection", "", "| source | pinned snapshot | tag | owner | contract version |", "|---|---|---|---|---|"]
    out += [f"| {s['table']} | {s['snapshot_id']} | {s['tag']} | {s['owner'] or '-'} | {s['version'] or '-'} |" for s in c["sources"]]
    window = canonical_json.dumps(dict(c["observation_window"] or {})).decode()
    lateness = "; ".join(", ".join(f"{k} {v}" for k, v in j.items()) for j in c["lateness"]) or "no joins"
    features = ", ".join(f"{name}:{v}" for name, v in sorted(c["feature_versions"].items())) or "none declared"
    out += ["", f"- watermark: {c['watermark'] or '-'} ({c['watermark_rule'] or '-'})", f"- observation window: {_cell(window)}"]
    return [*out, f"- feature versions: {features}", f"- lateness (as-of joins): {lateness}", ""]


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")
