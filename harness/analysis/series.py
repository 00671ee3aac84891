"""What the report's charts draw, computed here so that harness.report only renders: the ladder's bars per plan with the
user's logged numbers that match them, the landscape over torch versions, the cross-version and cross-GPU deltas, and
each point's interval (always stats.Estimate.bounds, the cell's own interval: one rule for every chart). No torch import,
no matplotlib.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.analysis import stats
from harness.analysis.context import Compare
from harness.analysis.dataset import outcome, torch_version_key
from harness.analysis.devices import is_cpu
from harness.analysis.group import Group, estimate
from harness.analysis.sweep import KNEE_TOLERANCE, MEMORY_DEFINITION  # noqa: F401 (the sweep charts' caption)
from harness.analysis.tables.ladder import plan_is_cumulative
from harness.record.model import OURS, public_version

if TYPE_CHECKING:
    from harness.analysis.tables.cross import Cross

MIN_VERSIONS = 3  # fewer torch builds on one device: the versions table says it all, no landscape chart


@dataclass(frozen=True)
class Point:
    """One value with its interval (absolute ends; None where there is no noise estimate)."""

    value: float
    low: float | None = None
    high: float | None = None

    @property
    def errors(self) -> tuple[float, float]:
        """(below, above) for an error bar; 0 where there is no interval."""
        if self.low is None or self.high is None:
            return 0.0, 0.0
        return max(0.0, self.value - self.low), max(0.0, self.high - self.value)


def throughput_point(est: stats.Estimate) -> Point | None:
    """tokens/s with its interval (stats.Estimate.bounds: the run-to-run spread's, and its invocation's offset where
    measured)."""
    if est.point is None:
        return None
    bounds = est.bounds()
    return Point(est.point) if bounds is None else Point(est.point, *bounds)


@dataclass
class Series:
    """One bar series of a ladder chart: a (device, env, B, T) cell, or the user's log at one B and T."""

    label: str
    reference: bool  # the user's logged single samples
    points: dict[str, Point] = field(default_factory=dict)  # rung -> tokens/s
    failed: dict[str, str] = field(default_factory=dict)  # rung -> outcome, where it did not run ok
    device: str = ""
    batch_size: int | None = None
    on_cpu: bool = False  # tokens/s a hundred times smaller than a GPU's: a chart keeps the two apart


@dataclass
class LadderChart:
    plan: str
    rungs: list[str]  # in the plan's order
    series: list[Series]

    @property
    def title(self) -> str:
        """The answer: first -> last rung, how many times the tokens/s, here and in the user's log; for a plan whose
        rungs each change one thing against the first, the range of those changes and the fastest rung."""
        first, last = self.rungs[0], self.rungs[-1]
        if not plan_is_cumulative(self.plan):
            changes = {(s.label, r): p.value / s.points[first].value - 1 for s in self.series if not s.reference
                       and first in s.points for r, p in s.points.items() if r != first}
            if not changes:
                return f"Plan {self.plan}: tokens/s per rung"
            fastest = max(changes, key=changes.get)[1]
            return (f"Each rung against {first}: {min(changes.values()):+.0%} to {max(changes.values()):+.0%} "
                    f"tokens/s here (fastest: {fastest})")

        def ratios(reference: bool) -> list[float]:
            return [s.points[last].value / s.points[first].value for s in self.series
                    if s.reference == reference and first in s.points and last in s.points]
        ours, theirs = ratios(False), ratios(True)
        if not ours:
            return f"Plan {self.plan}: tokens/s per rung"
        text = f"{first} -> {last}: " + (f"{min(ours):.1f}x" if f"{min(ours):.1f}" == f"{max(ours):.1f}"
                                          else f"{min(ours):.1f}-{max(ours):.1f}x") + " the tokens/s here"
        if theirs:
            text += f", {min(theirs):.1f}-{max(theirs):.1f}x in the user's log" if len(theirs) > 1 else f", {theirs[0]:.1f}x in the user's log"
        return text


def ladder_charts(cmp: Compare) -> list[LadderChart]:
    """Per plan: one series per (device, env, B, T) ladder, then the user's logged rungs of the same plan at the
    same B and T (compiled, not a sweep point), each rung once (the first logged line)."""
    return cmp.cached("series.ladders", _ladder_charts)


def _ladder_charts(cmp: Compare) -> list[LadderChart]:
    out = []
    ladders = cmp.ladders()
    references: dict[str, list[Group]] = {}  # by plan: each plan's chart reads its own (thousands, in a year's records)
    for ref in cmp.ds.references:
        references.setdefault(ref.first.plan, []).append(ref)
    for plan in sorted({k[0] for k, _rows in ladders}, key=str):
        rung_index: dict[str, int] = {}
        series, shapes = [], set()
        for (p, gpu, env, b, t, model), rows in ladders:
            if p != plan:
                continue
            s = Series(f"{cmp.name(gpu)} / {env} (B={b}, T={t}{'' if model == OURS else f', {model}'})", False, device=cmp.name(gpu), batch_size=b,
                       on_cpu=is_cpu(gpu))
            for idx, rung, g in rows:
                rung_index.setdefault(rung, idx if idx is not None else 99)
                if isinstance(g, Group) and rung not in s.points and g.throughput.point is not None:
                    s.points[rung] = throughput_point(g.throughput)
                elif not isinstance(g, Group):
                    s.failed.setdefault(rung, outcome(g))
            if s.points or s.failed:
                shapes.add((b, t))
                series.append(s)
        if not series:
            continue
        refs: dict[tuple, Series] = {}
        for ref in references.get(plan, ()):
            w = ref.workload
            shape = (w.batch_size, w.seq_len)
            if not ref.first.ok or shape not in shapes or w.compile == "off" or ref.sweep:
                continue
            s = refs.setdefault(shape, Series(f"user's log, {ref.gpu} (B={shape[0]}, T={shape[1]})", True,
                                              device=ref.gpu, batch_size=shape[0]))
            if ref.first.rung not in s.points:  # the first logged line of a rung (its estimate made once)
                s.points[ref.first.rung] = Point(estimate(ref).point)
            idx = ref.first.rung_index
            rung_index.setdefault(ref.first.rung, 99 if idx is None else idx)
        series += [refs[k] for k in sorted(refs, key=lambda k: (k[0] or 0, k[1] or 0))]
        out.append(LadderChart(plan, sorted(rung_index, key=lambda r: (rung_index[r], r)), series))
    return out


# ---------------------------------------------------------------- the landscape over torch versions

@dataclass(frozen=True)
class VersionPoint:
    """One build of a landscape: tokens/s with its interval, and the memory metric's median peak with its interval
    (the same rule: harness.analysis.cell_values.memory)."""

    version: str  # torch version without its local part (+cu130)
    env: str
    tokens: Point | None
    contended: bool
    memory_metric: str
    memory_mib: tuple[float, float, float] | None  # (median peak, interval low, interval high)


def torch_release(g: Group) -> str:
    return public_version(g.torch_version or "?")


def version_points(groups: list[Group]) -> list[VersionPoint]:
    out = []
    for g in groups:
        metric = g.memory[0]
        est = g.memory_estimate  # the median peak with its interval, by the rule of tokens/s
        memory = None
        if est.point is not None:
            low, high = est.bounds() or (est.point, est.point)
            memory = (est.point / 2**20, low / 2**20, high / 2**20)
        out.append(VersionPoint(torch_release(g), g.env, throughput_point(g.throughput), bool(g.contended), metric,
                                memory))
    return out


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
            if len({torch_release(g) for g in gs}) >= MIN_VERSIONS:
                out.append(((*key, device), sorted(gs, key=lambda g: (torch_version_key(torch_release(g)), g.env))))
    return out


# ---------------------------------------------------------------- the appendix's charts

Landscape = tuple[str, str, str, list[VersionPoint]]  # file name, title, caption, the points


def landscapes(cmp: Compare) -> list[Landscape]:
    """What the report's landscape charts draw, per comparison set measured under 3+ torch versions on one device."""
    out = []
    for n, (key, groups) in enumerate(version_series(cmp), 1):
        g = groups[0]
        first, last = torch_release(groups[0]), torch_release(groups[-1])
        title = f"{g.label} ({g.batch}) on {key[-1]}: {len(groups)} torch builds, {first} to {last}"
        caption = (f"{g.label} ({g.batch}, preset {g.workload.preset}) on {key[-1]} across torch {first}..{last}: "
                   f"tokens/s and peak memory ({stats.interval_name()}s from the run-to-run spread); hollow points were "
                   "measured under contention.")
        out.append((f"versions-{n}.png", title, caption, version_points(groups)))
    return out


MEMORY_PARTS = (("tensors_bytes", "live tensors"), ("allocator_cache_bytes", "allocator cache"),
                ("outside_allocator_bytes", "outside the allocator"))


def _rung_order(g: Group) -> tuple:
    """Plan, rung order, then B and T: how the charts list a cell's groups."""
    plan, _rung, index = g.rungs[0]
    return (str(plan), index if index is not None else 99, g.label, g.workload.batch_size or 0, g.workload.seq_len or 0)


def memory_bars(cmp: Compare) -> list[tuple[str, list[float]]]:
    """(label, GiB per MEMORY_PARTS) of every group with explain.memory_split, devices and envs in the report's order."""
    out = []
    for g in sorted(cmp.ds.groups, key=lambda g: (cmp.gpu_rank[g.gpu], cmp.env_rank[g.env], *_rung_order(g))):
        split = g.memory_split
        if split.available and any(getattr(split, k) is not None for k, _l in MEMORY_PARTS):
            out.append((f"{cmp.name(g.gpu)} / {g.env} / {g.label} ({g.batch})",
                        [(getattr(split, k) or 0) / 2**30 for k, _l in MEMORY_PARTS]))
    return out


@dataclass
class KernelMix:
    """Per (device, env) cell: the bars (label, {category: share in %}), and every category in one fixed order
    (harness.evidence.kernels.CATEGORIES, unknown ones after), so a category has one colour in every report."""

    cells: list[tuple[str, list[tuple[str, dict[str, float]]]]]
    categories: list[str]
    order: list[str]
    kinds: list[str]  # "GPU kernel" / "CPU op"
    total_cells: int
    missed: int = 0  # bars (marked MISSED_MARK) whose profile left out Inductor's kernels (Group.inductor_kernels_missed)


def kernel_mix(cmp: Compare, max_cells: int = 6) -> KernelMix | None:
    from harness.evidence.kernels import CATEGORIES  # the profile's own category names (a constant, no torch)

    cells: dict[tuple, list] = {}
    for g in cmp.ds.groups:
        cats = g.kernel_categories
        if cats:
            cells.setdefault((g.gpu, g.env), []).append((g, {c: (v.share or 0) * 100 for c, v in cats.items()}))
    if not cells:
        return None
    _fold_unknown(cells, CATEGORIES)
    categories = sorted({c for items in cells.values() for _g, shares in items for c in shares})
    keys = sorted(cells, key=lambda k: (cmp.gpu_rank[k[0]], cmp.env_rank[k[1]]))[:max_cells]
    shown = []
    for key in keys:
        items = sorted(cells[key], key=lambda it: _rung_order(it[0]))
        several_b = len({g.workload.batch_size for g, _s in items}) > 1
        shown.append((f"{cmp.name(key[0])} / {key[1]}",
                       [(g.label + (f" B={g.workload.batch_size}" if several_b else "") +
                         (MISSED_MARK if g.inductor_kernels_missed else ""), shares) for g, shares in items]))
    kinds = sorted({"CPU op" if is_cpu(gpu) else "GPU kernel" for gpu, _e in keys})
    missed = sum(label.endswith(MISSED_MARK) for _t, bars in shown for label, _s in bars)
    return KernelMix(shown, categories, list(CATEGORIES) + [c for c in categories if c not in CATEGORIES], kinds,
                     len(cells), missed)


MISSED_MARK = " *"  # a bar whose profile left out Inductor's kernels: its shares are of the rest


MAX_UNKNOWN_CATEGORIES = 4  # categories a record names beyond harness.evidence.kernels' own: the largest kept


def _fold_unknown(cells: dict, known) -> None:
    """A record may name any category (one held 20,000: a chart of 20,000 bars and legend entries never finished):
    the known ones are kept, and the MAX_UNKNOWN_CATEGORIES others with the largest share; the rest is added to
    'other'."""
    largest: dict[str, float] = {}
    for items in cells.values():
        for _g, shares in items:
            for c, v in shares.items():
                if c not in known:
                    largest[c] = max(largest.get(c, 0.0), v)
    kept = set(sorted(largest, key=lambda c: (-largest[c], c))[:MAX_UNKNOWN_CATEGORIES])
    for items in cells.values():
        for _g, shares in items:
            folded = [c for c in shares if c not in known and c not in kept]
            if folded:
                shares["other"] = shares.get("other", 0.0) + math.fsum(shares.pop(c) for c in folded)


@dataclass
class SweepLine:
    label: str
    reference: bool  # the user's logged points (dashed)
    points: list[tuple]  # (value, tokens/s or None, GiB or None), sorted by value
    knee: object = None
    failed: list[tuple] = field(default_factory=list)  # (value, status) of the values that did not run


def sweep_lines(cmp: Compare) -> list[tuple[tuple[str, str], list[SweepLine]]]:
    """Per sweep (name, field): a line per curve of harness.analysis.sweep (one rung in one env on one device), and the
    user's logged points of the same sweep."""
    from harness.analysis.tables.sweeps import sweep_curves

    by_sweep: dict[tuple, list[SweepLine]] = {}
    for c in sweep_curves(cmp):
        pts = [(v, t, None if m is None else m / 2**30) for v, t, m in
               zip(c["values"], c["tokens_per_s"], c["peak_memory_bytes"], strict=True) if isinstance(v, (int, float))]
        failed = [(v, st) for v, t, st in zip(c["values"], c["tokens_per_s"], c["statuses"], strict=True)
                  if t is None and isinstance(v, (int, float))]
        by_sweep.setdefault((str(c["sweep"]), str(c["field"])), []).append(
            SweepLine(f"{c['rung']}, {cmp.name(c['device'])} / {c['env']}", False, sorted(pts, key=lambda p: p[0]),
                      c["knee"], failed))
    refs: dict[tuple, dict[str, list]] = {}
    for g in (r for r in cmp.ds.references if r.first.ok and r.sweep):
        key = (str(g.sweep.name), str(g.sweep.field))
        refs.setdefault(key, {}).setdefault(f"{cmp.name(g.gpu)} / {g.env} (user's log)", []).append(
            (g.sweep.value, estimate(g).point, None if g.memory_bytes is None else g.memory_bytes / 2**30))
    for key, lines in refs.items():
        for label, pts in lines.items():
            by_sweep.setdefault(key, []).append(
                SweepLine(label, True, sorted((p for p in pts if isinstance(p[0], (int, float))), key=lambda p: p[0])))
    return sorted(by_sweep.items())


def cross_version_cells(result: Cross, name=str) -> dict[tuple[str, str], stats.Delta]:
    """What the cross-version heatmap shows: (GPU | rung | B, env vs its baseline) -> its delta in tokens/s."""
    cells = {}
    for r in result.rows:
        if r.d_tokens is not None and r.d_tokens.value is not None:
            cells[(f"{name(r.gpu)} | {r.label} | {r.batch}", f"{r.env} vs {r.base_env}")] = r.d_tokens
    return cells


def cross_gpu_items(result: Cross, name=str) -> list[tuple[str, str, stats.Delta]]:
    """What the cross-GPU chart shows: (rung and B, GPU pair, its delta in tokens/s), in the table's order."""
    items = []
    envs = {r.env for r in result.rows}
    for r in result.rows:
        if r.is_baseline:
            continue
        label = f"{r.label}, B={r.batch_size}" + (f" / {r.env}" if len(envs) > 1 else "")
        items.append((label, f"{name(r.gpu)} vs {name(r.base_gpu)}", r.d_tokens))
    return items
