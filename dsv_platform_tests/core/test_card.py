"""The dataset card built purely from documents (core/publication/card.py): sections, an unread report, Markdown cells."""

from __future__ import annotations

import hashlib

from dsv_platform.core.publication.card import SECTIONS, CardInputs, build_card, card_markdown
from dsv_platform.core.publication.manifest import BuiltPart, build_manifest


def h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _manifest():
    parts = [BuiltPart("day=1", h("a"), 2, h("oa"), 10, h("s")), BuiltPart("day=2", h("b"), 3, h("ob"), 10, h("s"))]
    fields = {"feature_versions": {"meters": "v2"}, "parameters": {"recipe_hash": h("r")}, "watermark": "2026-01-05T00:00:00+00:00"}
    return build_manifest(parts, dataset="d", version="v1", **fields)


def test_card_has_every_section_and_the_manifest_identity():
    m = _manifest()
    recipe = {"purpose": "Forecast | load", "base": "meters", "as_of_joins": [{"source": "cal", "on": ["m"], "lag": "1d"}]}
    card = build_card(CardInputs(ref=f"d:v1@sha256:{m.manifest_hash}", manifest=m.to_document(), recipe=recipe, owner="grid"))
    assert set(SECTIONS) <= set(card) and card["manifest_hash"] == m.manifest_hash and card["content_hash"] == m.content_hash
    assert card["composition"]["rows"] == 5 and card["composition"]["partition_rows"] == {"day=1": 2, "day=2": 3}
    assert card["collection"]["lateness"] == [{"source": "cal", "lag": "1d"}] and card["collection"]["feature_versions"] == {"meters": "v2"}
    assert card["quality"] == {"report": None, "passed": None, "gates": []}  # no report read: never shown as passed
    text = card_markdown(card)
    assert "Report `-`: not read." in text and "- feature versions: meters:v2" in text and "- purpose: Forecast | load" in text


def test_card_quality_lists_every_gate_with_its_observed_value_and_escapes_cells():
    m = _manifest()
    report = {"passed": False, "gates": [{"name": "a", "passed": False, "blocking": True, "detail": {"observed": "1|2"}},
                                         {"name": "b", "passed": True, "blocking": False, "detail": {"rows": 5, "minimum": 1}}]}  # fmt: skip
    card = build_card(CardInputs(ref="d:v1", manifest=m.to_document(), recipe={}, owner=None, quality_report=report, quality_report_object=h("q")))
    assert card["quality"]["gates"] == [
        {"name": "a", "passed": False, "blocking": True, "observed": "1|2"},
        {"name": "b", "passed": True, "blocking": False, "observed": "minimum=1, rows=5"},
    ]
    text = card_markdown(card)
    assert "| a | FAILED | yes | 1\\|2 |" in text and "| b | passed | no (warning) | minimum=1, rows=5 |" in text and ": FAILED." in text
