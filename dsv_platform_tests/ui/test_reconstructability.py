"""After the demo (its last step runs ``rehearsal_job`` once) and one weekly ``full_rehearsal_job``, the reconstructability
asset shows its fraction, its check, and a plot of the ``reconstructable_fraction`` (resolvable) time series with a point per
rehearsal; the full_reproducibility asset plots the ``fully_reproduced_fraction`` series beside it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from dsv_platform_tests.ui.harness import CHECK_OUTCOME, FULL_REHEARSAL, REHEARSAL, check_outcomes, materializations
from dsv_platform_tests.ui.steps import Steps

pytestmark = [pytest.mark.ui, pytest.mark.xdist_group("ui")]

# Pixels of the plotted series (chart.js draws line and points in the accent colour; axes and grid are grey).
SERIES_PIXELS = """canvas => { const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data; let n = 0;
  for (let i = 0; i < d.length; i += 4) { if (d[i + 3] > 200 && d[i + 2] > 150 && d[i + 2] - d[i] > 80 && d[i + 2] - d[i + 1] > 80) n++; }
  return n; }"""


def _fraction_shown(text: str, key: str = "reconstructable_fraction") -> float:
    """The value next to ``key`` in the metadata table (Key / Timestamp / Value)."""
    m = re.search(rf"(?<![a-z_]){key}\s+(?:[A-Z][a-z]{{2}} \d{{1,2}}, \d{{1,2}}:\d{{2}} [AP]M\s+)?(-?[0-9]+(?:\.[0-9]+)?)\b", text)
    assert m, f"no {key} value rendered:\n{text[:3000]}"
    return float(m[1])


def _plotted(steps: Steps, key: str, *others: str, shot: str) -> int:
    """Open the asset's Plots view (one chart per numeric metadata key); the pixels of ``key``'s drawn series."""
    steps.button("Plots").click()
    title = steps.page.locator("span").filter(has_text=re.compile(rf"^{key}$"))
    chart = title.locator("xpath=ancestor::div[.//canvas][1]//canvas").first
    expect(chart).to_be_visible(timeout=30_000)
    steps.wait(key, *others, shot=shot, settle=1.5)
    return int(chart.evaluate(SERIES_PIXELS))  # one point: a ring of a few pixels


def test_reconstructability_shows_fraction_check_and_a_plotted_time_series(steps: Steps) -> None:
    rehearsals = materializations(steps.base, REHEARSAL)
    assert rehearsals, "the demo's rehearsal step recorded no reconstructability materialization"
    fraction = rehearsals[0]["metadata"]["reconstructable_fraction"]
    assert isinstance(fraction, float), rehearsals[0]
    checks = check_outcomes(steps.base, REHEARSAL)
    assert set(checks) == {"retained_models_are_reconstructable"} and {s for s, _ in checks.values()} <= set(CHECK_OUTCOME), checks

    text = steps.open(f"/assets/{REHEARSAL}", "reconstructable_fraction", "retained_models", "rehearsed", shot="reconstructability")
    assert _fraction_shown(text) == pytest.approx(fraction), (fraction, text[:3000])

    # The Plots view of the metadata: one chart per numeric key; the fraction's has its series drawn.
    drawn = _plotted(steps, "reconstructable_fraction", "rehearsed", "retained_models", shot="reconstructability-plot")
    assert drawn >= 4, f"the reconstructable_fraction plot draws no series ({drawn} pixels) for {len(rehearsals)} rehearsal(s)"

    [(check, (status, _))] = checks.items()
    text = steps.open(f"/assets/{REHEARSAL}?view=checks", check, "Evaluation result", shot="reconstructability-checks")
    assert re.search(rf"Evaluation result\s+{CHECK_OUTCOME[status]}\b", text), (check, status, text[:3000])
    steps.assert_screenshots()


def test_full_reproducibility_plots_the_fully_reproduced_series_beside_the_resolvable_one(steps: Steps) -> None:
    full = materializations(steps.base, FULL_REHEARSAL)
    assert full, "the weekly full rehearsal recorded no full_reproducibility materialization"
    fraction = full[0]["metadata"]["fully_reproduced_fraction"]
    assert isinstance(fraction, float) and "reconstructable_fraction" not in full[0]["metadata"], full[0]
    assert full[0]["metadata"]["reproduced"] >= 1, "the seed's full rehearsal covers every retained output"
    checks = check_outcomes(steps.base, FULL_REHEARSAL)
    assert set(checks) == {"sampled_retained_outputs_reproduce_in_full"} and {s for s, _ in checks.values()} <= set(CHECK_OUTCOME), checks

    text = steps.open(f"/assets/{FULL_REHEARSAL}", "fully_reproduced_fraction", "reproduced", "rebuilt_from_raw", shot="full-reproducibility")
    assert _fraction_shown(text, "fully_reproduced_fraction") == pytest.approx(fraction), (fraction, text[:3000])
    drawn = _plotted(steps, "fully_reproduced_fraction", "reproduced", "retained", shot="full-reproducibility-plot")
    assert drawn >= 4, f"the fully_reproduced_fraction plot draws no series ({drawn} pixels) for {len(full)} full rehearsal(s)"

    # The daily series is a different plot on the other asset: both are drawn, each with its own points.
    steps.open(f"/assets/{REHEARSAL}", "reconstructable_fraction", shot="reconstructability-again")
    assert _plotted(steps, "reconstructable_fraction", "rehearsed", shot="reconstructability-plot-again") >= 4
    steps.assert_screenshots()
