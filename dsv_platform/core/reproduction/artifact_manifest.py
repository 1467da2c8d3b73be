"""The artifact manifest ("dsv-artifact/1"): what a report, figure or backtest was made of, and how to compare a rerun.

:func:`build_manifest` writes the document (exact keys, canonical JSON); its
SHA-256 is the manifest hash printed in every file of the artifact
(:func:`footer`). A :class:`Producer` computes the results and renders the
files; :func:`compare_results` checks a rerun at the stated precision.

Details: docs/artifacts.md
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from dsv_platform.core import canonical_json
from dsv_platform.core.errors import DsvError

if TYPE_CHECKING:  # annotations only: light commands that read lineage do not import pyarrow
    import pyarrow as pa

FORMAT = "dsv-artifact/1"
KEYS = ("format", "artifact", "produced_at", "produced_by", "code", "environment", "inputs", "parameters", "seed", "watermark", "results", "precision")
PRODUCED_BY_KEYS = ("identity", "producer")
CODE_KEYS = ("repo", "commit", "dirty")
ENVIRONMENT_KEYS = ("lockfile_sha256", "python", "runner_timezone", "tz_database")
TZ_DATABASE_KEYS = ("source", "version", "zones")
INPUT_KEYS = ("dataset", "ref", "snapshot_id", "dataset_hash")
EXACT = "exact"
FOOTER_PREFIX = "manifest sha256:"
_UTC_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z\Z")
_HEX64 = re.compile(r"^[0-9a-f]{64}\Z")
_FOOTER_HEX = re.compile(r"(?:sha256:)?([0-9a-f]{12,64})\b")


class ArtifactManifestError(DsvError):
    """An artifact manifest (or a producer's results) breaks the dsv-artifact/1 shape; the message names the key (INVALID)."""


@runtime_checkable
class Producer(Protocol):
    """What makes an artifact: deterministic ``compute`` of JSON results, ``render`` of files with the footer in them."""

    name: str
    precision: Mapping[str, Any]
    zones: tuple[str, ...]
    runner_timezone: str

    def compute(self, inputs: Mapping[str, pa.Table], parameters: Mapping[str, Any], seed: int) -> dict[str, Any]: ...

    def render(self, inputs: Mapping[str, pa.Table], results: Mapping[str, Any], footer: str) -> dict[str, bytes]: ...


# ---------------------------------------------------------------- the document


def _exact(doc: Any, where: str, keys: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping):
        raise ArtifactManifestError(f"artifact manifest: {where} must be an object, got {type(doc).__name__}")
    missing, extra = [k for k in keys if k not in doc], sorted(k for k in doc if k not in keys)
    if missing or extra:
        raise ArtifactManifestError(
            f"artifact manifest: {where} "
            + "; ".join(([f"is missing key(s) {missing}"] if missing else []) + ([f"has unknown key(s) {extra}"] if extra else []))
        )
    return doc


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ArtifactManifestError(f"artifact manifest: {where} must be a non-empty string, got {value!r}")
    return value


def check_rule(rule: Any, where: str) -> None:
    """A precision rule is ``"exact"`` or ``{"abs": "<decimal>"}`` / ``{"rel": "<decimal>"}`` (a non-negative decimal string)."""
    if rule == EXACT:
        return
    if isinstance(rule, Mapping) and len(rule) == 1 and next(iter(rule)) in ("abs", "rel"):
        bound = next(iter(rule.values()))
        try:
            ok = isinstance(bound, str) and Decimal(bound).is_finite() and Decimal(bound) >= 0
        except InvalidOperation:
            ok = False
        if ok:
            return
    raise ArtifactManifestError(f'artifact manifest: {where} must be "exact", {{"abs": "0.001"}} or {{"rel": "0.001"}}, got {rule!r}')


def validate_manifest(doc: Any) -> dict[str, Any]:
    """``doc`` checked against dsv-artifact/1 (exact keys at every level, types); a typed error names the first bad key."""
    d = _exact(doc, "the document", KEYS)
    if d["format"] != FORMAT:
        raise ArtifactManifestError(f"artifact manifest: format must be {FORMAT!r}, got {d['format']!r}")
    _text(d["artifact"], "artifact")
    if not isinstance(d["produced_at"], str) or not _UTC_ISO.match(d["produced_at"]):
        raise ArtifactManifestError(f"artifact manifest: produced_at must be ISO-8601 UTC ending in Z, got {d['produced_at']!r}")
    by = _exact(d["produced_by"], "produced_by", PRODUCED_BY_KEYS)
    _text(by["identity"], "produced_by.identity")
    if ":" not in _text(by["producer"], "produced_by.producer"):
        raise ArtifactManifestError(f"artifact manifest: produced_by.producer must be module:ATTRIBUTE, got {by['producer']!r}")
    code = _exact(d["code"], "code", CODE_KEYS)
    _text(code["repo"], "code.repo")
    _text(code["commit"], "code.commit")
    if not isinstance(code["dirty"], bool):
        raise ArtifactManifestError(f"artifact manifest: code.dirty must be true or false, got {code['dirty']!r}")
    env = _exact(d["environment"], "environment", ENVIRONMENT_KEYS)
    for key in ("lockfile_sha256", "python", "runner_timezone"):
        _text(env[key], f"environment.{key}")
    tz = _exact(env["tz_database"], "environment.tz_database", TZ_DATABASE_KEYS)
    if not isinstance(tz["zones"], Mapping):
        raise ArtifactManifestError("artifact manifest: environment.tz_database.zones must be an object of zone -> sha256")
    _check_inputs(d["inputs"])
    for key in ("parameters", "results", "precision"):
        if not isinstance(d[key], Mapping):
            raise ArtifactManifestError(f"artifact manifest: {key} must be an object, got {type(d[key]).__name__}")
    for name, rule in d["precision"].items():
        check_rule(rule, f"precision.{name}")
    if not isinstance(d["seed"], int) or isinstance(d["seed"], bool):
        raise ArtifactManifestError(f"artifact manifest: seed must be an integer, got {d['seed']!r}")
    if d["watermark"] is not None:
        _text(d["watermark"], "watermark")
    try:
        canonical_json.dumps(d)
    except canonical_json.CanonicalJsonError as exc:
        raise ArtifactManifestError(f"artifact manifest: {exc} (decimals are written as strings)") from exc
    return dict(d)


def _check_inputs(inputs: Any) -> None:
    if not isinstance(inputs, list):
        raise ArtifactManifestError(f"artifact manifest: inputs must be a list, got {type(inputs).__name__}")
    for i, item in enumerate(inputs):
        entry = _exact(item, f"inputs[{i}]", INPUT_KEYS)
        for key in INPUT_KEYS:
            _text(entry[key], f"inputs[{i}].{key}")
        for key in ("snapshot_id", "dataset_hash"):
            if not _HEX64.match(entry[key]):
                raise ArtifactManifestError(f"artifact manifest: inputs[{i}].{key} must be 64 lowercase hex, got {entry[key]!r}")


def build_manifest(
    *,
    artifact: str,
    produced_at: str,
    produced_by: Mapping[str, str],
    code: Mapping[str, Any],
    environment: Mapping[str, Any],
    inputs: Sequence[Mapping[str, str]],
    parameters: Mapping[str, Any],
    seed: int,
    watermark: str | None,
    results: Mapping[str, Any],
    precision: Mapping[str, Any],
) -> dict[str, Any]:
    """The validated manifest document (inputs sorted by dataset, then ref)."""
    doc = {
        "format": FORMAT,
        "artifact": artifact,
        "produced_at": produced_at,
        "produced_by": dict(produced_by),
        "code": dict(code),
        "environment": dict(environment),
        "inputs": sorted((dict(i) for i in inputs), key=lambda i: (str(i.get("dataset")), str(i.get("ref")))),
        "parameters": dict(parameters),
        "seed": seed,
        "watermark": watermark,
        "results": dict(results),
        "precision": dict(precision) if precision else {"default": EXACT},
    }
    return validate_manifest(doc)


def manifest_hash(doc: Mapping[str, Any]) -> str:
    """SHA-256 of the manifest's canonical JSON (the name of its stored object, printed in the footer)."""
    return canonical_json.sha256_hex(doc)


def footer(digest: str) -> str:
    """The line every file of the artifact prints: ``manifest sha256:<hash>``."""
    return f"{FOOTER_PREFIX}{digest}"


def footer_hash(text: str) -> str | None:
    """The (possibly abbreviated, >= 12 hex) manifest hash in a footer line, ``sha256:<hex>`` or bare hex; None if there is none."""
    found = _FOOTER_HEX.search(text.strip().lower())
    return found.group(1) if found else None


# ---------------------------------------------------------------- comparing a rerun


@dataclass(frozen=True)
class Mismatch:
    """One result that differs beyond its rule: where (``total_kwh.north``), both values, the rule and the difference."""

    result: str
    recorded: Any
    rerun: Any
    rule: str
    difference: str | None = None

    def to_document(self) -> dict[str, Any]:
        return {"result": self.result, "recorded": self.recorded, "rerun": self.rerun, "rule": self.rule, "difference": self.difference}


def rule_of(precision: Mapping[str, Any], result: str) -> Any:
    """The rule for a top-level result: its own entry, else ``default``, else exact."""
    rule = precision.get(result, precision.get("default", EXACT))
    check_rule(rule, f"precision.{result}")
    return rule


def describe_rule(rule: Any) -> str:
    return EXACT if rule == EXACT else " ".join(f"{k} {v}" for k, v in dict(rule).items())


def _decimal(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    try:
        d = Decimal(value)
    except InvalidOperation:
        return None
    return d if d.is_finite() else None


def _within(path: str, recorded: Any, rerun: Any, rule: Mapping[str, str], out: list[Mismatch]) -> None:
    if isinstance(recorded, Mapping) and isinstance(rerun, Mapping):
        for key in sorted(set(recorded) | set(rerun)):
            if key not in recorded or key not in rerun:
                out.append(Mismatch(f"{path}.{key}", recorded.get(key), rerun.get(key), describe_rule(rule), "missing on one side"))
            else:
                _within(f"{path}.{key}", recorded[key], rerun[key], rule, out)
        return
    if isinstance(recorded, list) and isinstance(rerun, list) and len(recorded) == len(rerun):
        for i, (a, b) in enumerate(zip(recorded, rerun, strict=True)):
            _within(f"{path}[{i}]", a, b, rule, out)
        return
    a, b = _decimal(recorded), _decimal(rerun)
    if a is None or b is None:
        if canonical_json.dumps(recorded) != canonical_json.dumps(rerun):
            out.append(Mismatch(path, recorded, rerun, describe_rule(rule), "not numeric: compared exactly"))
        return
    diff = abs(a - b)
    bound = Decimal(rule["abs"]) if "abs" in rule else Decimal(rule["rel"]) * abs(a)
    if diff > bound:
        out.append(Mismatch(path, recorded, rerun, describe_rule(rule), str(diff)))


def compare_results(recorded: Mapping[str, Any], rerun: Mapping[str, Any], precision: Mapping[str, Any]) -> list[Mismatch]:
    """Every result that differs: bit-for-bit (canonical JSON bytes) where the rule is exact, else within ``abs``/``rel``."""
    out: list[Mismatch] = []
    for name in sorted(set(recorded) | set(rerun)):
        rule = rule_of(precision, name)
        if name not in recorded or name not in rerun:
            out.append(Mismatch(name, recorded.get(name), rerun.get(name), describe_rule(rule), "missing on one side"))
        elif rule == EXACT:
            if canonical_json.dumps(recorded[name]) != canonical_json.dumps(rerun[name]):
                out.append(Mismatch(name, recorded[name], rerun[name], EXACT))
        else:
            _within(name, recorded[name], rerun[name], rule, out)
    return out


__all__ = [
    "FORMAT",
    "ArtifactManifestError",
    "Mismatch",
    "Producer",
    "build_manifest",
    "compare_results",
    "footer",
    "footer_hash",
    "manifest_hash",
    "validate_manifest",
]
