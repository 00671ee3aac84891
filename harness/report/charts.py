"""The report's charts: matplotlib figures drawn from the analyses' typed results and groups, each
returned as (file name, PNG bytes, caption), or None / [] when there is nothing to draw (the report then says so).
"""

from __future__ import annotations

import dataclasses
import io
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.colors
import matplotlib.patches
import matplotlib.pyplot as plt
import matplotlib.text
import matplotlib.ticker
import numpy as np

from harness.analysis import series, stats
from harness.analysis.cells import Cell, fmt_change
from harness.analysis.series import KNEE_TOLERANCE, MEMORY_DEFINITION
from harness.analysis.stats import Delta
from harness.analysis.tables.knobs import Splits
from harness.console.textsafe import CHART_TITLE, CHART_WORD, CROWDED, LABEL, bounded, chart_text, file_part

DPI = 110
# zlib level 3, not Pillow's 6: the same pixels, 4% more bytes, 40% less time compressing (0.74 -> 0.46 s for the
# committed results' 17 wide charts)
PNG_OPTIONS = {"format": "png", "dpi": DPI, "pil_kwargs": {"compress_level": 3}}
Chart = tuple[str, bytes, str]  # file name, PNG, caption


# lines of one text in a chart (a title wrapped; a label: a 2x2 chart's device and env, two lines each), past which
# the rest run on in the last (a name of many lines is not drawn over its neighbours)
CHART_LINES, LABEL_LINES = 8, 4


def _label(text) -> str:
    """A tick label, legend entry or annotation as drawn: each line at most LABEL characters, no word over
    CHART_WORD; a line that had to be shortened is also wrapped at half that (what a phone's chart has room for)."""
    return _lines(text, LABEL, CHART_WORD, wrap=LABEL // 2, most=LABEL_LINES)


def _lines(text, width: int, word: int, wrap: int | None = None, most: int = CHART_LINES) -> str:
    """text in at most `most` lines, each at most `width` characters with no word over `word`
    (harness.console.textsafe.bounded; with `wrap`, a line shortened is wrapped at that), then made safe to draw
    (harness.console.textsafe.chart_text)."""
    lines = str(text).split("\n")
    if len(lines) > most:
        lines[most - 1:] = [" ".join(lines[most - 1:])]
    shown = [bounded(line, width, word) for line in lines]
    if wrap:
        shown = [textwrap.fill(new, wrap) if new != line else new for new, line in zip(shown, lines, strict=True)]
    return chart_text("\n".join(shown))


PER_INCH = 10  # characters of 10-point text an inch of a chart holds (about 13: some room spare)


def _crowded(text) -> str:
    """A name where a few characters' room is all there is (under one of four bars): at most CROWDED characters, in
    lines of half that."""
    return textwrap.fill(bounded(text, CROWDED), CROWDED // 2) if len(str(text)) > CROWDED // 2 else str(text)


def _title(text, width: int) -> str:
    """A title that names what the records hold, wrapped at `width` characters: at most CHART_TITLE characters before
    it is wrapped, no word over CHART_WORD (a long name is shortened, not broken over lines)."""
    return textwrap.fill(bounded(text, CHART_TITLE, CHART_WORD), width)


def _drawable(fig) -> None:
    """Every title, label, legend entry and tick label drawn as written (harness.console.textsafe.chart_text): no control
    characters, no mathtext from a record. Tick labels are drawn from their formatter, so it is changed too. And
    bounded (harness.console.textsafe.bounded), whatever a record holds: tick labels, legend entries and annotations (names,
    mostly) at LABEL characters a line, titles and axis labels at CHART_TITLE, no word over CHART_WORD. Once per
    figure, before anything measures its text (_tight_layout, _png)."""
    if getattr(fig, "_harness_drawable", False):
        return
    fig._harness_drawable = True
    labels = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            formatter = axis.get_major_formatter()
            if isinstance(formatter, matplotlib.ticker.FixedFormatter):
                formatter.seq = [_label(t) for t in formatter.seq]
            elif isinstance(formatter, matplotlib.ticker.FuncFormatter):  # what set_xticks(x, labels) makes
                formatter.func = lambda v, pos, func=formatter.func: _label(func(v, pos))
            labels.update(axis.get_ticklabels())
        labels.update(ax.texts)
    for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes)]:
        if legend is not None:
            labels.update(legend.get_texts())
    for text in fig.findobj(matplotlib.text.Text):
        if text in labels:
            text.set_text(_label(text.get_text()))
        else:
            text.set_text(_lines(text.get_text(), CHART_TITLE, CHART_WORD))


def _tight_layout(fig) -> None:
    """fig.tight_layout() on the text as it will be drawn (_drawable): a record's name as written could be too wide
    to lay out."""
    _drawable(fig)
    fig.tight_layout()


def _png(fig, before_save=None) -> bytes:
    # the text as drawn (_drawable); before_save(fig) runs after that, for layout that measures text (measuring the
    # raw text can fail)
    _drawable(fig)
    if before_save is not None:
        before_save(fig)
    # The tight bounding box, measured at the PNG's dpi without a draw: bbox_inches="tight" first draws the whole
    # figure (rendering disabled) to find it. The same PNGs, about a tenth less drawing time. A figure with a layout
    # engine must be laid out by that draw first, so it keeps "tight" (none of ours has one: tight_layout() is once).
    tight = "tight"
    if fig.get_layout_engine() is None:
        fig.set_dpi(DPI)
        tight = fig.get_tightbbox(fig.canvas.get_renderer()).padded(matplotlib.rcParams["savefig.pad_inches"])
    buf = io.BytesIO()
    fig.savefig(buf, bbox_inches=tight, **PNG_OPTIONS)
    plt.close(fig)
    return buf.getvalue()


# the axis says "thousands of tokens/s"; up to two decimals, so a CPU's ticks at 1,200 and 1,400 tokens/s do not both
# read "1" (trailing zeros dropped: 150,000 reads "150")
THOUSANDS = matplotlib.ticker.FuncFormatter(lambda v, _p: f"{v / 1000:,.2f}".rstrip("0").rstrip("."))
WIDE, NARROW = 8.0, 4.2  # inches: a page's column, and a phone's (the HTML shows the narrow one below 600 px)
PHONE_FONTS = {"font.size": 12, "axes.titlesize": 12, "legend.fontsize": 11, "xtick.labelsize": 11, "ytick.labelsize": 11}


def fonts(width: float):
    """Larger type for a narrow chart: a phone shows it at about 90% of its drawn size."""
    return plt.rc_context(PHONE_FONTS if width < WIDE else {})


# Type for a chart drawn about 8 inches wide: still legible when a phone shrinks it. Text unhinted: FreeType's hinting
# (matplotlib's default) fits each glyph to the pixel grid, which at this dpi reads no better (a heavier "=", uneven
# spacing) and costs a sixth of the drawing (the 13 chart jobs of a report of 100,000 records: 6.6 -> 5.6 s here)
plt.rcParams.update({"font.size": 11, "axes.titlesize": 12, "legend.fontsize": 10, "xtick.labelsize": 10,
                     "ytick.labelsize": 10, "text.hinting": "no_hinting"})


MAX_SERIES = 20  # bars or lines one chart tells apart: tab20's colours; more are drawn in parts of this many


def series_colors(n: int) -> list:
    """n colours a reader tells apart (n <= MAX_SERIES): tab10's (matplotlib's default cycle) up to 10, tab20's past."""
    return list(plt.get_cmap("tab10" if n <= 10 else "tab20").colors)[:n]


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
