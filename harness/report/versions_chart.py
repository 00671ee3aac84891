"""The version landscape chart: one rung's tokens/s and peak memory against the torch version, from any records of
one comparison set (same workload and flags) on one device under three or more torch versions (harness.bisect
--landscape draws it; the report draws it for every such set). No torch import.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from harness.analysis.context import Compare
from harness.analysis.dataset import torch_version_key
from harness.analysis.group import Group

MIN_VERSIONS = 3  # fewer: the versions table says it all


def _version(g: Group) -> str:
    return str(g.torch_version or "?").split("+", 1)[0]


def version_series(cmp: Compare) -> list[tuple[tuple, list[Group]]]:
    """[(set key + device, groups oldest torch first)] for every comparison set measured under 3+ torch versions on
    one device (one group per env; two envs with the same torch both stay, labelled by env)."""
    out = []
    for key, groups in cmp.sets().items():
        by_device: dict[str, list[Group]] = {}
        for g in groups:
            if g.throughput.point is not None:
                by_device.setdefault(g.gpu, []).append(g)
        for device, gs in by_device.items():
            if len({_version(g) for g in gs}) >= MIN_VERSIONS:
                out.append(((*key, device), sorted(gs, key=lambda g: (torch_version_key(_version(g)), g.env))))
    return out


def draw(groups: list[Group], title: str, boundary: tuple[str, str] | None = None, png: bool = True):
    """Two panels over the versions: tokens/s with its 95% bootstrap interval, and peak memory with its range over
    repeats (median marked); contended points hollow. `boundary`: two versions to mark (a bisect's answer)."""
    versions = [_version(g) for g in groups]
    labels = [v if versions.count(v) == 1 else f"{v}\n({g.env})" for v, g in zip(versions, groups)]
    x = np.arange(len(groups))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(7.0, 0.62 * len(groups) + 2), 6.4), sharex=True)
    tps = np.array([g.throughput.point for g in groups], dtype=float)
    err = np.zeros((2, len(groups)))
    for i, g in enumerate(groups):
        if g.throughput.boot is not None:
            low, high = np.percentile(g.throughput.boot, [2.5, 97.5])
            err[:, i] = [max(0.0, tps[i] - low), max(0.0, high - tps[i])]
    busy = np.array([bool(g.contended) for g in groups])
    top.errorbar(x, tps, yerr=err, fmt="-", color="tab:blue", capsize=3, lw=1)
    top.scatter(x[~busy], tps[~busy], color="tab:blue", zorder=3, label="tokens/s (95% CI)")
    if busy.any():
        top.scatter(x[busy], tps[busy], facecolors="white", edgecolors="tab:blue", zorder=3, label="contended run(s)")
    top.set_ylabel("tokens/s")
    top.legend(loc="best", fontsize=8)
    top.grid(alpha=0.3)
    mem = [(g.memory[0], [v / 2**20 for v in g.memory[1]]) for g in groups]
    metric = next((m for m, vs in mem if vs), "peak memory")
    med = np.array([np.median(vs) if vs else np.nan for _m, vs in mem])
    lo = np.array([min(vs) if vs else np.nan for _m, vs in mem])
    hi = np.array([max(vs) if vs else np.nan for _m, vs in mem])
    bottom.errorbar(x, med, yerr=[np.nan_to_num(med - lo), np.nan_to_num(hi - med)], fmt="-o", color="tab:red",
                    capsize=3, lw=1, label=f"{metric} (median, range over repeats)")
    bottom.set_ylabel(f"{metric}, MiB")
    bottom.legend(loc="best", fontsize=8)
    bottom.grid(alpha=0.3)
    bottom.set_xticks(x, labels, rotation=45, ha="right", fontsize=8)
    bottom.set_xlabel("torch version")
    if boundary and all(v in versions for v in boundary):
        i, j = versions.index(boundary[0]), versions.index(boundary[1])
        for ax in (top, bottom):
            ax.axvspan(min(i, j), max(i, j), color="tab:orange", alpha=0.15)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    if not png:
        return fig
    from harness.report.charts import _png

    return _png(fig)


def versions_charts(cmp: Compare) -> list[tuple[str, bytes, str]]:
    """The report's landscape charts: (file name, PNG, caption) per comparison set under 3+ torch versions."""
    charts = []
    for n, (key, groups) in enumerate(version_series(cmp), 1):
        g = groups[0]
        title = f"{g.label} ({g.batch}) on {key[-1]}: {len(groups)} torch builds"
        caption = (f"{g.label} ({g.batch}, preset {g.workload.get('preset')}) on {key[-1]} across torch "
                   f"{_version(groups[0])}..{_version(groups[-1])}: tokens/s (95% bootstrap interval) and peak memory "
                   "(range over repeats); hollow points were measured under contention.")
        charts.append((f"versions-{n}.png", draw(groups, title), caption))
    return charts
