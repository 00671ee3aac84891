"""The charts of the users' questions: each draws one harness.analysis.answers.Chart as it is (the title, which
states the answer, the bars and their units come from the analysis; nothing is computed here). PNG bytes, or None.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from harness.analysis.answers import Chart
from harness.report.charts import sweep_chart
from harness.report.figures import NARROW, WIDE, _png, _tight_layout, _title, fonts

OURS, USERS = "tab:blue", "tab:gray"


def charts_of(key: str, chart: Chart | None) -> list[tuple]:
    """An answer's chart as the report places it: [(file name, PNG, caption, the PNG drawn for a phone)], or []."""
    png = draw(chart)
    return [] if png is None else [(f"answer-{key}.png", png, chart.title + ".", draw(chart, NARROW))]


def draw(chart: Chart | None, width: float = WIDE) -> bytes | None:
    if chart is None or not any(chart.panels.values()):
        return None
    with fonts(width):
        return {"delta": _delta, "stack": _stack, "bars": _bars, "sweep": _sweep}[chart.kind](chart, width)


def _wrap(title: str, width: float) -> str:
    return _title(title, int(7.5 * width))


def _hbars(ax, bars, unit: str, signed: bool) -> None:
    """Horizontal bars, one per row (top to bottom), the value and its verdict written at the bar's end."""
    y = np.arange(len(bars))
    values = [b.value.value for b in bars]
    drawn = ax.barh(y, values, 0.7, color=[USERS if b.hatched and "user" in b.label else OURS for b in bars],
                    edgecolor="black", linewidth=0.4)
    for patch, b in zip(drawn, bars):
        if b.hatched:
            patch.set_hatch("//")
            patch.set_alpha(0.55)
    top = max(abs(v) for v in values) or 1.0
    # An interval is drawn as far as one bar length past the bars' span; beyond that it is cut at the frame and its
    # cut end marked with an arrowhead (a 2-run CPU interval can be 30x its bar: drawn whole, it would leave the bars
    # a sliver, and drawn past the axis its whisker and label ran off the frame).
    reach_lo, reach_hi = min(0.0, *values) - top, max(0.0, *values) + top
    cut = {"<": [], ">": []}
    for yi, b in zip(y, bars):
        p = b.value
        if p.low is None or p.high is None:
            continue
        low, high = max(p.low, reach_lo), min(p.high, reach_hi)
        ax.errorbar([p.value], [yi], xerr=[[max(0.0, p.value - low)], [max(0.0, high - p.value)]], fmt="none",
                    ecolor="black", capsize=0 if p.high > reach_hi or p.low < reach_lo else 3, lw=1)
        if p.low < reach_lo:
            cut["<"].append((low, yi))
        if p.high > reach_hi:
            cut[">"].append((high, yi))
    for marker, ends in cut.items():
        if ends:
            ax.plot(*zip(*ends), marker=marker, linestyle="none", color="black", markersize=5)
    labels = []
    for yi, b in zip(y, bars):
        high = b.value.high if b.value.high is not None else 0.0
        end = max(b.value.value, 0.0, min(high, reach_hi))  # right of the bar and of its whisker as drawn
        text = (f"{b.value.value:+.1f}%" if signed else f"{b.value.value:,.1f}") + (f" ({b.note})" if b.note else "")
        labels.append(ax.text(end + 0.02 * top, yi, text, va="center", ha="left"))
    ax.set_yticks(y, [b.label for b in bars])
    ax.invert_yaxis()
    noted = any(b.note for b in bars)
    drawn_lo = min([0.0, *values] + [max(b.value.low, reach_lo) for b in bars if b.value.low is not None])
    drawn_hi = max([0.0, *values] + [min(b.value.high, reach_hi) for b in bars if b.value.high is not None])
    room = (0.75 if noted else 0.3) * max(drawn_hi - drawn_lo, top)  # for the value texts, right of the longest
    ax.set_xlim(drawn_lo - 0.05 * top if drawn_lo < 0 else 0.0, drawn_hi + room)
    if cut["<"] or cut[">"]:
        unit += "; an arrowhead: the interval goes on past it"
    _keep_inside(ax, labels)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel(unit)
    ax.grid(axis="x", alpha=0.3)


def _keep_inside(ax, labels) -> None:
    """Widen the x axis until every value label ends inside the frame: a label's width is fixed in pixels, so the room
    it needs in data units is measured once the figure is laid out, not guessed from the bars."""
    for _ in range(3):  # widening rescales the axis, which shrinks each label in data units: it settles in two
        ax.figure.canvas.draw()
        inverse = ax.transData.inverted()
        right = max((inverse.transform(t.get_window_extent().get_points())[1][0] for t in labels), default=None)
        lo, hi = ax.get_xlim()
        if right is None or right <= hi:
            return
        ax.set_xlim(lo, right + 0.02 * (right - lo))


def _delta(chart: Chart, width: float) -> bytes:
    bars = chart.panels[""]
    fig, ax = plt.subplots(figsize=(width, 0.5 * len(bars) + 2.0))
    _hbars(ax, bars, chart.units[""], signed=True)
    ax.set_title(_wrap(chart.title, width))
    return _png(fig)


def _bars(chart: Chart, width: float) -> bytes:
    panels = [(name, bars) for name, bars in chart.panels.items() if bars]
    fig, axes = plt.subplots(len(panels), 1, figsize=(width, sum(0.5 * len(b) + 1.4 for _n, b in panels) + 1.0), squeeze=False)
    for ax, (name, bars) in zip(axes[:, 0], panels):
        _hbars(ax, bars, chart.units[name], signed=False)
    fig.suptitle(_wrap(chart.title, width))
    _tight_layout(fig)
    return _png(fig)


def _stack(chart: Chart, width: float) -> bytes:
    rows = chart.panels[""]
    parts = list(dict.fromkeys(part for _label, stack in rows for _v, part in stack))
    fig, ax = plt.subplots(figsize=(width, 0.45 * len(rows) + 2.4))
    left = np.zeros(len(rows))
    for part in parts:
        values = np.array([next((v for v, p in stack if p == part), 0.0) for _l, stack in rows])
        ax.barh(range(len(rows)), values, left=left, label=part)
        left += values
    for yi, total in enumerate(left):
        ax.text(total, yi, f" {total:,.1f}", va="center", fontsize=10)
    ax.set_yticks(range(len(rows)), [label for label, _s in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, left.max() * 1.15)
    ax.set_xlabel(chart.units[""])
    ax.set_title(_wrap(chart.title, width))
    if len(parts) > 1:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=3 if width >= WIDE else 1, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def _sweep(chart: Chart, width: float) -> bytes:
    return sweep_chart(chart.panels[""], "B (batch size)", chart.title, width)
