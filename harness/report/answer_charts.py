"""The charts of the users' questions: each draws one harness.analysis.answers.Chart as it is (the title, which
states the answer, the bars and their units come from the analysis; nothing is computed here). PNG bytes, or None.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np

from harness.analysis.answers import Chart
from harness.report.charts import _png, sweep_chart

OURS, USERS = "tab:blue", "tab:gray"


def draw(chart: Chart | None) -> bytes | None:
    if chart is None or not any(chart.panels.values()):
        return None
    return {"delta": _delta, "stack": _stack, "bars": _bars, "sweep": _sweep}[chart.kind](chart)


def _hbars(ax, bars, unit: str, signed: bool) -> None:
    """Horizontal bars, one per row (top to bottom), the value and its verdict written at the bar's end."""
    y = np.arange(len(bars))
    values = [b.value.value for b in bars]
    errors = np.array([b.value.errors for b in bars]).T
    ax.barh(y, values, 0.7, color=[USERS if b.hatched and "user" in b.label else OURS for b in bars],
            alpha=1.0, hatch=None, xerr=errors if errors.any() else None, capsize=3, edgecolor="black", linewidth=0.4)
    for yi, b in zip(y, bars):
        if b.hatched:
            ax.patches[yi].set_hatch("//")
            ax.patches[yi].set_alpha(0.55)
    top = max(abs(v) for v in values) or 1.0
    for yi, b in zip(y, bars):
        end = b.value.high if b.value.high is not None and b.value.value >= 0 else b.value.value
        text = (f"{b.value.value:+.1f}%" if signed else f"{b.value.value:,.1f}") + (f" ({b.note})" if b.note and "beyond" not in b.note and b.note[0] not in "+-" else "")
        ax.text(end + 0.02 * top, yi, text, va="center", ha="left", fontsize=10)
    ax.set_yticks(y, [b.label for b in bars])
    ax.invert_yaxis()
    ax.set_xlim(min(0.0, *values) * 1.1, top * 1.75)  # room for the value texts
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel(unit)
    ax.grid(axis="x", alpha=0.3)


def _delta(chart: Chart) -> bytes:
    bars = chart.panels[""]
    fig, ax = plt.subplots(figsize=(8.0, 0.5 * len(bars) + 1.8))
    _hbars(ax, bars, chart.units[""], signed=True)
    ax.set_title(textwrap.fill(chart.title, 60))
    return _png(fig)


def _bars(chart: Chart) -> bytes:
    panels = [(name, bars) for name, bars in chart.panels.items() if bars]
    fig, axes = plt.subplots(len(panels), 1, figsize=(8.0, sum(0.5 * len(b) + 1.3 for _n, b in panels) + 0.8), squeeze=False)
    for ax, (name, bars) in zip(axes[:, 0], panels):
        _hbars(ax, bars, chart.units[name], signed=False)
    fig.suptitle(textwrap.fill(chart.title, 60))
    fig.tight_layout()
    return _png(fig)


def _stack(chart: Chart) -> bytes:
    rows = chart.panels[""]
    parts = list(dict.fromkeys(part for _label, stack in rows for _v, part in stack))
    fig, ax = plt.subplots(figsize=(8.0, 0.45 * len(rows) + 2.2))
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
    ax.set_title(textwrap.fill(chart.title, 60))
    if len(parts) > 1:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=3, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def _sweep(chart: Chart) -> bytes:
    return sweep_chart(chart.panels[""], "B (batch size)", chart.title)
