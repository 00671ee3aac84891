"""The users' questions (../shared/seeds/), each computed once per Compare as a typed result that both the report's
answers (harness.analysis.answers) and its findings (harness.analysis.findings) read, so the two never pick different
runs for one question. No torch import.

  tf32      memory with TF32 on against IEEE fp32, same rung otherwise: the measured pairs (every padding setting,
            and at torch's default), the user's logged pairs, and the compiler's padding A/B (PaddingEffect)
  vocab     vocab 50257 -> 50304: the same, for tokens/s
  versions  the user's logged torch builds of one rung and B, and our runs beside them
  batch     how far B grows: every batch_size sweep we ran, and the user's logged B sweeps
The fastest run and how close to the hardware it is: harness.analysis.fastest (its overviews). Between measured envs
and devices: harness.analysis.verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.analysis import stats
from harness.analysis.context import Compare
from harness.analysis.group import Group, run_ids
from harness.analysis.knob_pairs import (
    MIB,
    LoggedPoint,
    cell_label,
    logged_points,
    measured_pairs,
    ok_references,
    padding_setting,
    ref_torch,
    reference_pairs,
    where,
)
from harness.analysis.tables.sweeps import sweep_curves

DEFAULT = "default"  # padding_setting of a run at torch's default compiler padding


# ---------------------------------------------------------------- the compiler's padding A/B

@dataclass(frozen=True)
class PaddingEffect:
    """One knob's effect in one cell with the compiler's padding at torch's default and with a padding setting."""
    where: str
    label: str  # where, short: 'h100-80g B=16'
    setting: str  # e.g. 'inductor_shape_padding off, inductor_comprehensive_padding off'
    default: float
    off: float
    records: tuple[str, ...]

    def sentence(self, what: str, unit: str, diff_unit: str | None = None) -> str:
        """How much of an effect is the compiler's own padding: its value at torch's default against its value with
        the padding off. `unit` follows each value ('%', ' MiB'), `diff_unit` their difference ('pp' for percentages)."""
        return (f"{what} on {self.where}: {self.default:+,.1f}{unit} with the compiler's padding at torch's default, "
                f"{self.off:+,.1f}{unit} with {self.setting}: the difference, {self.default - self.off:+,.1f}"
                f"{diff_unit or unit}, is the compiler's padding.")


def padding_clause(effects: list[PaddingEffect], unit: str, digits: int) -> str:
    """The key findings' short form of padding A/Bs, grouped by setting, each named by its cell: '; with S: +0 MiB
    against +2,782 MiB at torch's default on h100-80g B=16, +0 MiB against +5,731 MiB ... on h200 B=16'."""
    by_setting: dict[str, list[PaddingEffect]] = {}
    for e in effects:
        by_setting.setdefault(e.setting, []).append(e)

    def value(v: float) -> str:
        return f"{v:+,.{digits}f}{unit}"
    return "".join(f"; with {setting}: " + ", ".join(f"{value(e.off)} against {value(e.default)} at torch's default on "
                                                     f"{e.label}" for e in group)
                   for setting, group in by_setting.items())


def _padding_effects(cmp: Compare, pairs, measure) -> list[PaddingEffect]:
    """The same knob's effect with the compiler's padding at torch's default and with it switched off (plan
    `padding`), per cell and padding setting."""
    by_cell: dict[tuple, dict[str, tuple]] = {}
    for cell, a, b in pairs:  # the same two workloads, once per padding setting
        by_cell.setdefault((cell, a.workload_hash, b.workload_hash), {})[padding_setting(a)] = (a, b)
    out = []
    for (cell, _wa, _wb), settings in by_cell.items():
        if DEFAULT not in settings or len(settings) < 2:
            continue
        a0, b0 = settings[DEFAULT]
        base = measure(a0, b0)
        for setting, (a, b) in settings.items():
            if setting == DEFAULT or base is None or measure(a, b) is None:
                continue
            out.append(PaddingEffect(where(cmp, *cell, a0), cell_label(cmp, *cell, a0), setting, base, measure(a, b),
                                     tuple(run_ids(a0, b0, a, b))))
    return out


# ---------------------------------------------------------------- one knob: TF32's memory, the vocab pad's speed

@dataclass(frozen=True)
class KnobQuestion:
    """The runs that answer a question about one knob: measured pairs (cell, a, b) that differ in it alone, under
    every setting of the compiler's padding (`every`) and at torch's default (`default`), the user's logged pairs
    (a, b), and the padding A/Bs among the measured pairs."""
    every: list[tuple[tuple, Group, Group]]
    default: list[tuple[tuple, Group, Group]]
    refs: list[tuple[Group, Group]]
    effects: list[PaddingEffect]

    @property
    def records(self) -> tuple[str, ...]:
        return (tuple(i for _c, a, b in self.every for i in run_ids(a, b))
                + tuple(i for a, b in self.refs for i in run_ids(a, b)))


def _knob(cmp: Compare, every, refs, measure) -> KnobQuestion:
    default = [p for p in every if padding_setting(p[1]) == DEFAULT]
    return KnobQuestion(every, default, refs, _padding_effects(cmp, every, measure))


def tf32(cmp: Compare) -> KnobQuestion:
    """fp32 -> tf32; a padding A/B measures the change in memory, in MiB."""
    def mib_change(a: Group, b: Group) -> float | None:
        return None if a.memory_bytes is None or b.memory_bytes is None else (b.memory_bytes - a.memory_bytes) / MIB
    return cmp.cached("question tf32", lambda c: _knob(c, measured_pairs(c, "precision", "fp32", "tf32"),
                                                       reference_pairs(c, "precision", "fp32", "tf32"), mib_change))


def vocab(cmp: Compare) -> KnobQuestion:
    """vocab 50257 -> 50304; a padding A/B measures the change in tokens/s, in %."""
    def pct_change(a: Group, b: Group) -> float | None:
        d = cmp.delta(a, b)
        return None if d.value is None else d.value * 100

    def make(c: Compare) -> KnobQuestion:
        every = [p for p in measured_pairs(c, "vocab_size") if p[1].workload.vocab_size == 50257]
        refs = [p for p in reference_pairs(c, "vocab_size") if p[0].workload.vocab_size == 50257]
        return _knob(c, every, refs, pct_change)
    return cmp.cached("question vocab", make)


# ---------------------------------------------------------------- torch builds in the user's log

@dataclass(frozen=True)
class LoggedBuilds:
    """One rung at one B and T on one GPU in the user's log under two stated torch builds (the first line of each,
    in log order), and our ladder runs of that rung, B and T beside them."""
    gpu: str
    rung: str
    batch_size: int
    seq_len: int
    builds: tuple[tuple[str, Group], tuple[str, Group]]
    beside: list[Group]


def versions(cmp: Compare) -> list[LoggedBuilds]:
    return cmp.cached("question versions", _versions)


def _versions(cmp: Compare) -> list[LoggedBuilds]:
    logged: dict[tuple, dict[str, Group]] = {}
    for r in sorted(ok_references(cmp), key=lambda g: g.first.reference.line or 0):
        if ref_torch(r) == "torch not stated":
            continue
        key = (r.gpu, r.first.rung, r.workload.batch_size, r.workload.seq_len, r.workload.compile)
        logged.setdefault(key, {}).setdefault(ref_torch(r), r)
    out = []
    for (gpu, rung, b, t, _c), builds in logged.items():
        if len(builds) < 2:
            continue
        beside = [g for g in cmp.ds.groups if g.in_ladder and rung in {r for _p, r, _i in g.rungs}
                  and g.workload.batch_size == b and g.workload.seq_len == t]
        first, second = list(builds.items())[:2]
        out.append(LoggedBuilds(gpu, rung, b, t, (first, second), beside))
    return out


# ---------------------------------------------------------------- how far B grows

@dataclass(frozen=True)
class BatchSweep:
    """One batch_size sweep we ran (harness.analysis.sweep's curve): the values that ran (B, tokens/s, peak memory
    bytes), those that did not (B, status), the knee, and the fastest B against the smallest."""
    curve: dict
    ran: list[tuple[int, float, float | None]]
    failed: list[tuple[int, str]]
    groups: dict  # B -> Group
    best_vs_smallest: stats.Delta

    @property
    def smallest(self) -> tuple[int, float, float | None]:
        return min(self.ran, key=lambda p: p[0])

    @property
    def largest(self) -> tuple[int, float, float | None]:
        return max(self.ran, key=lambda p: p[0])

    @property
    def best(self) -> tuple[int, float, float | None]:
        return max(self.ran, key=lambda p: p[1])


@dataclass(frozen=True)
class LoggedSweep:
    """One batch_size sweep in the user's log (of one name, rung and GPU): its points that logged tokens/s."""
    name: str
    rung: str
    gpu: str
    groups: list[Group]
    points: list[LoggedPoint]

    @property
    def best(self) -> LoggedPoint:
        return max(self.points, key=lambda p: p.tokens_per_s)


@dataclass(frozen=True)
class Batch:
    sweeps: list[BatchSweep]
    logged: list[LoggedSweep]


def batch(cmp: Compare) -> Batch:
    return cmp.cached("question batch", _batch)


def _batch(cmp: Compare) -> Batch:
    sweeps = []
    for c in sweep_curves(cmp):
        if c["field"] != "batch_size":
            continue
        ran = [(v, t, m) for v, t, m in zip(c["values"], c["tokens_per_s"], c["peak_memory_bytes"], strict=True)
               if t is not None]
        failed = [(v, s) for v, t, s in zip(c["values"], c["tokens_per_s"], c["statuses"], strict=True) if t is None]
        if not ran:
            continue
        groups = {g.sweep.value: g for g in cmp.ds.groups if g.sweep and g.sweep.field == "batch_size"
                  and g.gpu == c["device"] and g.env == c["env"] and str(g.sweep.name) == str(c["sweep"])}
        low, best = min(ran, key=lambda p: p[0])[0], max(ran, key=lambda p: p[1])[0]
        d = cmp.delta(groups[low], groups[best]) if low in groups and best in groups else stats.Delta(None)
        sweeps.append(BatchSweep(c, ran, failed, groups, d))
    by_sweep: dict[tuple, list[Group]] = {}
    for r in ok_references(cmp):
        if r.sweep and r.sweep.field == "batch_size":
            by_sweep.setdefault((r.sweep.name, r.first.rung, r.gpu), []).append(r)
    logged = []
    for (name, rung, gpu), groups in by_sweep.items():
        points = [p for p in logged_points(groups) if p.tokens_per_s is not None]
        if points:
            logged.append(LoggedSweep(name, rung, gpu, groups, points))
    return Batch(sweeps, logged)
