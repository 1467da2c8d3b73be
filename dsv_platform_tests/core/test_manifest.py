"""Manifest: canonical document, manifest hash, content hash, and build rules."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsv_platform.core import canonical_json
from dsv_platform.core.errors import ContractViolationError, PublicationError
from dsv_platform.core.publication.manifest import (
    BuiltPart,
    CodePin,
    EnvironmentPin,
    LabelPin,
    Manifest,
    ManifestError,
    SourcePin,
    SplitsEntry,
    build_manifest,
    content_hash_of,
)


def h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


SCHEMA = h("schema")


def part(key: str, *, rows: int = 2, schema: str = SCHEMA, seed: str = "") -> BuiltPart:
    return BuiltPart(key=key, hash=h(f"rows of {key}{seed}"), rows=rows, object=h(f"parquet of {key}{seed}"), bytes=100, schema_hash=schema)


def full_manifest() -> Manifest:
    return build_manifest(
        [part("date=2026-03-14"), part("date=2026-03-15", rows=5)],
        dataset="fraud_training_set",
        version="v6",
        schema_hash=SCHEMA,
        contract={"name": "fraud", "key": ["id"], "columns": [{"name": "id", "type": "int64"}]},
        splits=SplitsEntry(
            policy={"kind": "hash-split/1", "salt": "fraud_v6", "bounds": {"train": 80, "test": 100}},
            assignment_object=h("a"),
            assignment_hash=h("ah"),
            counts={"train": 5, "test": 2},
        ),
        sources=(SourcePin("raw.events", "8812345", tag="dsv-pin-1"), SourcePin("canonical.accounts", "42", attributes={"rows": 9})),
        labels=LabelPin("chargeback", "3"),
        feature_versions={"velocity": "2"},
        observation_window={"start": "2026-01-01T00:00:00Z", "end": "2026-03-01T00:00:00Z"},
        population_filter="country = 'NL'",
        watermark="2026-03-16T00:00:00Z",
        code=CodePin("0123abc", dirty=False),
        environment=EnvironmentPin(h("uv.lock"), "3.11.7"),
        runner_timezone="UTC",
        parameters={"min_amount": "0.01", "lookback_days": 30},
        seed=7,
        attachments={"quality_report": h("qr")},
    )


# ---------------------------------------------------------------- content hash


def test_manifest_content_hash_of_sorts_by_key_and_joins_with_lf() -> None:
    pairs = [("date=2026-03-15", "b" * 64), ("date=2026-03-14", "a" * 64)]
    expected = hashlib.sha256(f"date=2026-03-14:{'a' * 64}\ndate=2026-03-15:{'b' * 64}".encode()).hexdigest()
    assert content_hash_of(pairs) == expected


def test_manifest_content_hash_of_empty_is_hash_of_nothing() -> None:
    assert content_hash_of([]) == hashlib.sha256(b"").hexdigest()


def test_manifest_content_hash_of_single_leaf_has_no_trailing_lf() -> None:
    assert content_hash_of([("all", h("x"))]) == hashlib.sha256(f"all:{h('x')}".encode()).hexdigest()


def test_manifest_content_hash_of_uses_code_point_order() -> None:
    # "Z" (U+005A) < "a" (U+0061) < "é" (U+00E9) < "𝔸" (U+1D538); UTF-16 order would differ for the last.
    keys = ["𝔸", "é", "a", "Z", "\uffff"]
    text = "\n".join(f"{k}:{h(k)}" for k in ["Z", "a", "é", "\uffff", "𝔸"])
    assert content_hash_of((k, h(k)) for k in keys) == hashlib.sha256(text.encode()).hexdigest()


def test_manifest_content_hash_of_rejects_duplicate_keys() -> None:
    with pytest.raises(ContractViolationError, match="date=1"):
        content_hash_of([("date=1", h("a")), ("date=1", h("b"))])


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=4), min_size=1, max_size=12), st.randoms())
def test_manifest_hash_ignores_part_order(leaves: dict[str, str], rnd: Any) -> None:
    parts = [BuiltPart(k, h(v), 1, h(k + v), 10, SCHEMA) for k, v in leaves.items()]
    shuffled = list(parts)
    rnd.shuffle(shuffled)
    a = build_manifest(parts, dataset="d", version="v1")
    b = build_manifest(shuffled, dataset="d", version="v1")
    assert a.manifest_hash == b.manifest_hash
    assert a.content_hash == content_hash_of((k, h(v)) for k, v in leaves.items())


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=8, unique=True), st.data())
def test_manifest_changed_leaf_changes_content_and_manifest_hash(keys: list[str], data: Any) -> None:
    parts = [BuiltPart(k, h(k), 1, h("o" + k), 10, SCHEMA) for k in keys]
    victim = data.draw(st.sampled_from(range(len(parts))))
    changed = list(parts)
    changed[victim] = dataclasses.replace(parts[victim], hash=h("changed"))
    a, b = build_manifest(parts, dataset="d", version="v1"), build_manifest(changed, dataset="d", version="v1")
    assert a.content_hash != b.content_hash and a.manifest_hash != b.manifest_hash


# ---------------------------------------------------------------- document and hash


def test_manifest_hash_is_sha256_of_canonical_document() -> None:
    m = full_manifest()
    assert m.canonical_bytes() == canonical_json.dumps(m.to_document())
    assert m.manifest_hash == hashlib.sha256(m.canonical_bytes()).hexdigest()


def test_manifest_golden_minimal_document() -> None:
    m = build_manifest([part("all", rows=3)], dataset="d", version="v1")
    doc = json.loads(m.canonical_bytes())
    assert list(doc) == sorted(doc)
    assert doc["format"] == "dsv-manifest/1" and doc["encoding"] == "dsv-canon/1"
    assert doc["partitions"] == [{"key": "all", "hash": h("rows of all"), "rows": 3, "object": h("parquet of all"), "bytes": 100}]
    assert doc["code"] is None and doc["parameters"] == {} and doc["seed"] is None
    # The whole document derived from docs/canonical-encoding.md without the platform's encoder: the content hash is the
    # SHA-256 of the partition leaves' lines, the manifest hash the SHA-256 of the document's canonical JSON.
    expected = {
        "attachments": {}, "code": None, "content_hash": hashlib.sha256(f"all:{h('rows of all')}".encode()).hexdigest(), "contract": None,
        "dataset": "d", "encoding": "dsv-canon/1", "environment": None, "feature_versions": {}, "format": "dsv-manifest/1", "labels": None,
        "observation_window": None, "parameters": {}, "partitions": doc["partitions"], "population_filter": None, "rows": 3,
        "runner_timezone": None, "schema_hash": SCHEMA, "seed": None, "sources": [], "splits": None, "version": "v1", "watermark": None,
    }  # fmt: skip
    assert m.canonical_bytes() == json.dumps(expected, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    # Golden: a change here changes every manifest hash; that is dsv-manifest/2, not an edit.
    assert m.manifest_hash == hashlib.sha256(m.canonical_bytes()).hexdigest() == GOLDEN_MINIMAL


GOLDEN_MINIMAL = "87dea5170317256421b6eaa865353448848d7a6dc07f5f4faf17a8b2e92389b2"


def test_manifest_round_trips_through_document_and_json() -> None:
    m = full_manifest()
    assert Manifest.from_document(m.to_document()) == m
    again = Manifest.from_json(m.canonical_bytes().decode())
    assert again.manifest_hash == m.manifest_hash and again == m


def test_manifest_has_no_wall_clock_or_builder_identity() -> None:
    doc = full_manifest().to_document()
    flat = json.dumps(doc)
    for word in ("built_at", "created_at", "builder", "hostname", "user"):
        assert word not in flat
    assert full_manifest().manifest_hash == full_manifest().manifest_hash


def test_manifest_is_frozen_all_the_way_down() -> None:
    m = full_manifest()
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.rows = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        m.contract["name"] = "other"  # type: ignore[index]
    with pytest.raises(TypeError):
        m.parameters["seed"] = 1  # type: ignore[index]
    doc = m.to_document()
    doc["contract"]["name"] = "mutated"
    assert m.contract is not None and m.contract["name"] == "fraud"


def test_manifest_refuses_floats() -> None:
    with pytest.raises(ManifestError, match="float"):
        build_manifest([part("all")], dataset="d", version="v1", contract={"range": {"min": 0.5}})
    with pytest.raises(ManifestError):
        build_manifest([part("all")], dataset="d", version="v1", parameters={"rate": 0.5})


@pytest.mark.parametrize(
    "change",
    [
        {"dataset": "other"},
        {"version": "v7"},
        {"seed": 8},
        {"code": CodePin("0123abc", dirty=True)},
        {"parameters": {"min_amount": "0.02", "lookback_days": 30}},
        {"sources": (SourcePin("raw.events", "8812346", tag="dsv-pin-1"), SourcePin("canonical.accounts", "42", attributes={"rows": 9}))},
    ],
    ids=lambda c: next(iter(c)),
)
def test_manifest_hash_changes_with_every_recorded_input(change: dict[str, Any]) -> None:
    m = full_manifest()
    assert dataclasses.replace(m, **change).manifest_hash != m.manifest_hash


# ---------------------------------------------------------------- build rules


def test_manifest_build_rejects_duplicate_partition_owner() -> None:
    with pytest.raises(PublicationError, match="two parts claim partition 'date=1'"):
        build_manifest([part("date=1"), part("date=1", seed="x")], dataset="d", version="v1")


def test_manifest_build_rejects_schema_disagreement() -> None:
    with pytest.raises(PublicationError, match="disagree on the schema hash"):
        build_manifest([part("date=1"), part("date=2", schema=h("other"))], dataset="d", version="v1")


def test_manifest_build_rejects_parts_against_expected_schema() -> None:
    with pytest.raises(PublicationError, match="the contract says"):
        build_manifest([part("date=1")], dataset="d", version="v1", schema_hash=h("other"))


def test_manifest_build_rejects_no_parts() -> None:
    with pytest.raises(PublicationError, match="at least one"):
        build_manifest([], dataset="d", version="v1")


def test_manifest_build_totals_rows_and_sorts_partitions() -> None:
    m = build_manifest([part("b", rows=4), part("a", rows=1)], dataset="d", version="v1")
    assert m.rows == 5 and [p.key for p in m.partitions] == ["a", "b"]


# ---------------------------------------------------------------- document validation


def _doc() -> dict[str, Any]:
    return full_manifest().to_document()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(extra=1), "unknown keys"),
        (lambda d: d.pop("seed"), "missing keys"),
        (lambda d: d.update(format="dsv-manifest/2"), "format"),
        (lambda d: d.update(content_hash=h("wrong")), "does not match the partition leaves"),
        (lambda d: d.update(rows=999), "rows"),
        (lambda d: d["partitions"].reverse(), "canonical order"),
        (lambda d: d["partitions"][0].update(hash="ABC"), "hex"),
        (lambda d: d.update(version=6), "version"),
        (lambda d: d["code"].update(dirty="no"), "dirty"),
        (lambda d: d.update(seed=True), "seed"),
    ],
)
def test_manifest_from_document_refuses_non_canonical(mutate: Any, message: str) -> None:
    doc = _doc()
    mutate(doc)
    with pytest.raises(ManifestError, match=message):
        Manifest.from_document(doc)


def test_manifest_from_json_refuses_non_canonical_text() -> None:
    m = full_manifest()
    pretty = json.dumps(m.to_document(), indent=2, sort_keys=True)
    with pytest.raises(ManifestError, match="not canonical"):
        Manifest.from_json(pretty)
    with pytest.raises(ManifestError, match="not JSON"):
        Manifest.from_json("{")


def test_manifest_code_repo_is_recorded_only_when_known_so_older_documents_keep_their_bytes() -> None:
    without = full_manifest()
    assert without.to_document()["code"] == {"commit": "0123abc", "dirty": False}  # the document every earlier manifest has
    stored = without.canonical_bytes()
    assert Manifest.from_json(stored).canonical_bytes() == stored and Manifest.from_json(stored).code == CodePin("0123abc", False)
    with_repo = dataclasses.replace(without, code=CodePin("0123abc", dirty=False, repo="/src/dsv_platform"))
    assert with_repo.to_document()["code"] == {"commit": "0123abc", "dirty": False, "repo": "/src/dsv_platform"}
    assert Manifest.from_json(with_repo.canonical_bytes()) == with_repo and with_repo.manifest_hash != without.manifest_hash
    doc = with_repo.to_document()
    doc["code"]["repo"] = None
    with pytest.raises(ManifestError, match=r"code\.repo"):
        Manifest.from_document(doc)
    doc["code"] = {"commit": "0123abc", "dirty": False, "branch": "main"}
    with pytest.raises(ManifestError, match="unknown keys"):
        Manifest.from_document(doc)
