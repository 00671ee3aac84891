"""The version landscape chart: one rung's tokens/s and peak memory against the torch version, from any records of
one comparison set (same workload and flags) on one device under three or more torch versions (harness.bisect
--landscape draws it; the report draws it for every such set). It draws harness.analysis.series.VersionPoint as they
are: the series, the intervals and the memory ranges are computed there. No torch import.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from harness.analysis import series, stats
from harness.analysis.series import VersionPoint

# before any figure: the charts' type and text settings (harness.report.figures sets them as it is imported), so this
# chart is laid out and drawn the same wherever it is drawn (harness.bisect, a report's worker or its own process)
from harness.report.figures import _png, _tight_layout


def draw(points: list[VersionPoint], title: str, boundary: tuple[str, str] | None = None, png: bool = True):
    """Two panels over the versions: tokens/s (thousands) with its interval from the run-to-run spread, and peak memory (GiB)
    with its interval by the same rule (median peak marked); contended points hollow. `boundary`: two versions to mark (a
    bisect's answer)."""
    versions = [p.version for p in points]
    labels = [v if versions.count(v) == 1 else f"{v}\n({p.env})" for v, p in zip(versions, points)]
    x = np.arange(len(points))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(7.0, 0.62 * len(points) + 2), 6.4), sharex=True)
    tps = np.array([p.tokens.value / 1000 if p.tokens else np.nan for p in points], dtype=float)
    err = np.array([[e / 1000 for e in p.tokens.errors] if p.tokens else (0.0, 0.0) for p in points]).T
    busy = np.array([p.contended for p in points])
    top.errorbar(x, tps, yerr=err, fmt="-", color="tab:blue", capsize=3, lw=1)
    top.scatter(x[~busy], tps[~busy], color="tab:blue", zorder=3, label=f"tokens/s ({stats.interval_name()})")
    if busy.any():
        top.scatter(x[busy], tps[busy], facecolors="white", edgecolors="tab:blue", zorder=3, label="contended run(s)")
    top.set_ylabel("thousands of tokens/s")
    top.legend(loc="best", fontsize=8)
    top.grid(alpha=0.3)
    gib = [None if p.memory_mib is None else tuple(v / 1024 for v in p.memory_mib) for p in points]
    metric = next((p.memory_metric for p in points if p.memory_mib), "peak memory")
    med = np.array([m[0] if m else np.nan for m in gib])
    lo = np.array([m[1] if m else np.nan for m in gib])
    hi = np.array([m[2] if m else np.nan for m in gib])
    bottom.errorbar(x, med, yerr=[np.nan_to_num(med - lo), np.nan_to_num(hi - med)], fmt="-o", color="tab:red",
                    capsize=3, lw=1, label=f"{metric} (median peak, {stats.interval_name()})")
    bottom.set_ylabel(f"{metric}, GiB")
    bottom.legend(loc="best", fontsize=8)
    bottom.grid(alpha=0.3)
    bottom.set_xticks(x, labels, rotation=45, ha="right", fontsize=8)
    bottom.set_xlabel("torch version")
    if boundary and all(v in versions for v in boundary):
        i, j = versions.index(boundary[0]), versions.index(boundary[1])
        for ax in (top, bottom):
            ax.axvspan(min(i, j), max(i, j), color="tab:orange", alpha=0.15)
    fig.suptitle(title, fontsize=10)
    _tight_layout(fig)
    if not png:
        return fig
    return _png(fig)


def versions_charts(landscapes: list[series.Landscape]) -> list[tuple[str, bytes, str]]:
    """The report's landscape charts (series.landscapes): (file name, PNG, caption) each."""
    return [(name, draw(points, title), caption) for name, title, caption, points in landscapes]
