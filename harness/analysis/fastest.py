"""The fastest configuration found, and what it stands against. No torch.

harness.tune uses this while it searches (which knobs helped, the winner, which batch size still needs its loss
checked) and for its final answer; harness.compare (--table fastest) and harness.report (section "Fastest found vs
the user's best vs the peer") use it on whatever records they are given. So the search and the report apply one rule:

  start       where a search begins: rung `start` of plan `fastest` (harness.tune), or, for plan beyond-ladder, the
              seed ladder's last rung (that plan's defaults, its rung best-of-ladder)
  partner     of a run: the start configuration in the same (GPU, env) cell on as many sequences per step (B x
              grad_accum: a start at B=96x2 trains on what a run at 192 does) and the same T; the one at the same B
              first
  equivalent  the run is a start run, or its loss is within tolerance of its partner's (Compare.pair_parity, the
              loss rule of every table). A faster run that is not equivalent is reported as such and never chosen.
  faster      its tokens/s against its partner's is beyond noise and higher (harness.analysis.stats)
  fits        peak memory + headroom <= usable memory (harness.analysis.fit, the batch search's rule, default headroom)
  best        the fastest run that fits and is a start run or equivalent and faster than its partner
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from harness.analysis import fit, stats
from harness.analysis.cells import Memory, fmt_signed_pct
from harness.analysis.context import Compare
from harness.analysis.differ import knob_fields
from harness.analysis.group import Group, estimate
from harness.analysis.knob_pairs import overrides
from harness.analysis.tables.loss import pair_parity
from harness.record.model import ADDED_FIELD_DEFAULTS
from harness.record.view import RecordView
from harness.runner.plan import STACK

FASTEST_PLAN = "fastest"  # harness.tune tags its runs with this plan name
START_RUNG = "start"
COMBINED_RUNG = "combined"  # harness.tune's all-knobs rung before stacks (2026-11-29): its old records read so
SEED_PLAN = "seed-ladder"
# plan -> the (plan, rung) whose runs are that plan's starting point
STARTS = {
    FASTEST_PLAN: {(FASTEST_PLAN, START_RUNG)},
    "beyond-ladder": {("beyond-ladder", "best-of-ladder"), (SEED_PLAN, "fused-adamw-clip")},
}


# ---------------------------------------------------------------- one run against its start

@dataclass
class Candidate:
    group: Group
    partner: Group | None  # the start run of the same cell, B and T (itself for a start run)
    parity: dict | None  # Compare.pair_parity(partner, group)
    delta: stats.Delta | None  # tokens/s against the partner
    fits: bool
    why_not: str | None  # why it does not fit

    @property
    def rung(self) -> str:
        return "+".join(sorted({r for _p, r, _i in self.group.rungs}))

    @property
    def is_start(self) -> bool:
        return self.partner is self.group

    @property
    def single_knob(self) -> bool:
        """A run of one knob: not a stack of knobs ("a+b", harness.runner.plan) nor harness.tune's old rung
        `combined` (records made before stacks)."""
        return not any(STACK in r or r == COMBINED_RUNG for _p, r, _i in self.group.rungs)

    @property
    def equivalent(self) -> bool:
        return self.is_start or (self.parity is not None and self.parity["parity"] == "ok")

    @property
    def faster(self) -> bool:
        return not self.is_start and self.delta is not None and self.delta.beyond and self.delta.value > 0

    @property
    def eligible(self) -> bool:
        return self.fits and (self.is_start or (self.equivalent and self.faster))

    @property
    def tokens_per_s(self) -> float | None:
        return self.group.throughput.point

    @property
    def shape(self) -> tuple:
        """(sequences per optimizer step, T): B, or B x grad_accum; a candidate is judged against the start run
        that trains on as many sequences per step (a stack at B=192 against the start at B=96x2 where the start
        does not fit at 192)."""
        return self.group.workload.samples_per_step, self.group.workload.seq_len

    def parity_text(self, tol: float) -> str:
        if self.is_start:
            return "start"
        if self.partner is None:
            return f"unchecked: no start run at B={self.shape[0]}"
        p = self.parity
        start = "" if self.partner.batch == self.group.batch else f", against the start at {self.partner.batch}"
        if p["parity"] == "DRIFT":
            return (f"NOT EQUIVALENT: loss final {fmt_signed_pct(p['d_final'])}, mean {fmt_signed_pct(p['d_mean'])} "
                    f"(> {tol:.1%}{start})")
        if p["parity"] == "ok":
            return f"ok (final {fmt_signed_pct(p['d_final'])}, mean {fmt_signed_pct(p['d_mean'])}{start})"
        return p["parity"]


def is_start(g: Group, plan: str) -> bool:
    return bool({(p, r) for p, r, _i in g.rungs} & STARTS.get(plan, set()))


def fits(g: Group) -> tuple[bool, str | None]:
    """Every run of g fits its device with the default headroom (harness.analysis.fit); else why the first does not."""
    bad = next((j for j in map(fit.judge, g.records) if not j.fits), None)
    return (True, None) if bad is None else (False, bad.why)


def candidate(cmp: Compare, g: Group, plan: str) -> Candidate:
    """g against the start run of its cell at its B and T."""
    if is_start(g, plan):
        partner = g
    else:
        same = [s for s in cmp.ds.groups if (s.gpu, s.env) == (g.gpu, g.env) and is_start(s, plan)
                and (s.workload.samples_per_step, s.workload.seq_len) == (g.workload.samples_per_step, g.workload.seq_len)]
        # the start at the same micro-batch first (no accumulation between them), then the one with most runs
        partner = max(same, key=lambda s: (s.workload.batch_size == g.workload.batch_size, len(s.records),
                                           s.workload.batch_size or 0)) if same else None
    ok, why = fits(g)
    parity = pair_parity(cmp, partner, g) if partner is not None and partner is not g else None
    delta = cmp.delta(partner, g) if partner is not None and partner is not g else None
    return Candidate(g, partner, parity, delta, ok, why)


def changes(start: Group, g: Group) -> str:
    """What g changes against start, batch size aside: workload fields, and flags that do not follow from them."""
    wa, wb = knob_fields(start.workload.to_dict()), knob_fields(g.workload.to_dict())
    def value(w: dict, k: str):
        return w.get(k, ADDED_FIELD_DEFAULTS.get(k))  # an added field is left out at its default

    parts = [f"{k} {value(wa, k)} -> {value(wb, k)}" for k in sorted(set(wa) | set(wb))
             if k != "batch_size" and value(wa, k) != value(wb, k)]
    fa, fb = overrides(start, explicit_defaults=False), overrides(g, explicit_defaults=False)
    parts += [f"flag {k} {fa.get(k, 'default')} -> {fb.get(k, 'default')}" for k in sorted(set(fa) | set(fb))
              if fa.get(k, "default") != fb.get(k, "default")]
    return "; ".join(parts) or "(the start configuration)"


# ---------------------------------------------------------------- a harness.tune search

@dataclass
class Search:
    """The runs of plan `fastest` in one (GPU, env) cell."""

    gpu: str
    env: str
    start: Group  # the start run made as a rung, at the search's first B
    candidates: list = field(default_factory=list)  # every ok run of the plan in the cell
    failed: list[RecordView] = field(default_factory=list)  # records not ok (unsupported, oom, error, invalid)
    helped: list = field(default_factory=list)  # knob runs at the start's B and T: equivalent and faster, fastest first
    winner: Candidate | None = None  # at the start's B and T: the fastest equivalent-and-faster run, else the start
    best: Candidate | None = None  # over every B
    unchecked: Candidate | None = None  # faster than best and fits, but its B has no start run to check its loss
    notes: list = field(default_factory=list)


def searches(cmp: Compare, plan: str = FASTEST_PLAN) -> list[Search]:
    """One Search per (GPU, env) cell that has a start run of `plan` made as a rung."""
    out = []
    for (gpu, env), groups in cmp.cells().items():
        mine = [g for g in groups if plan in {p for p, _r, _i in g.rungs}]
        starts = [g for g in mine if is_start(g, plan) and g.in_ladder]
        if not starts:
            continue
        start = min(starts, key=lambda g: (g.workload.batch_size or 0, g.workload.seq_len or 0))
        s = Search(gpu, env, start)
        if len(starts) > 1:
            s.notes.append(f"{len(starts)} start runs at different B or T in this cell: the search is read from B={start.workload.batch_size}")
        s.candidates = [candidate(cmp, g, plan) for g in mine]
        s.failed = [r for r, rg, re_ in cmp.failed_runs() if (rg, re_) == (gpu, env) and r.plan == plan]
        at_start = [c for c in s.candidates if c.shape == (start.workload.samples_per_step, start.workload.seq_len)
                    and c.group.in_ladder and not c.is_start]
        s.helped = sorted((c for c in at_start if c.equivalent and c.faster and c.single_knob),
                          key=lambda c: -c.tokens_per_s)
        first = next(c for c in s.candidates if c.group is start)
        s.winner = max([first] + [c for c in at_start if c.equivalent and c.faster], key=lambda c: c.tokens_per_s)
        eligible = [c for c in s.candidates if c.eligible]
        s.best = max(eligible, key=lambda c: c.tokens_per_s) if eligible else None
        floor = s.best.tokens_per_s if s.best else 0.0
        open_ = [c for c in s.candidates if c.partner is None and c.fits and c.tokens_per_s > floor]
        s.unchecked = max(open_, key=lambda c: c.tokens_per_s) if open_ else None
        out.append(s)
    return out


def helped_before(cmp: Compare, gpu: str, shape: tuple) -> dict[str, float]:
    """{knob: gain} of the single knobs that were equivalent and faster than their start at this B and T on this GPU
    in these records (plan beyond-ladder and harness.tune's), the largest gain first: what a search starting from
    earlier measurements stacks without running each knob alone again. A knob measured in both plans: the run with
    more runs pooled (then the larger gain)."""
    found: dict[str, Candidate] = {}
    groups = [g for g in cmp.ds.groups if g.gpu == gpu]
    for plan in (FASTEST_PLAN, "beyond-ladder"):
        for g in groups:
            if plan not in {p for p, _r, _i in g.rungs} or is_start(g, plan):
                continue
            c = candidate(cmp, g, plan)
            if c.shape == shape and c.single_knob and c.equivalent and c.faster and c.group.in_ladder:
                best = found.get(c.rung)
                if best is None or (len(c.group.records), c.delta.value) > (len(best.group.records), best.delta.value):
                    found[c.rung] = c
    return {k: c.delta.value for k, c in sorted(found.items(), key=lambda kv: (-kv[1].delta.value, kv[0]))}


# ---------------------------------------------------------------- MFU and memory of one group; the kernel split of two

def peak_memory(g: Group, over=statistics.median) -> Memory | None:
    """The peak memory of g's runs (RecordView.peak_memory(widest=True) of each: NVML device used, else the
    allocator's peak reserved; CPU: peak RSS), the median over the runs (over=max: the largest)."""
    peaks = [r.peak_memory(widest=True) for r in g.records]
    known = [(value, metric) for value, metric in peaks if value is not None]
    if not known:
        return None
    return Memory(over(value for value, _m in known), "/".join(sorted({metric for _v, metric in known})))


def memory_text(g: Group) -> str | None:
    """peak_memory as text (harness.tune prints it)."""
    memory = peak_memory(g)
    return None if memory is None else memory.text()


# ---------------------------------------------------------------- per device: the fastest found and what it stands against

@dataclass
class Overview:
    """One device: the seed ladder's best run, the fastest equivalent run beyond it (plan beyond-ladder) and found by
    harness.tune, the user's best logged number and the peers', and which of the found runs the kernel split explains."""

    gpu: str
    seed: Group | None
    seed_fits: tuple[bool, str | None]
    beyond: Candidate | None  # the fastest eligible run of plan beyond-ladder
    tuned: Candidate | None  # the fastest harness.tune found (over its searches on this device)
    user_best: Group | None  # the user's fastest logged line (any device: their own GPU)
    peers: list[Group] = field(default_factory=list)

    @property
    def shown(self) -> Candidate | None:
        """The fastest found beyond the seed ladder (tuned or beyond-ladder): the one the kernel split explains."""
        return max((c for c in (self.tuned, self.beyond) if c is not None), key=lambda c: c.tokens_per_s, default=None)

    @property
    def split_group(self) -> Group | None:
        """The run whose step the report splits per kernel class (tables.fastest.step_table, the MFU answer): the
        fastest found beyond the seed ladder, else the seed ladder's best where it has a kernel profile."""
        if self.shown is not None:
            return self.shown.group
        return self.seed if self.seed is not None and self.seed.kernels else None

    def vs_seed(self, g: Group, floor: float = stats.NOISE_FLOOR) -> stats.Delta | None:
        """g's tokens/s against the seed ladder's best (None for the seed itself or without one)."""
        if self.seed is None or g is self.seed:
            return None
        return stats.ratio(estimate(self.seed), estimate(g), floor)[0]


def _fastest(groups: list[Group]) -> Group | None:
    ok = [g for g in groups if g.throughput.point is not None]
    return max(ok, key=lambda g: g.throughput.point) if ok else None


def beyond_candidates(cmp: Compare, gpu: str) -> list[Candidate]:
    plan = "beyond-ladder"
    return [candidate(cmp, g, plan) for g in cmp.ds.groups
            if g.gpu == gpu and plan in {p for p, _r, _i in g.rungs} and not is_start(g, plan)]


def overviews(cmp: Compare) -> list[Overview]:
    """Per device in the records (computed once per Compare)."""
    return cmp.cached("fastest-overviews", _overviews)


def _overviews(cmp: Compare) -> list[Overview]:
    tuned: dict[str, list[Search]] = {}
    for s in searches(cmp):
        tuned.setdefault(s.gpu, []).append(s)
    user_best = _fastest([r for r in cmp.ds.references if r.first.ok])
    out = []
    for gpu in cmp.ds.gpus():
        seed = _fastest([g for g in cmp.ds.groups if g.gpu == gpu and SEED_PLAN in {p for p, _r, _i in g.rungs}])
        beyond = [c for c in beyond_candidates(cmp, gpu) if c.eligible]
        found = [s.best for s in tuned.get(gpu, []) if s.best is not None]
        out.append(Overview(gpu, seed, fits(seed) if seed is not None else (True, None),
                            max(beyond, key=lambda c: c.tokens_per_s) if beyond else None,
                            max(found, key=lambda c: c.tokens_per_s) if found else None,
                            user_best, [p for p in cmp.ds.peers if p.gpu == gpu]))
    return out
