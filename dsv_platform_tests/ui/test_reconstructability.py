"""After the demo (its last step runs ``rehearsal_job`` once), the reconstructability asset shows its fraction, its
check, and a plot of the ``reconstructable_fraction`` time series with a point per rehearsal."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from dsv_platform_tests.ui.harness import CHECK_OUTCOME, REHEARSAL, check_outcomes, materializations
from dsv_platform_tests.ui.steps import Steps

pytestmark = [pytest.mark.ui, pytest.mark.xdist_group("ui")]

# Pixels of the plotted series (chart.js draws line and points in the accent colour; axes and grid are grey).
SERIES_PIXELS = """canvas => { const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data; let n = 0;
  for (let i = 0; i < d.length; i += 4) { if (d[i + 3] > 200 && d[i + 2] > 150 && d[i + 2] - d[i] > 80 && d[i + 2] - d[i + 1] > 80) n++; }
  return n; }"""


def _fraction_shown(text: str) -> float:
    """The value next to reconstructable_fraction in the metadata table (Key / Timestamp / Value)."""
    m = re.search(r"reconstructable_fraction\s+(?:[A-Z][a-z]{2} \d{1,2}, \d{1,2}:\d{2} [AP]M\s+)?(-?[0-9]+(?:\.[0-9]+)?)\b", text)
    assert m, f"no reconstructable_fraction value rendered:\n{text[:3000]}"
    return float(m[1])


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
    steps.button("Plots").click()
    title = steps.page.locator("span").filter(has_text=re.compile(r"^reconstructable_fraction$"))
    chart = title.locator("xpath=ancestor::div[.//canvas][1]//canvas").first
    expect(chart).to_be_visible(timeout=30_000)
    steps.wait("reconstructable_fraction", "rehearsed", "retained_models", shot="reconstructability-plot", settle=1.5)
    drawn = chart.evaluate(SERIES_PIXELS)  # one rehearsal: a single point, a ring of a few pixels
    assert drawn >= 4, f"the reconstructable_fraction plot draws no series ({drawn} pixels) for {len(rehearsals)} rehearsal(s)"

    [(check, (status, _))] = checks.items()
    text = steps.open(f"/assets/{REHEARSAL}?view=checks", check, "Evaluation result", shot="reconstructability-checks")
    assert re.search(rf"Evaluation result\s+{CHECK_OUTCOME[status]}\b", text), (check, status, text[:3000])
    steps.assert_screenshots()
