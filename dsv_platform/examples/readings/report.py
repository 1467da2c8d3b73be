"""The quarterly consumption report: total kWh per region and the p99 hourly load, a figure and an HTML page.

Computed from the whole readings_hourly:v1 realization, restricted to the local (Europe/Berlin) days
``quarter_start``..``quarter_end``; hours with a null (uncalibrated) kWh are left out and counted. Exact decimals,
3 places, as strings: ``total_kwh_by_region`` (``unassigned`` without a region) and ``total_kwh``. The load of an
hour is the sum of every meter's kWh with that ``hour_start`` (DST hours never merge); ``p99_hourly_load_kwh`` is
the nearest-rank percentile: the ceil(99 N / 100)-th smallest of the N loads, no interpolation, so it is one of
the loads bit-for-bit. Precision: exact for every result. Details: docs/readings-example.md
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dsv_platform.examples.readings import DATASET
from dsv_platform.examples.readings.generator import QUARTER, TZ

PARAMETERS = {"quarter_start": QUARTER[0].isoformat(), "quarter_end": QUARTER[1].isoformat(), "percentile": 99}
SEED = 20260401  # recorded in the manifest; compute draws no random numbers
UNASSIGNED = "unassigned"
THOUSANDTH = Decimal("0.001")


def _quarter_rows(table: pa.Table, parameters: Mapping[str, Any]) -> pa.Table:
    start, end = (dt.date.fromisoformat(str(parameters[k])) for k in ("quarter_start", "quarter_end"))
    days = table.column("local_date")
    return table.filter(pc.and_(pc.greater_equal(days, pa.scalar(start, pa.date32())), pc.less_equal(days, pa.scalar(end, pa.date32()))))


def hourly_loads(table: pa.Table) -> list[tuple[dt.datetime, Decimal]]:
    """``[(hour_start, total kWh of every meter in that hour)]`` sorted by hour (null kWh left out)."""
    known = table.filter(pc.is_valid(table.column("kwh")))
    grouped = known.group_by(["hour_start"], use_threads=False).aggregate([("kwh", "sum")]).sort_by("hour_start")
    return list(zip(grouped.column("hour_start").to_pylist(), grouped.column("kwh_sum").to_pylist(), strict=True))


def nearest_rank(values: list[Decimal], percent: int) -> Decimal:
    """The nearest-rank percentile: the ceil(percent * N / 100)-th smallest value (1-based)."""
    if not values:
        raise ValueError("no hourly loads to take a percentile of")
    ordered = sorted(values)
    rank = -(-percent * len(ordered) // 100)
    return ordered[max(rank, 1) - 1]


def _text(value: Decimal) -> str:
    return str(value.quantize(THOUSANDTH))


class QuarterlyConsumptionReport:
    """The Producer of the ``quarterly_consumption_report`` artifact (see the module docstring)."""

    name = "quarterly_consumption_report"
    precision: Mapping[str, Any] = {"default": "exact"}
    zones: tuple[str, ...] = (TZ,)
    runner_timezone = TZ

    def compute(self, inputs: Mapping[str, pa.Table], parameters: Mapping[str, Any], seed: int) -> dict[str, Any]:
        rows = _quarter_rows(inputs[DATASET], parameters)
        totals: dict[str, Decimal] = {}
        for region, kwh in zip(rows.column("region").to_pylist(), rows.column("kwh").to_pylist(), strict=True):
            if kwh is not None:
                totals[region or UNASSIGNED] = totals.get(region or UNASSIGNED, Decimal(0)) + kwh
        loads = [load for _, load in hourly_loads(rows)]
        percent = int(parameters.get("percentile", 99))
        return {
            "total_kwh_by_region": {region: _text(total) for region, total in sorted(totals.items())},
            "total_kwh": _text(sum(totals.values(), Decimal(0))),
            f"p{percent}_hourly_load_kwh": _text(nearest_rank(loads, percent)),
            "hours": len(loads),
            "meters": len(set(rows.column("meter_id").to_pylist())),
            "meter_hours_without_calibration": rows.num_rows - int(pc.sum(pc.is_valid(rows.column("kwh"))).as_py() or 0),
        }

    def render(self, inputs: Mapping[str, pa.Table], results: Mapping[str, Any], footer: str) -> dict[str, bytes]:
        png = figure_png(hourly_loads(inputs[DATASET]), results, footer)
        return {"figure.png": png, "report.html": report_html(results, png, footer)}


def figure_png(loads: list[tuple[dt.datetime, Decimal]], results: Mapping[str, Any], footer: str) -> bytes:
    """The hourly load over the quarter with its p99 line, and the regions' totals; a PNG with no timestamp in it."""
    fig = Figure(figsize=(9, 5.5), dpi=80)
    FigureCanvasAgg(fig)
    load_ax, region_ax = fig.subplots(2, 1, gridspec_kw={"height_ratios": [2, 1]})
    p99_key = next(k for k in results if k.endswith("_hourly_load_kwh"))
    load_ax.plot([at.replace(tzinfo=None) for at, _ in loads], [float(v) for _, v in loads], linewidth=0.4, color="#1f77b4")
    load_ax.axhline(float(Decimal(results[p99_key])), color="#d62728", linewidth=1, label=f"{p99_key} = {results[p99_key]}")
    load_ax.set_ylabel("kWh per hour (all meters)")
    load_ax.legend(loc="upper right", fontsize=8)
    regions = dict(sorted(results["total_kwh_by_region"].items()))
    region_ax.barh(list(regions), [float(Decimal(v)) for v in regions.values()], color="#2ca02c")
    region_ax.set_xlabel("kWh in the quarter")
    fig.suptitle("Quarterly consumption")
    fig.text(0.01, 0.005, footer, fontsize=7, family="monospace")
    out = io.BytesIO()
    fig.savefig(out, format="png", metadata={"Software": None})
    return out.getvalue()


def report_html(results: Mapping[str, Any], png: bytes, footer: str) -> bytes:
    """A self-contained HTML page: the numbers, the figure inline, the footer line."""
    regions = sorted(results["total_kwh_by_region"].items())  # sorted: the same page from computed or stored (canonical) results
    rows = "".join(f"<tr><td>{html.escape(r)}</td><td>{html.escape(v)} kWh</td></tr>" for r, v in regions)
    others = "".join(f"<li>{html.escape(k)}: {html.escape(str(v))}</li>" for k, v in sorted(results.items()) if k != "total_kwh_by_region")
    page = (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Quarterly consumption report</title></head><body>\n'
        "<h1>Quarterly consumption report</h1>\n"
        f"<table><tr><th>region</th><th>total</th></tr>{rows}</table>\n<ul>{others}</ul>\n"
        f'<img alt="hourly load" src="data:image/png;base64,{base64.b64encode(png).decode()}">\n'
        f"<footer><code>{html.escape(footer)}</code></footer>\n</body></html>\n"
    )
    return page.encode()


PRODUCER = QuarterlyConsumptionReport()
