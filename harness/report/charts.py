"""The report's charts of what the records measured: the ladder's tokens/s per rung, the sweeps' tokens/s and memory
against the swept value, where device memory goes at the peak and the kernel-time mix per rung. Drawn from the
analyses' typed results (harness.analysis.series), each returned as (file name, PNG bytes, caption), or None / []
when there is nothing to draw (the report then says so). The charts of deltas are harness.report.delta_charts; what
every chart shares (type, sizes, colours, text, PNG) is harness.report.figures.
"""

from __future__ import annotations

import dataclasses
import textwrap

import matplotlib.pyplot as plt
import numpy as np

from harness.analysis import series, stats
from harness.analysis.series import KNEE_TOLERANCE, MEMORY_DEFINITION
from harness.console.textsafe import bounded, file_part
from harness.report.figures import (
    MAX_SERIES,
    NARROW,
    PER_INCH,
    THOUSANDS,
    WIDE,
    Chart,
    _png,
    _tight_layout,
    _title,
    fonts,
    series_colors,
)


def ladder_charts(ladders: list[series.LadderChart]) -> list[Chart]:
    """One grouped bar chart per plan (harness.analysis.series.ladder_charts): tokens/s per rung, one bar per
    (device, env, B, T), the user's logged numbers hatched beside; a rung that did not run says so where its bar is.
    Each comes with a narrow version (horizontal bars, rungs down the page) for a phone."""
    charts, names = [], set()
    for whole in ladders:
        # parts of MAX_SERIES (a colour a series), the GPUs' (and the user's log) apart from the CPUs': beside a GPU's
        # hundreds of thousands of tokens/s, a CPU's few thousand are flat bars
        kinds = ([s for s in whole.series if not s.on_cpu], [s for s in whole.series if s.on_cpu])
        parts = [kind[i:i + MAX_SERIES] for kind in kinds for i in range(0, len(kind), MAX_SERIES)]
        first = 1
        for part in parts:
            lc = dataclasses.replace(whole, series=part)
            of = (f" (series {first}-{first + len(part) - 1} of {len(whole.series)})" if len(parts) > 1 else "")
            first += len(part)
            more = (f" Drawn in parts of at most {MAX_SERIES} series, GPUs apart from CPUs, so each colour names one "
                    "and each part has its own scale." if len(parts) > 1 else "")
            charts.append((_file_name(f"ladder-{file_part(lc.plan)}", names), _ladder(lc, WIDE), (
                f"Tokens/s per rung of plan {lc.plan}, one bar per device / env and B (whiskers: "
                f"{stats.interval_name()}, absent where too few samples give none, a triangle where one runs past the "
                f"chart's edge; hatched: the user's logged single samples){of}.{more}"), _ladder(lc, NARROW)))
    return charts


WHISKER_ROOM = 1.5  # the value axis of a ladder chart reaches this many times its tallest bar at most


def _ladder(lc, width: float) -> bytes:
    with fonts(width):
        return _ladder_figure(lc, width)


def _ladder_figure(lc, width: float) -> bytes:
    n, narrow = len(lc.series), width < WIDE
    size = 0.8 / n
    fig, ax = plt.subplots(figsize=(width, 0.16 * n * len(lc.rungs) + 3.0) if narrow else (width, 5.2))
    x = np.arange(len(lc.rungs))
    bar = ax.barh if narrow else ax.bar
    colors = series_colors(n)
    # the value axis fits the bars: a whisker past WHISKER_ROOM times the tallest bar (a configuration of one noisy
    # pair of runs, t at 2 df) is cut at the edge and marked, not allowed to squash every bar to nothing
    tallest = max((p.value for s in lc.series for p in s.points.values() if p is not None), default=0.0)
    edge = tallest * WHISKER_ROOM
    cut = []
    for i, s in enumerate(lc.series):
        points = [s.points.get(r) for r in lc.rungs]
        xs = x - 0.4 + size * (i + 0.5)
        errors = np.array([p.errors if p is not None else (0.0, 0.0) for p in points]).T
        values = [p.value if p is not None else np.nan for p in points]
        cut += [xi for xi, p in zip(xs, points, strict=True) if p is not None and p.value + p.errors[1] > edge > 0]
        bar(xs, values, size, label=s.label, hatch="//" if s.reference else None, capsize=2, color=colors[i],
            edgecolor="black" if s.reference else None, linewidth=0.5, alpha=0.6 if s.reference else 1.0,
            **({} if s.reference or not errors.any() else {"xerr" if narrow else "yerr": errors}))
        for xi, r in zip(xs, lc.rungs, strict=True):
            if r in s.failed and r not in s.points:  # a rung that did not run is said, not left blank
                if narrow:
                    ax.text(0, xi, f" {s.failed[r]}", ha="left", va="center", fontsize=8, color="dimgray")
                else:
                    ax.text(xi, 0, f" {s.failed[r]}", rotation=90, ha="center", va="bottom", fontsize=9, color="dimgray")
    value_axis = ax.xaxis if narrow else ax.yaxis
    value_axis.set_major_formatter(THOUSANDS)
    if cut:
        (ax.set_xlim if narrow else ax.set_ylim)(0, edge)
        for xi in cut:  # the whisker runs on past the edge
            if narrow:
                ax.plot([edge], [xi], marker=">", color="black", markersize=5, clip_on=False)
            else:
                ax.plot([xi], [edge], marker="^", color="black", markersize=5, clip_on=False)
    if narrow:
        ax.set_yticks(x, lc.rungs)
        ax.set_ylim(len(lc.rungs) - 0.5, -0.5)  # the first rung on top
        ax.set_xlabel("thousands of tokens/s")
        ax.grid(axis="x", alpha=0.3)
    else:
        ax.set_xticks(x, lc.rungs, rotation=30, ha="right")
        ax.set_xlim(-0.5, len(lc.rungs) - 0.5)  # every rung's slot, also where only a status text stands
        ax.set_ylabel("thousands of tokens/s")
        ax.grid(axis="y", alpha=0.3)
    ax.set_title(_title(lc.title, int(7.5 * width)))
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 if narrow else -0.28), ncol=1 if narrow else 2,
              frameon=False)  # below the axes and their labels: never over a bar or a rung's name
    return _png(fig, None if narrow else _legend_under_tick_labels)


def _legend_under_tick_labels(fig) -> None:
    """Move the legend just under the lowest x tick label where that reaches below it: a long rotated rung name
    (compile-max-autotune-no-cudagraphs) reached below -0.28, where the legend stood over it."""
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    lowest = min((t.get_window_extent(renderer).y0 for t in ax.get_xticklabels() if t.get_text()), default=None)
    if lowest is not None:
        below = ax.transAxes.inverted().transform((0.0, lowest))[1] - 0.03
        ax.get_legend().set_bbox_to_anchor((0.5, min(-0.28, below)), ax.transAxes)


def _file_name(stem: str, taken: set[str]) -> str:
    """stem.png, or stem-2.png, ... where two plans' names make the same file name once sanitised."""
    name, n = f"{stem}.png", 1
    while name in taken:
        n += 1
        name = f"{stem}-{n}.png"
    taken.add(name)
    return name


def memory_chart(bars: list[tuple[str, list[float]]]) -> Chart | None:
    """harness.analysis.series.memory_bars as stacked bars."""
    if not bars:
        return None
    fig, ax = plt.subplots(figsize=(8.0, max(2.5, 0.42 * len(bars) + 1.8)))
    left = np.zeros(len(bars))
    for i, (_k, label) in enumerate(series.MEMORY_PARTS):
        values = np.array([b[1][i] for b in bars])
        ax.barh(range(len(bars)), values, left=left, label=label)
        left += values
    ax.set_yticks(range(len(bars)), [b[0] for b in bars], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("GiB at the peak")
    ax.set_title("Where device memory goes at the peak")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, frameon=False)  # below: never over a bar
    ax.grid(axis="x", alpha=0.3)
    return ("memory-split.png", _png(fig), ("Device memory at the peak: live tensors, allocator cache, memory outside "
                                            "the allocator (explain.memory_split), in GiB."))


def kernel_mix_chart(mix: series.KernelMix | None) -> Chart | None:
    """harness.analysis.series.kernel_mix: a panel per (device, env) cell, a stacked bar per rung."""
    if mix is None:
        return None
    most = max(len(bars) for _t, bars in mix.cells)  # wide enough that each bar's label has its own room
    panel = max(4.2, 0.4 * most)
    room = int(PER_INCH * 0.7 * panel)  # characters of a title over one panel's axes (0.7 of its width)
    fig, axes = plt.subplots(1, len(mix.cells), figsize=(max(6.0, panel * len(mix.cells)), 5.4),
                             squeeze=False, sharey=True)
    palette = plt.get_cmap("tab20")(np.linspace(0, 1, max(2, len(mix.order))))
    for ax, (title, bars) in zip(axes[0], mix.cells):
        bottom = np.zeros(len(bars))
        for cat in mix.categories:
            values = np.array([shares.get(cat, 0) for _l, shares in bars])
            ax.bar(range(len(bars)), values, bottom=bottom, color=palette[mix.order.index(cat)], label=cat)
            bottom += values
        ax.set_xticks(range(len(bars)), [label for label, _s in bars], rotation=45, ha="right", fontsize=9)
        ax.set_title(textwrap.fill(bounded(title, 2 * room, room), room), fontsize=10)  # not over the next panel's
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel(f"share of profiled {' / '.join(mix.kinds)} time (%)")
    axes[0][-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    lines = max(ax.get_title().count("\n") + 1 for ax in axes[0])
    fig.suptitle("Kernel-time mix per rung", y=0.98 + 0.04 * (lines - 1))  # above the panels' titles
    caption = "Kernel time by category per rung (explain.kernels.by_category)."
    if mix.missed:
        caption += (f" {mix.missed} bar(s) marked *: compiled on a GPU and profiled before the capture fix (gpt/"
                    "torch_compat.py device_kernel_events), so no Inductor-generated (Triton) kernel is in the profile "
                    "and the shares are of the rest.")
    if mix.total_cells > len(mix.cells):
        caption += f" First {len(mix.cells)} of {mix.total_cells} (device, env) cells shown."
    return ("kernel-mix.png", _png(fig), caption)


def sweep_chart(lines: list, fieldname: str, title: str, width: float = 9.0) -> bytes:
    """tokens/s (thousands) and memory (GiB) against the swept value, a line per curve (harness.analysis.series
    SweepLine, or an answer's BatchCurve): the knee starred, values that did not run crossed, the user's dashed.
    Narrower than WIDE: the two panels one above the other."""
    with fonts(width):
        return _sweep_figure(lines, fieldname, title, width)


def _sweep_figure(lines: list, fieldname: str, title: str, width: float) -> bytes:
    narrow = width < WIDE
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(width, 8.0)) if narrow else plt.subplots(1, 2, figsize=(width, 4.6))
    palette = series_colors(min(len(lines), MAX_SERIES)) or [None]  # past 20 lines they repeat; the legend names each
    for j, line in enumerate(sorted(lines, key=lambda x: x.label)):
        style = "--" if line.reference else "-"
        line_color = palette[j % len(palette)]
        tps = [(v, t) for v, t, _m in line.points if t is not None]
        color = None
        if tps:
            drawn, = a1.plot([v for v, _ in tps], [t for _, t in tps], style, marker="o", label=line.label,
                             color=line_color)
            color = drawn.get_color()
            if line.knee is not None:
                a1.plot([line.knee], [t for v, t in tps if v == line.knee], "*", markersize=14, color=color)
        for v, status in line.failed:  # x at the bottom of the axes, with the status
            a1.plot([v], [0.04], "x", color=color or "gray", markersize=9, transform=a1.get_xaxis_transform())
            a1.text(v, 0.08, status, rotation=90, ha="center", va="bottom", fontsize=9, color=color or "gray",
                    transform=a1.get_xaxis_transform())
        mem = [(v, m) for v, _t, m in line.points if m is not None]
        if mem:
            a2.plot([v for v, _ in mem], [m for _, m in mem], style, marker="o", label=line.label, color=line_color)
    for ax, ylabel in ((a1, "thousands of tokens/s"), (a2, "peak memory (GiB)")):
        ax.set_xlabel(fieldname)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    a1.yaxis.set_major_formatter(THOUSANDS)
    handles, labels = a1.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, -0.08 if not narrow else -0.06),
                   ncol=1 if narrow else 2, frameon=False)
    fig.suptitle(_title(title, int(7.5 * width)))
    _tight_layout(fig)
    return _png(fig)


def sweep_charts(sweeps: list[tuple[tuple[str, str], list[series.SweepLine]]]) -> list[Chart]:
    """One chart per sweep (name, field) of harness.analysis.series.sweep_lines."""
    charts = []
    for i, ((name, fieldname), lines) in enumerate(sweeps):
        charts.append((f"sweep-{i}.png", sweep_chart(lines, fieldname, f"Sweep {name}: tokens/s and memory against {fieldname}"),
                       (f"Sweep {name}: tokens/s and peak memory against {fieldname}, one line per rung, device and env; "
                        f"star = the knee (smallest value within {KNEE_TOLERANCE:.0%} of the line's best tokens/s); x = a "
                        f"value that did not run (its status beside it); dashed = the user's logged numbers. "
                        f"{MEMORY_DEFINITION.capitalize()}.")))
    return charts
