"""The charts of deltas against a baseline, each with its interval: the cross-version heatmap, the cross-GPU bars
and the 2x2 splits of a knob's effect into GPU factor, version factor and interaction. Each returns (file name, PNG
bytes, caption), or None when there is nothing to draw (the report then says so); the deltas are computed in
harness.analysis, drawn here as they are.
"""

from __future__ import annotations

import matplotlib.colors
import matplotlib.patches
import matplotlib.pyplot as plt
import numpy as np

from harness.analysis import stats
from harness.analysis.cells import Cell, fmt_change
from harness.analysis.stats import Delta
from harness.analysis.tables.knobs import Splits
from harness.report.figures import MAX_SERIES, Chart, _crowded, _png, _tight_layout, _title, series_colors


def heatmap_chart(cells: dict[tuple[str, str], Delta]) -> Chart | None:
    """Cross-version delta in tokens/s (series.cross_version_cells): rows (GPU, rung, B), columns env vs its
    baseline."""
    if not cells:
        return None
    rows = list(dict.fromkeys(k[0] for k in cells))
    cols = list(dict.fromkeys(k[1] for k in cells))
    data = np.full((len(rows), len(cols)), np.nan)
    for (r, c), d in cells.items():
        data[rows.index(r), cols.index(c)] = d.value * 100
    # the colour scale is set by the typical cell, not the largest: one outlier (a contended run let back in, a
    # failed kernel) would otherwise wash every other cell out to white; cells past it are saturated and say so
    magnitudes = np.abs(data[~np.isnan(data)])
    limit = max(5.0, min(float(magnitudes.max()), 2.5 * float(np.median(magnitudes))))
    clipped = bool((magnitudes > limit).any())
    fig, ax = plt.subplots(figsize=(max(5.0, 2.2 * len(cols) + 3.5), max(2.5, 0.45 * len(rows) + 1.5)))
    im = ax.imshow(np.clip(data, -limit, limit), cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
    ax.set_xticks(range(len(cols)), cols, rotation=15, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    for (r, c), d in cells.items():
        text = fmt_change(d.value) + ("" if d.beyond else "\n(noise)" if d.verdict == stats.WITHIN else "\n(no estimate)")
        ax.text(cols.index(c), rows.index(r), text, ha="center", va="center", fontsize=8,
                color="black" if abs(d.value * 100) < 0.6 * limit else "white")
    fig.colorbar(im, ax=ax, label="delta tokens/s vs baseline env (%)" + (" (saturated past the scale)" if clipped else ""),
                 extend="both" if clipped else "neither")
    ax.set_title("Cross-version: tokens/s of each env against the baseline env")
    return ("cross-version.png", _png(fig), ("Cross-version delta in tokens/s (blue: faster than the baseline env; "
            "'(noise)': within noise by the significance rule)."))


def _delta_errors(deltas: list) -> np.ndarray | None:
    """Asymmetric error bars (percent) from the deltas' intervals; zero where a delta has none."""
    if not any(d.low is not None for d in deltas):
        return None
    return np.array([[max(0.0, (d.value - d.low) * 100) if d.low is not None else 0.0 for d in deltas],
                     [max(0.0, (d.high - d.value) * 100) if d.high is not None else 0.0 for d in deltas]])


def cross_gpu_chart(items: list[tuple[str, str, Delta]]) -> Chart | None:
    """Cross-GPU delta in tokens/s with its interval (series.cross_gpu_items), one bar per rung and B, one colour per GPU
    pair; a rung whose baseline run failed is written where its bar would be, not left out."""
    if not any(d.value is not None for _l, _s, d in items):
        return None
    labels = list(dict.fromkeys(i[0] for i in items))
    series = list(dict.fromkeys(i[1] for i in items))
    height = 0.8 / len(series)
    colors = series_colors(min(len(series), MAX_SERIES)) * (len(series) // MAX_SERIES + 1)  # past 20: the labels say
    fig, ax = plt.subplots(figsize=(10, max(2.8, 0.42 * len(labels) * len(series) + 1.6)))
    ends = [x * 100 for _l, _s, d in items if d.value is not None for x in (d.value, d.low, d.high) if x is not None]
    lo, hi = min(0.0, *ends), max(0.0, *ends)
    top = max(hi - lo, 1.0)  # the span the bars cover, for text offsets and margins
    for si, pair in enumerate(series):
        mine = [(labels.index(lab), d) for lab, s_, d in items if s_ == pair]
        for y, d in mine:
            y = y - 0.4 + height * (si + 0.5)
            if d.value is None:  # e.g. the baseline ran out of memory
                ax.text(0, y, f"  no delta: {d.verdict}", va="center", fontsize=8, color="dimgray")
                continue
            err = _delta_errors([d])
            ax.barh(y, d.value * 100, height, color=colors[si], alpha=1.0 if d.beyond else 0.4,
                    hatch=None if d.beyond else "//", edgecolor="black", linewidth=0.4, xerr=err, capsize=2)
            end = (d.high if d.value >= 0 and d.high is not None else d.low if d.low is not None else d.value) * 100
            ax.text(end + (0.01 if d.value >= 0 else -0.01) * top, y, Cell(d).brief(), va="center",
                    ha="left" if d.value >= 0 else "right", fontsize=7)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlim(lo - (0.3 if lo < 0 else 0.1) * top, hi + (0.3 if hi > 0 else 0.1) * top)  # room for the value texts
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"delta tokens/s against the baseline GPU (%); whiskers: {stats.interval_name()}")
    ax.grid(axis="x", alpha=0.3)
    handles = [matplotlib.patches.Patch(color=colors[i], label=name) for i, name in enumerate(series)]
    handles.append(matplotlib.patches.Patch(facecolor="white", edgecolor="black", hatch="//", label="within noise / no estimate"))
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.set_title("Cross-GPU: tokens/s of each GPU against the baseline GPU, same env, rung and B")
    return ("cross-gpu.png", _png(fig), ("Cross-GPU delta in tokens/s per rung and batch size (solid: beyond noise; hatched: "
            "within noise or no noise estimate); a rung whose baseline run failed says so where its bar would be."))


def factors_chart(result: Splits, name=str) -> Chart | None:
    """Per 2x2 split: the knob's effect in the four cells, and its GPU factor, version factor and interaction."""
    rows = result.rows
    if not rows:
        return None
    shown = rows[:6]
    fig, axes = plt.subplots(len(shown), 2, figsize=(11, 3.3 * len(shown)), squeeze=False,
                             gridspec_kw={"width_ratios": [1.3, 1.0]})
    for (left, right), r in zip(axes, shown, strict=True):
        quad = list(r.cells.items())
        gpus = list(dict.fromkeys(g for (g, _v), _d in quad))
        envs = list(dict.fromkeys(v for (_g, v), _d in quad))
        deltas = [d for _q, d in quad]
        bars = left.bar(range(4), [(d.value or 0.0) * 100 for d in deltas], capsize=3,
                        yerr=_delta_errors(deltas) if all(d.value is not None for d in deltas) else None)
        odd = r.standout if r.interaction_dominates else None
        for bar, ((g, v), _d) in zip(bars, quad, strict=True):  # colour: GPU; hatch: the second env; outline: the odd cell
            bar.set_facecolor(plt.get_cmap("Set2")(gpus.index(g)))
            bar.set_hatch("//" if envs.index(v) else None)
            bar.set_edgecolor("black" if (g, v) == odd else "dimgray")
            bar.set_linewidth(2.0 if (g, v) == odd else 0.5)
        left.set_xticks(range(4), [f"{_crowded(name(g))}\n{_crowded(v)}" for (g, v), _d in quad], fontsize=7)
        left.set_ylabel("effect on tokens/s (%)", fontsize=8)
        left.set_title(_title(f"{r.knob} at {r.at}: effect per cell", 70), fontsize=8)
        parts = [("GPU factor", r.gpu_factor), ("version factor", r.version_factor), ("interaction", r.interaction)]
        right.bar(range(3), [(d.value or 0.0) * 100 for _n, d in parts], capsize=3,
                  color=[matplotlib.colors.to_rgba(c, 1.0 if d.beyond else 0.35)
                         for c, (_n, d) in zip(("tab:blue", "tab:orange", "tab:red"), parts, strict=True)],
                  yerr=_delta_errors([d for _n, d in parts if d.value is not None]) if all(d.value is not None for _n, d in parts) else None)
        right.set_xticks(range(3), [f"{n}\n{Cell(d, 'pp').brief()}" for n, d in parts], fontsize=7)
        right.set_ylabel("percentage points", fontsize=8)
        right.set_title(_title(r.verdict(name), 60), fontsize=8)
        for ax in (left, right):
            ax.axhline(0, color="black", linewidth=0.8)
            ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Is it the GPU or the torch version? Each knob's effect split over 2 GPUs x 2 envs")
    _tight_layout(fig)
    caption = ("Left: the knob's effect on tokens/s in each (GPU, env) cell (colour: GPU, hatched: the second env; outlined "
               "where the interaction is larger than both factors: the cell the effect comes from). Right: GPU factor, version factor and their interaction in percentage points (faded: within noise "
               "or no estimate); whiskers: " + stats.interval_name() + "s.")
    if len(rows) > len(shown):
        caption += f" First {len(shown)} of {len(rows)} splits shown (all in the table)."
    return ("factors.png", _png(fig), caption)
