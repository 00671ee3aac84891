"""Pairs of runs that differ in one knob, and how the report's findings describe a pair. No torch import.

A pair for a knob is two runs of one (GPU, env) cell (or of the user's log, one torch build) whose workloads
differ in that field alone and whose explicit flag overrides are equal (flags that follow from the workload,
like TF32 with precision, may differ); the run with the earlier value (harness.compare's value order) first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations

from harness.analysis import cell_values, stats
from harness.analysis.cells import Cell
from harness.analysis.context import Compare
from harness.analysis.differ import knob_fields, value_key
from harness.analysis.group import Group, estimate
from harness.record.model import ADDED_FIELD_DEFAULTS
from harness.record.parts import Gemm
from harness.runner.flags import flags_for

MIB = 2**20
PADDING_FLAGS = ("inductor_shape_padding", "inductor_comprehensive_padding")  # the compiler's own padding (plan padding)


def mib(value) -> str:
    return "?" if value is None else f"{value / MIB:,.0f}"


def _signed_pct(a, b) -> str:
    return "" if not a or b is None else f" ({(b / a - 1) * 100:+.1f}%)"


# ---------------------------------------------------------------- pairs that differ in one knob

def overrides(g: Group, explicit_defaults: bool = True) -> dict:
    """The group's requested flags that do not follow from its workload (plan or --flag overrides). A flag the
    workload does not imply but that was requested as "default" counts when explicit_defaults (its requested flags,
    and so its flags hash, differ from a run that left it out); harness.analysis.fastest, which names what a run
    changes, leaves it out."""
    implied = _implied_flags(json.dumps(g.workload.to_dict(), sort_keys=True))
    if explicit_defaults:
        return {k: v for k, v in g.flags.items() if implied.get(k, v) != v or k not in implied}
    return {k: v for k, v in g.flags.items() if implied.get(k, "default") != v}


@lru_cache(maxsize=4096)
def _implied_flags(workload: str) -> dict:
    """The flags a workload (its JSON) implies ({} for one flags_for refuses); once per distinct workload (the
    user's log has thousands of lines and a few workloads). Read, never changed, by its callers."""
    try:
        return flags_for(json.loads(workload)).to_dict()
    except ValueError:
        return {}


def padding_setting(g: Group) -> str:
    """'default' or e.g. 'inductor_shape_padding off, inductor_comprehensive_padding off'."""
    changed = [f"{name} {g.flags.get(name)}" for name in PADDING_FLAGS if g.flags.get(name, "default") != "default"]
    return ", ".join(changed) or "default"


def one_knob_pairs(groups: list[Group], field: str, before=None, after=None) -> list[tuple[Group, Group]]:
    """(a, b) with workloads that differ in `field` alone and equal flag overrides; a before b in the natural
    order of the field's values. before/after restrict the values (None: any)."""
    out = []
    for a, b in combinations(groups, 2):
        wa, wb = knob_fields(a.workload.to_dict()), knob_fields(b.workload.to_dict())
        if {k for k in wa.keys() | wb.keys() if wa.get(k) != wb.get(k)} != {field}:
            continue
        if overrides(a) != overrides(b):
            continue
        va, vb = (w.get(field, ADDED_FIELD_DEFAULTS.get(field)) for w in (wa, wb))  # an added field left out: its default
        if value_key(field, va) > value_key(field, vb):
            a, b, va, vb = b, a, vb, va
        if (before is None or va == before) and (after is None or vb == after):
            out.append((a, b))
    return out


def measured_pairs(cmp: Compare, field: str, before=None, after=None) -> list[tuple[tuple, Group, Group]]:
    """One-knob pairs inside each (GPU, env) cell, ladder runs only (sweep points are curves, not rungs)."""
    out = []
    for (gpu, env), groups in cmp.cells().items():
        for a, b in one_knob_pairs([g for g in groups if g.in_ladder], field, before, after):
            out.append(((gpu, env), a, b))
    out.sort(key=lambda t: (cmp.gpu_rank[t[0][0]], cmp.env_rank[t[0][1]], t[1].workload.batch_size or 0,
                            t[1].workload.seq_len or 0, padding_setting(t[1]) != "default", t[1].label))
    return out


def ref_torch(g: Group) -> str:
    return g.first.reference.torch or "torch not stated"


def ok_references(cmp: Compare) -> list[Group]:
    return [r for r in cmp.ds.references if r.first.ok]


def logged_number(values: list[float]) -> tuple[float, str | None]:
    """What a number logged on several lines reads as: their median, and the words that say so ('median of 3 lines,
    443,161-482,160'); a number logged once: itself, and None."""
    if len(values) == 1:
        return values[0], None
    return cell_values.median(values), f"median of {len(values)} lines, {min(values):,.0f}-{max(values):,.0f}"


@dataclass(frozen=True)
class LoggedPoint:
    """One value of a sweep in the user's log (a B of their batch-size lines): its tokens/s and memory, the median of
    its lines where they logged it more than once (a log of a year has many; `lines` says so)."""

    value: object
    tokens_per_s: float | None
    memory_bytes: float | None
    lines: str | None  # logged_number's words, where there are several lines

    def text(self, memory: bool = False) -> str:
        """'B=64 443,161' (with memory: 'B=64 443,161 tokens/s (48,007 MiB)'); several lines: their median, then
        '(median of 217 lines, 443,161-482,160)'."""
        head = f"B={self.value} {self.tokens_per_s:,.0f}" + (" tokens/s" if memory else "")
        more = [self.lines] if self.lines else []
        more += [f"{mib(self.memory_bytes)} MiB"] if memory else []
        return head + (f" ({'; '.join(more)})" if more else "")


def logged_points(groups: list[Group]) -> list[LoggedPoint]:
    """The user's logged sweep lines (reference groups of one sweep, rung and GPU) as one point per value, in value
    order."""
    by_value: dict = {}
    for g in sorted(groups, key=lambda g: g.sweep.value or 0):
        by_value.setdefault(g.sweep.value, []).append(g)
    out = []
    for value, gs in by_value.items():
        speeds = [t for t in (estimate(g).point for g in gs) if t is not None]
        memory = [m for m in (g.memory_bytes for g in gs) if m is not None]
        speed, lines = logged_number(speeds) if speeds else (None, None)
        out.append(LoggedPoint(value, speed, cell_values.median(memory), lines))
    return out


def reference_pairs(cmp: Compare, field: str, before=None, after=None) -> list[tuple[Group, Group]]:
    """One-knob pairs in the user's log, within one GPU class and one stated torch; of several logged
    repeats of a rung, the first line."""
    builds = cmp.cached("reference builds", _reference_builds)
    pairs = [p for groups in builds.values() for p in one_knob_pairs(groups, field, before, after)]
    return sorted(pairs, key=lambda p: (p[0].workload.batch_size or 0, p[0].label))


def _reference_builds(cmp: Compare) -> dict[tuple, list[Group]]:
    """(GPU class, stated torch) -> the user's logged rungs under it, the first line of each (once per compare: the
    findings and answers ask for pairs of several knobs, and a year of logs has thousands of lines)."""
    firsts: dict[tuple, Group] = {}
    for r in sorted(ok_references(cmp), key=lambda g: g.first.reference.line or 0):
        key = (r.gpu, ref_torch(r), r.workload.batch_size, r.workload.seq_len, r.first.rung,
               tuple(sorted(overrides(r).items())), bool(r.sweep))
        firsts.setdefault(key, r)
    by_build: dict[tuple, list[Group]] = {}
    for (gpu, torch, *_rest), r in firsts.items():
        by_build.setdefault((gpu, torch), []).append(r)
    return by_build


def where(cmp: Compare, gpu: str, env: str, g: Group) -> str:
    torch = cmp.ds.env_versions.get(env)
    return f"{cmp.ds.name(gpu)} / {env}" + (f" (torch {torch})" if torch else "") + f", {g.batch}"


def cell_label(cmp: Compare, gpu: str, env: str, g: Group) -> str:
    """'h100-80g B=16', with the env where the records hold several ('epyc / latest B=4'): `where`'s short form."""
    several = len(cmp.env_rank) > 1
    return f"{cmp.name(gpu)}" + (f" / {env}" if several else "") + f" B={g.workload.batch_size}"


def ref_where(r: Group) -> str:
    return f"the user's log ({r.gpu}, {ref_torch(r)}), {r.batch}"


def memory_text(a: Group, b: Group) -> str:
    """Both memory metrics a CUDA run has (allocator peak and NVML device used), else the one there is."""
    parts = []
    metric, _values = a.memory
    parts.append(f"{metric} {mib(a.memory_bytes)} -> {mib(b.memory_bytes)} MiB{_signed_pct(a.memory_bytes, b.memory_bytes)}")
    if a.kind == "measured":
        da, db = a.summary_median("device_used_bytes"), b.summary_median("device_used_bytes")
        if da is not None and db is not None and metric != "device used":
            parts.append(f"device used {mib(da)} -> {mib(db)} MiB{_signed_pct(da, db)}")
    return ", ".join(parts)


def speed_text(cmp: Compare, a: Group, b: Group) -> str:
    if a.kind == "reference":
        ea, eb = estimate(a), estimate(b)
        delta = stats.ratio(ea, eb)[0]
        return f"tokens/s {ea.point:,.0f} -> {eb.point:,.0f} ({Cell(delta).brief()})"
    return f"tokens/s {a.throughput.point:,.0f} -> {b.throughput.point:,.0f} ({Cell(cmp.delta(a, b)).brief()})"


def lm_head_roles(g: Group) -> dict[str, Gemm]:
    """role -> the kernel capture's lm_head GEMM entry (explain.kernels.vocab_gemms), when profiled."""
    return {v.role: v for v in g.vocab_gemms}


def lm_head_text(g: Group, label: str) -> str | None:
    """What the profile saw of the lm_head GEMMs: which roles ran at N = vocab, which padded, which not seen."""
    if not g.kernels:
        return None
    roles = lm_head_roles(g)
    vocab = g.workload.vocab_size
    seen = []
    for role in ("forward", "backward-input", "backward-weight"):
        v = roles.get(role)
        if v is None:
            seen.append(f"{role} not seen at {vocab}")
        elif v.padded_to:
            seen.append(f"{role} padded to {v.padded_to}")
        elif v.row_stride:
            seen.append(f"{role} at {vocab} with row stride {v.row_stride}")
        else:
            seen.append(f"{role} at {vocab}")
    return f"{label}: " + ", ".join(seen)
