"""The report's charts: matplotlib figures drawn from the analyses' typed results and groups, each
returned as (file name, PNG bytes, caption), or None / [] when there is nothing to draw (the report then says so).
"""

from __future__ import annotations

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

from harness import sweep as sweepmod
from harness.analysis import stats
from harness.analysis.cells import Cell
from harness.analysis.context import Compare
from harness.analysis.dataset import outcome
from harness.analysis.group import Group, estimate
from harness.analysis.tables.cross import Cross
from harness.analysis.tables.knobs import Splits
from harness.analysis.tables.sweeps import sweep_records
from harness.evidence.kernels import CATEGORIES
from harness.textsafe import chart_text, file_part

DPI = 110
MEMORY_PARTS = (("tensors_bytes", "tensors"), ("allocator_cache_bytes", "allocator cache"),
                ("outside_allocator_bytes", "outside the allocator"))
Chart = tuple[str, bytes, str]  # file name, PNG, caption


def _png(fig) -> bytes:
    # Every title, label, legend entry and tick label drawn as written (harness.textsafe.chart_text): no control
    # characters, no mathtext from a record. Tick labels are drawn from their formatter, so it is changed too.
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            formatter = axis.get_major_formatter()
            if isinstance(formatter, matplotlib.ticker.FixedFormatter):
                formatter.seq = [chart_text(t) for t in formatter.seq]
            elif isinstance(formatter, matplotlib.ticker.FuncFormatter):  # what set_xticks(x, labels) makes
                formatter.func = lambda v, pos, func=formatter.func: chart_text(func(v, pos))
    for text in fig.findobj(matplotlib.text.Text):
        text.set_text(chart_text(text.get_text()))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _ci(g: Group) -> tuple[float, float]:
    est = g.throughput
    if est.boot is None:
        return 0.0, 0.0
    low, high = np.percentile(est.boot, [2.5, 97.5])
    return max(0.0, est.point - low), max(0.0, high - est.point)


MAX_SERIES = 20  # bars or lines one chart tells apart: tab20's colours; more are drawn in parts of this many


def series_colors(n: int) -> list:
    """n colours a reader tells apart (n <= MAX_SERIES): tab10's (matplotlib's default cycle) up to 10, tab20's past."""
    return list(plt.get_cmap("tab10" if n <= 10 else "tab20").colors)[:n]


def ladder_charts(cmp: Compare) -> list[Chart]:
    """One grouped bar chart per plan: tokens/s per rung, one bar per (GPU, env, B, T); the user's log hatched."""
    charts = []
    names: set[str] = set()
    ladders = cmp.ladders()
    for plan in sorted({k[0] for k, _rows in ladders}, key=str):
        series = []  # (label, {rung: (value, err_low, err_high)}, hatch)
        rung_index: dict[str, int] = {}
        shapes = set()
        for (p, gpu, env, b, t), rows in ladders:
            if p != plan:
                continue
            values, failed = {}, {}  # failed: rung -> status, written where its bar would be
            for idx, rung, g in rows:
                rung_index.setdefault(rung, idx if idx is not None else 99)
                if isinstance(g, Group) and rung not in values:
                    values[rung] = (g.throughput.point, *_ci(g))
                elif not isinstance(g, Group):
                    failed.setdefault(rung, outcome(g))
            if values or failed:
                shapes.add((b, t))
                series.append((f"{cmp.ds.name(gpu)} / {env} (B={b}, T={t})", values, None, failed))
        if not series:
            continue
        refs: dict[tuple, dict] = {}
        for ref in cmp.ds.references:
            w = ref.workload
            if ref.first.plan == plan and ref.first.ok and (w.get("batch_size"), w.get("seq_len")) in shapes \
                    and w.get("compile") != "off" and not ref.sweep:
                key = (w.get("batch_size"), w.get("seq_len"))
                refs.setdefault(key, {}).setdefault(ref.first.rung, (estimate(ref).point, 0.0, 0.0))
                idx = ref.first.rung_index
                rung_index.setdefault(ref.first.rung, 99 if idx is None else idx)
        for (b, t), values in sorted(refs.items()):
            series.append((f"user's log, {cmp.ds.references[0].gpu} (B={b}, T={t})", values, "//", {}))
        rungs = sorted(rung_index, key=lambda r: (rung_index[r], r))
        parts = [series[i:i + MAX_SERIES] for i in range(0, len(series), MAX_SERIES)]  # each colour one series
        for part_no, part in enumerate(parts):
            of = f" (series {part_no * MAX_SERIES + 1}-{part_no * MAX_SERIES + len(part)} of {len(series)})" \
                if len(parts) > 1 else ""
            charts.append(_ladder_chart(plan, part, rungs, of, _file_name(f"ladder-{file_part(plan)}", names)))
    return charts


def _ladder_chart(plan: str, series: list, rungs: list[str], of: str, file_name: str) -> Chart:
    """One ladder chart of at most MAX_SERIES series; `of` says which part of the plan's series it is."""
    n = len(series)
    width = 0.8 / n
    colors = series_colors(n)
    fig, ax = plt.subplots(figsize=(min(13.0, max(7.0, 1.3 * len(rungs) + 0.25 * n * len(rungs))), 4.8))
    x = np.arange(len(rungs))
    for i, (label, values, hatch, failed) in enumerate(series):
        ys = [values.get(r, (np.nan, 0, 0)) for r in rungs]
        xs = x - 0.4 + width * (i + 0.5)
        ax.bar(xs, [y[0] for y in ys], width, label=label, hatch=hatch, color=colors[i],
               yerr=np.array([[y[1] for y in ys], [y[2] for y in ys]]) if not hatch else None, capsize=2,
               edgecolor="black" if hatch else None, linewidth=0.5, alpha=0.6 if hatch else 1.0)
        for xi, r in zip(xs, rungs, strict=True):
            if r in failed and r not in values:  # a rung that did not run is said, not left blank
                ax.text(xi, 0, f" {failed[r]}", rotation=90, ha="center", va="bottom", fontsize=8, color="dimgray")
    ax.set_xticks(x, rungs, rotation=20, ha="right")
    ax.set_xlim(-0.5, len(rungs) - 0.5)  # every rung's slot, also where only a status text stands
    ax.set_ylabel("tokens/s (median step; bars: 95% interval)")
    ax.set_title(f"Ladder: plan {plan}{of}")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _p: f"{v:,.0f}"))
    # below the axes, so it never covers a bar
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=min(3, n), frameon=False)
    ax.grid(axis="y", alpha=0.3)
    more = f" More than {MAX_SERIES} series are drawn in parts of {MAX_SERIES}, so each colour names one." if of else ""
    return (file_name, _png(fig), (f"Throughput per rung of plan {plan}{of}, one bar per GPU / env "
            f"(error bars: 95% bootstrap interval, absent where too few samples give none; hatched: the user's logged "
            f"single samples).{more}"))


def _file_name(stem: str, taken: set[str]) -> str:
    """stem.png, or stem-2.png, ... where two plans' names make the same file name once sanitised."""
    name, n = f"{stem}.png", 1
    while name in taken:
        n += 1
        name = f"{stem}-{n}.png"
    taken.add(name)
    return name


def heatmap_chart(result: Cross, name=str) -> Chart | None:
    """Cross-version delta in tokens/s: rows (GPU, rung, B), columns env vs its baseline."""
    cells = {}
    for r in result.rows:
        if r.d_tokens is not None and r.d_tokens.value is not None:
            cells[(f"{name(r.gpu)} | {r.label} | {r.batch}", f"{r.env} vs {r.base_env}")] = r.d_tokens
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
        text = f"{d.value * 100:+.1f}%" + ("" if d.beyond else "\n(noise)" if d.verdict == stats.WITHIN else "\n(no estimate)")
        ax.text(cols.index(c), rows.index(r), text, ha="center", va="center", fontsize=8,
                color="black" if abs(d.value * 100) < 0.6 * limit else "white")
    fig.colorbar(im, ax=ax, label="delta tokens/s vs baseline env (%)" + (" (saturated past the scale)" if clipped else ""),
                 extend="both" if clipped else "neither")
    ax.set_title("Cross-version: tokens/s of each env against the baseline env")
    return ("cross-version.png", _png(fig), ("Cross-version delta in tokens/s (blue: faster than the baseline env; "
            "'(noise)': within noise by the significance rule)."))


def _delta_errors(deltas: list) -> np.ndarray | None:
    """Asymmetric error bars (percent) from the deltas' 95% intervals; zero where a delta has none."""
    if not any(d.low is not None for d in deltas):
        return None
    return np.array([[max(0.0, (d.value - d.low) * 100) if d.low is not None else 0.0 for d in deltas],
                     [max(0.0, (d.high - d.value) * 100) if d.high is not None else 0.0 for d in deltas]])


def cross_gpu_chart(result: Cross, name=str) -> Chart | None:
    """Cross-GPU delta in tokens/s with its 95% interval, one bar per rung and B (the table's order), one colour
    per GPU pair; a rung whose baseline run failed is written where its bar would be, not left out."""
    items = []  # (row label, series, Delta)
    envs = {r.env for r in result.rows}
    for r in result.rows:
        if r.is_baseline:
            continue
        label = f"{r.label}, B={r.batch_size}" + (f" / {r.env}" if len(envs) > 1 else "")
        items.append((label, f"{name(r.gpu)} vs {name(r.base_gpu)}", r.d_tokens))
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
    ax.set_xlabel("delta tokens/s against the baseline GPU (%); whiskers: 95% interval")
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
        left.set_xticks(range(4), [f"{name(g)}\n{v}" for (g, v), _d in quad], fontsize=7)
        left.set_ylabel("effect on tokens/s (%)", fontsize=8)
        left.set_title(textwrap.fill(f"{r.knob} at {r.at}: effect per cell", 70), fontsize=8)
        parts = [("GPU factor", r.gpu_factor), ("version factor", r.version_factor), ("interaction", r.interaction)]
        right.bar(range(3), [(d.value or 0.0) * 100 for _n, d in parts], capsize=3,
                  color=[matplotlib.colors.to_rgba(c, 1.0 if d.beyond else 0.35)
                         for c, (_n, d) in zip(("tab:blue", "tab:orange", "tab:red"), parts, strict=True)],
                  yerr=_delta_errors([d for _n, d in parts if d.value is not None]) if all(d.value is not None for _n, d in parts) else None)
        right.set_xticks(range(3), [f"{n}\n{Cell(d, 'pp').brief()}" for n, d in parts], fontsize=7)
        right.set_ylabel("percentage points", fontsize=8)
        right.set_title(textwrap.fill(r.verdict(name), 60), fontsize=8)
        for ax in (left, right):
            ax.axhline(0, color="black", linewidth=0.8)
            ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Is it the GPU or the torch version? Each knob's effect split over 2 GPUs x 2 envs")
    fig.tight_layout()
    caption = ("Left: the knob's effect on tokens/s in each (GPU, env) cell (colour: GPU, hatched: the second env; outlined "
               "where the interaction is larger than both factors: the cell the effect comes from). Right: GPU factor, version factor and their interaction in percentage points (faded: within noise "
               "or no estimate); whiskers: 95% intervals.")
    if len(rows) > len(shown):
        caption += f" First {len(shown)} of {len(rows)} splits shown (all in the table)."
    return ("factors.png", _png(fig), caption)


def _rung_order(g: Group) -> tuple:
    """Plan, rung order, then B and T: how the charts list a cell's groups."""
    plan, _rung, index = g.rungs[0]
    return (str(plan), index if index is not None else 99, g.label, g.workload.get("batch_size") or 0, g.workload.get("seq_len") or 0)


def memory_chart(cmp: Compare) -> Chart | None:
    bars = []
    for g in sorted(cmp.ds.groups, key=lambda g: (cmp.gpu_rank[g.gpu], cmp.env_rank[g.env], *_rung_order(g))):
        split = g.memory_split
        if split.get("available") and any(split.get(k) is not None for k, _l in MEMORY_PARTS):
            bars.append((f"{cmp.ds.name(g.gpu)} / {g.env} / {g.label} ({g.batch})", [(split.get(k) or 0) / 2**30 for k, _l in MEMORY_PARTS]))
    if not bars:
        return None
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.4 * len(bars) + 1.5)))
    left = np.zeros(len(bars))
    for i, (_k, label) in enumerate(MEMORY_PARTS):
        values = np.array([b[1][i] for b in bars])
        ax.barh(range(len(bars)), values, left=left, label=label)
        left += values
    ax.set_yticks(range(len(bars)), [b[0] for b in bars], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("GiB at peak")
    ax.set_title("Memory split: live tensors, allocator cache, memory outside the allocator")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # outside: never over a bar
    ax.grid(axis="x", alpha=0.3)
    return ("memory-split.png", _png(fig), "Where device memory goes at the peak (explain.memory_split).")


def kernel_mix_chart(cmp: Compare) -> Chart | None:
    cells = {}
    for g in cmp.ds.groups:
        cats = g.kernel_categories
        if cats:
            cells.setdefault((g.gpu, g.env), []).append((g, {c: v.get("share") or 0 for c, v in cats.items()}))
    if not cells:
        return None
    categories = sorted({c for items in cells.values() for _g, shares in items for c in shares})
    keys = sorted(cells, key=lambda k: (cmp.gpu_rank[k[0]], cmp.env_rank[k[1]]))[:6]
    most = max(len(cells[k]) for k in keys)  # wide enough that each bar's label has its own room
    fig, axes = plt.subplots(1, len(keys), figsize=(max(6.0, max(4.2, 0.4 * most) * len(keys)), 5.2), squeeze=False, sharey=True)
    # one colour per category in every report (harness.evidence.kernels.CATEGORIES order), unknown ones after
    order = list(CATEGORIES) + [c for c in categories if c not in CATEGORIES]
    palette = plt.get_cmap("tab20")(np.linspace(0, 1, max(2, len(order))))
    colors = [palette[order.index(c)] for c in categories]
    for ax, key in zip(axes[0], keys):
        items = sorted(cells[key], key=lambda it: _rung_order(it[0]))
        several_b = len({g.workload.get("batch_size") for g, _s in items}) > 1
        bottom = np.zeros(len(items))
        for ci, cat in enumerate(categories):
            values = np.array([shares.get(cat, 0) * 100 for _g, shares in items])
            ax.bar(range(len(items)), values, bottom=bottom, color=colors[ci], label=cat)
            bottom += values
        ax.set_xticks(range(len(items)), [g.label + (f" B={g.workload.get('batch_size')}" if several_b else "") for g, _s in items],
                      rotation=45, ha="right", fontsize=8)
        ax.set_title(f"{cmp.ds.name(key[0])} / {key[1]}", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    kinds = {"CPU op" if g.startswith("cpu: ") else "GPU kernel" for g, _e in keys}
    axes[0][0].set_ylabel(f"share of profiled {' / '.join(sorted(kinds))} time (%)")
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle("Kernel-time mix per rung")
    caption = "Kernel time by category per rung (explain.kernels.by_category)."
    if len(cells) > len(keys):
        caption += f" First {len(keys)} of {len(cells)} (GPU, env) cells shown."
    return ("kernel-mix.png", _png(fig), caption)


def sweep_charts(cmp: Compare) -> list[Chart]:
    """One chart per sweep (name, field): a line per curve of harness.sweep (one rung in one env on one
    device; the knee starred), and the user's logged points of the same sweep dashed."""
    charts_by_sweep: dict[tuple, list] = {}
    for c in sweepmod.sweep_curves(sweep_records(cmp)):
        pts = [(v, t, m) for v, t, m in zip(c["values"], c["tokens_per_s"], c["peak_memory_bytes"], strict=True)
               if isinstance(v, (int, float))]
        failed = [(v, st) for v, t, st in zip(c["values"], c["tokens_per_s"], c["statuses"], strict=True)
                  if t is None and isinstance(v, (int, float))]  # shown where they are, not left out
        label = f"{c['rung']}, {cmp.ds.name(c['device'])} / {c['env']}"
        charts_by_sweep.setdefault((c["sweep"], c["field"]), []).append((label, pts, c["knee"], "-", failed))
    refs: dict[tuple, dict] = {}
    for g in (r for r in cmp.ds.references if r.first.ok and r.sweep):
        key = (str(g.sweep.get("name")), str(g.sweep.get("field")))
        label = f"{cmp.ds.name(g.gpu)} / {g.env} (user's log)"
        refs.setdefault(key, {}).setdefault(label, []).append((g.sweep.get("value"), estimate(g).point, g.memory_bytes))
    for key, lines in refs.items():
        for label, pts in lines.items():
            charts_by_sweep.setdefault(key, []).append((label, [p for p in pts if isinstance(p[0], (int, float))], None, "--", []))
    charts = []
    for i, ((name, fieldname), lines) in enumerate(sorted(charts_by_sweep.items())):
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
        palette = series_colors(min(len(lines), MAX_SERIES))  # past 20 lines they repeat; the legend names each
        for j, (label, pts, knee, style, failed) in enumerate(sorted(lines, key=lambda x: x[0])):
            pts = sorted(pts, key=lambda p: p[0])
            tps = [(v, t) for v, t, _m in pts if t is not None]
            color = None
            if tps:
                line, = a1.plot([v for v, _ in tps], [t for _, t in tps], style, marker="o", label=label,
                                color=palette[j % len(palette)])
                color = line.get_color()
                if knee is not None:
                    a1.plot([knee], [t for v, t in tps if v == knee], "*", markersize=14, color=color)
            for v, status in failed:  # x at the bottom of the axes, with the status
                a1.plot([v], [0.04], "x", color=color or "gray", markersize=9, transform=a1.get_xaxis_transform())
                a1.text(v, 0.08, status, rotation=90, ha="center", va="bottom", fontsize=8, color=color or "gray",
                        transform=a1.get_xaxis_transform())
            mem = [(v, m / 2**30) for v, _t, m in pts if m is not None]
            if mem:
                a2.plot([v for v, _ in mem], [m for _, m in mem], style, marker="o", label=label,
                        color=palette[j % len(palette)])
        for ax, ylabel in ((a1, "tokens/s"), (a2, "peak memory (GiB)")):
            ax.set_xlabel(fieldname)
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        a1.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _p: f"{v:,.0f}"))
        fig.suptitle(f"Sweep: {name}")
        charts.append((f"sweep-{i}.png", _png(fig), (f"Sweep {name}: tokens/s and peak memory against {fieldname}, "
                       f"one line per rung, GPU and env; star = the knee (smallest value within "
                       f"{sweepmod.KNEE_TOLERANCE:.0%} of the line's best tokens/s); x = a value that did not run (its "
                       f"status beside it); dashed = the user's logged numbers. "
                       f"{sweepmod.MEMORY_DEFINITION.capitalize()}.")))
    return charts
