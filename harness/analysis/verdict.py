"""The answer first: for each pair of envs on one device and each pair of devices under one env, is one faster or
leaner, by how much, how sure, and what changed underneath. What harness.compare prints before any table, and the
top of the report. No torch import.

A pair's speed is the geometric mean of its tokens/s ratios over the rungs both sides ran ok (each rung's ratio with
its log form, their mean: harness.analysis.stats.geomean, one closed-form interval), judged by the same rule
as every delta. Its memory is the geometric mean of the per-rung peak-memory ratios, with how many rungs moved beyond
noise. The rung that changed most is named, and, where its change is beyond noise, the one line underneath that moved
most: the kernel (or kernel category) whose time per step changed most, else the memory-split part that moved most
(a change within noise is not explained: the kernel times of one build move by noise too). It is computed from the
cross-version and cross-device results (harness.analysis.tables.cross), so it obeys the comparability rule, the
baselines and the left-out runs of those tables.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from harness.analysis import stats
from harness.analysis.context import Compare
from harness.analysis.devices import apart
from harness.analysis.group import Group
from harness.analysis.tables.cross import CrossRow, cross
from harness.analysis.tables.loss import parity_rows
from harness.analysis.tables.underneath import kernel_diff
from harness.record.model import OURS

MEMORY_PARTS = (("tensors_bytes", "live tensors"), ("allocator_cache_bytes", "allocator cache"),
                ("outside_allocator_bytes", "memory outside the allocator"))


SERIES = 4  # more pairs of one kind than this are said as one: a device's env pairs (a bisect's or landscape's
# builds), or one pair of devices compared under many envs (the same landscape at two thread counts)


@dataclass
class Pair:
    """Two envs on one device (across "env") or two devices under one env (across "gpu"): other against base."""

    across: str
    same: str  # the device (across env) or the env (across gpu)
    base: str
    other: str
    model: str = OURS  # the model both sides trained: two models are two pairs, never one mean over their rungs
    rows: list[CrossRow] = field(default_factory=list)  # the rungs both ran ok, other against base
    missing: int = 0  # rungs compared in the tables but not ok on one side (their status is in the tables)
    speed: stats.Delta = field(default_factory=lambda: stats.Delta(None))
    memory: stats.Delta | None = None
    memory_metric: str | None = None
    memory_changed: int = 0  # rungs whose memory delta is beyond noise
    memory_judged: int = 0  # rungs whose memory delta has a noise estimate (2+ runs a side)
    changed: int = 0  # rungs whose tokens/s delta is beyond noise
    most: CrossRow | None = None  # the rung whose tokens/s changed most
    underneath: str | None = None  # for that rung, the change underneath that moved most


@dataclass
class Verdict:
    pairs: list[Pair]
    parity_ok: int
    parity_drift: list  # ParityRow of the cells whose loss drifted
    left_out: Counter  # LeftOut.kind -> count
    contended: list  # RecordView of the runs left out as contended
    not_ok: Counter  # status -> count of the runs not ok
    devices: list[tuple[str, str]]  # (alias, full label), in the device order
    noise: list = field(default_factory=list)  # DeviceNoise of each compared device, in the device order
    apart: list = field(default_factory=list)  # devices.Apart: a folder whose device no other folder has


def extremes(pairs: list[Pair]) -> tuple[Pair, Pair]:
    """(slowest, fastest) of many pairs by their tokens/s (a pair without a number is neither, unless none has one):
    what a series of pairs is said by, in the verdict and in the report's key findings."""
    slowest = min(pairs, key=lambda p: p.speed.value if p.speed.value is not None else math.inf)
    fastest = max(pairs, key=lambda p: p.speed.value if p.speed.value is not None else -math.inf)
    return slowest, fastest


def series_key(p: Pair) -> tuple:
    """The series a pair is one of: a device's env pairs ("env", device), or one pair of devices under its envs ("gpu",
    base, other)."""
    return ("env", p.same, p.model) if p.across == "env" else ("gpu", p.base, p.other, p.model)


def by_series(pairs: list[Pair]) -> dict[tuple, list[Pair]]:
    """The pairs by series_key, each series in the pairs' order: one of more than SERIES pairs is said as one (the
    verdict's blocks, the report's key findings)."""
    out: dict[tuple, list[Pair]] = {}
    for p in pairs:
        out.setdefault(series_key(p), []).append(p)
    return out


def verdict(cx: Compare) -> Verdict:
    """Computed once per Compare."""
    return cx.cached("verdict", _verdict)


def _verdict(cx: Compare) -> Verdict:
    pairs = [p for across in ("env", "gpu") for p in _pairs(cx, across)]
    parity = [r for r in parity_rows(cx) if r.parity in ("ok", "DRIFT")]
    return Verdict(
        pairs=pairs, parity_ok=sum(r.parity == "ok" for r in parity), parity_drift=[r for r in parity if r.parity == "DRIFT"],
        left_out=_count_kinds(cx.ds.left_out), contended=[r for _p, r in cx.ds.contended],
        not_ok=Counter(r.status for _p, r in cx.ds.failed),
        devices=[(cx.name(g), g) for g in dict.fromkeys([*cx.ds.gpus(), *(r.device_label for _p, r in cx.ds.contended)])],
        noise=[cx.ds.noise[g] for g in cx.ds.gpus() if g in cx.ds.noise],
        apart=apart(cx.ds.identities, cx.ds.sources, cx.ds.env_order, cx.ds.gpu_order))


def _count_kinds(left_out) -> Counter:
    counts = Counter()
    for x in left_out:
        counts[x.kind] += x.count
    return counts


def _pairs(cx: Compare, across: str) -> list[Pair]:
    out: dict[tuple, Pair] = {}
    for r in cross(cx, across).rows:
        if r.is_baseline:
            continue
        base = r.base_env if across == "env" else r.base_gpu
        model = next((g.model for g in (r.group, r.base) if g is not None), OURS)
        pair = out.setdefault((r.same, base, r.value, model), Pair(across, r.same, base, r.value, model))
        if r.group is not None and r.base is not None:
            pair.rows.append(r)
        else:
            pair.missing += 1
    rank = cx.env_rank if across == "env" else cx.gpu_rank
    same_rank = cx.gpu_rank if across == "env" else cx.env_rank
    for pair in out.values():
        _judge(cx, pair)
    return sorted(out.values(), key=lambda p: (same_rank.get(p.same, 99), rank.get(p.base, 99), rank.get(p.other, 99),
                                               p.model != OURS, p.model))


def _judge(cx: Compare, pair: Pair) -> None:
    rows = pair.rows
    if not rows:
        return
    pair.speed = stats.geomean([stats.ratio(r.base.throughput, r.group.throughput, cx.floor) for r in rows], cx.floor)
    pair.changed = sum(r.d_tokens.beyond for r in rows)
    metrics = {r.base.memory[0] for r in rows} | {r.group.memory[0] for r in rows}
    memory = [(r.base.memory_estimate, r.group.memory_estimate) for r in rows]
    if len(metrics) == 1 and all(a.point and b.point for a, b in memory):
        pair.memory_metric = metrics.pop()
        pair.memory = stats.geomean([stats.ratio(a, b, cx.floor) for a, b in memory], cx.floor)
        pair.memory_changed = sum(r.d_memory.beyond for r in rows)
        pair.memory_judged = sum(r.d_memory.verdict in (stats.BEYOND, stats.WITHIN) for r in rows)
    known = [r for r in rows if r.d_tokens.value is not None]
    pair.most = max(known, key=lambda r: abs(r.d_tokens.value), default=None)
    # what changed underneath explains a decided change only: a change within noise has no cause to name, and the
    # kernels' own times move by run-to-run noise too (an A/A pair's aten::mm moved 23% by itself)
    if pair.most is not None and pair.most.d_tokens.beyond:
        pair.underneath = underneath(pair.most.base, pair.most.group)


def underneath(a: Group, b: Group) -> str | None:
    """The one change underneath a pair of comparable groups that moved most: the kernel or kernel category whose
    time per step changed most (from their kernel profiles), else the memory-split part that moved most."""
    found = kernel_diff(a, b, top=None)
    if found is not None:
        rows = [r for r in found[0] if r[3] is not None]
        # a kernel (or the lm_head GEMM, the attention kernels) before a whole category of them
        kernels = [r for r in rows if not r[0].startswith("time in category")]
        if kernels or rows:
            what, va, vb, impact = max(kernels or rows, key=lambda r: abs(r[3]))
            return f"{what}: {va} -> {vb} ({impact:+,.0f} us/step)"
    sa, sb = a.memory_split, b.memory_split
    if sa.available and sb.available:
        moved = [(label, getattr(sa, key), getattr(sb, key)) for key, label in MEMORY_PARTS
                 if getattr(sa, key) is not None and getattr(sb, key) is not None]
        if moved:
            label, va, vb = max(moved, key=lambda m: abs(m[2] - m[1]))
            return f"{label}: {va / 2**30:,.2f} -> {vb / 2**30:,.2f} GiB at the peak"
    return None
