"""The fastest configuration found, and what it stands against. No torch.

harness.tune uses this while it searches (which knobs helped, the winner, which batch size still needs its loss
checked) and for its final answer; harness.compare (--table fastest) and harness.report (section "Fastest found vs
the user's best vs the peer") use it on whatever records they are given. So the search and the report apply one rule:

  start       where a search begins: rung `start` of plan `fastest` (harness.tune), or, for plan beyond-ladder, the
              seed ladder's last rung (that plan's defaults, its rung best-of-ladder)
  partner     of a run: the start configuration in the same (GPU, env) cell at the same B and T
  equivalent  the run is a start run, or its loss is within tolerance of its partner's (Compare.pair_parity, the
              loss rule of every table). A faster run that is not equivalent is reported as such and never chosen.
  faster      its tokens/s against its partner's is beyond noise and higher (harness.analysis.stats)
  fits        peak memory + headroom <= usable memory (harness.batch_search.judge with its default headroom)
  best        the fastest run that fits and is a start run or equivalent and faster than its partner
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from types import SimpleNamespace

from harness import batch_search
from harness import sweep as sweepmod
from harness.analysis import stats
from harness.analysis.cells import Cell, Memory, Mfu, Table, fmt_pct, fmt_signed_pct
from harness.analysis.context import Compare
from harness.analysis.differ import knob_fields
from harness.analysis.group import Group, run_ids
from harness.analysis.kernel_split import SPLIT, kernel_split
from harness.analysis.knob_pairs import overrides
from harness.record.model import ADDED_FIELD_DEFAULTS

FASTEST_PLAN = "fastest"  # harness.tune tags its runs with this plan name
START_RUNG = "start"
COMBINED_RUNG = "combined"
SEED_PLAN = "seed-ladder"
# plan -> the (plan, rung) whose runs are that plan's starting point
STARTS = {
    FASTEST_PLAN: {(FASTEST_PLAN, START_RUNG)},
    "beyond-ladder": {("beyond-ladder", "best-of-ladder"), (SEED_PLAN, "fused-adamw-clip")},
}
OVERVIEW_TITLE = "Fastest found vs the user's best vs the peer: "  # + the device; harness.analysis.findings reads these tables
SPLIT_TITLE = "What explains it on "
SEED_ROW = "the seed ladder's best run"
BEYOND_ROW = "fastest of plan beyond-ladder (equivalent, faster than its start)"
TUNE_ROW = "fastest found by harness.tune"
USER_ROW = "the user's best (their log)"
DEFAULT_HEADROOM = SimpleNamespace(headroom_gib=None)  # batch_search's own default: 5 GiB on a GPU, 0 on a CPU


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
        return self.group.workload.get("batch_size"), self.group.workload.get("seq_len")

    def parity_text(self, tol: float) -> str:
        if self.is_start:
            return "start"
        if self.partner is None:
            return f"unchecked: no start run at B={self.shape[0]}"
        p = self.parity
        if p["parity"] == "DRIFT":
            return f"NOT EQUIVALENT: loss final {fmt_signed_pct(p['d_final'])}, mean {fmt_signed_pct(p['d_mean'])} (> {tol:.1%})"
        if p["parity"] == "ok":
            return f"ok (final {fmt_signed_pct(p['d_final'])}, mean {fmt_signed_pct(p['d_mean'])})"
        return p["parity"]


def is_start(g: Group, plan: str) -> bool:
    return bool({(p, r) for p, r, _i in g.rungs} & STARTS.get(plan, set()))


def fits(g: Group) -> tuple[bool, str | None]:
    judged = [batch_search.judge(DEFAULT_HEADROOM, r) for r in g.records]
    bad = next((j for j in judged if not j["fits"]), None)
    return (True, None) if bad is None else (False, bad["why"])


def candidate(cmp: Compare, g: Group, plan: str) -> Candidate:
    """g against the start run of its cell at its B and T."""
    if is_start(g, plan):
        partner = g
    else:
        same = [s for s in cmp.ds.groups if (s.gpu, s.env) == (g.gpu, g.env) and is_start(s, plan)
                and (s.workload.get("batch_size"), s.workload.get("seq_len")) == (g.workload.get("batch_size"), g.workload.get("seq_len"))]
        partner = max(same, key=lambda s: len(s.records)) if same else None
    ok, why = fits(g)
    parity = cmp.pair_parity(partner, g) if partner is not None and partner is not g else None
    delta = cmp.delta(partner, g) if partner is not None and partner is not g else None
    return Candidate(g, partner, parity, delta, ok, why)


def changes(start: Group, g: Group) -> str:
    """What g changes against start, batch size aside: workload fields, and flags that do not follow from them."""
    wa, wb = knob_fields(start.workload), knob_fields(g.workload)
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
    failed: list = field(default_factory=list)  # records not ok (unsupported, oom, error, invalid)
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
        start = min(starts, key=lambda g: (g.workload.get("batch_size") or 0, g.workload.get("seq_len") or 0))
        s = Search(gpu, env, start)
        if len(starts) > 1:
            s.notes.append(f"{len(starts)} start runs at different B or T in this cell: the search is read from B={start.workload.get('batch_size')}")
        s.candidates = [candidate(cmp, g, plan) for g in mine]
        s.failed = [r for r, rg, re_ in cmp.failed_runs() if (rg, re_) == (gpu, env) and r.get("plan") == plan]
        at_start = [c for c in s.candidates if c.shape == (start.workload.get("batch_size"), start.workload.get("seq_len"))
                    and c.group.in_ladder and not c.is_start]
        s.helped = sorted((c for c in at_start if c.equivalent and c.faster and COMBINED_RUNG not in c.rung),
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


def search_table(cmp: Compare, s: Search) -> Table:
    """Every run of one search: what it changes, B, status, tokens/s against its start run, loss parity, fits."""
    t = Table("fastest", f"harness.tune on {s.gpu} / {s.env}: every run against the start run at the same B and T "
              f"(start: B={s.start.workload.get('batch_size')}, T={s.start.workload.get('seq_len')})", [
        ("rung", "rung"), ("changes", "changes against the start"), ("batch", "B"), ("status", "status"),
        ("tokens_s", "tokens/s"), ("vs_start", "vs start, same B"), ("parity", "loss vs start, same B"),
        ("memory", "peak MiB"), ("fits", "fits"), ("mark", "note")])
    order = sorted(s.candidates, key=lambda c: (c.shape, not c.is_start, c.group.label))
    for c in order:
        mark = ", ".join(m for m, on in (("BEST", c is s.best), ("winner at the start's B", c is s.winner and not c.is_start),
                                         ("helped", c in s.helped), ("loss unchecked", c is s.unchecked)) if on)
        peak = peak_memory(c.group, over=max)
        t.rows.append({"rung": c.group.label, "changes": changes(s.start, c.group), "batch": c.shape[0], "status": "ok",
                       "tokens_s": c.tokens_per_s, "vs_start": Cell(c.delta) if c.delta else None,
                       "parity": c.parity_text(cmp.loss_tol), "memory": peak.bytes if peak else None,
                       "fits": "yes" if c.fits else f"no: {c.why_not}", "mark": mark, "run_ids": run_ids(c.group)})
    for r in sorted(s.failed, key=lambda r: r["run_id"]):
        t.rows.append({"rung": r.get("rung"), "batch": (r.get("workload") or {}).get("batch_size"), "status": r["status"],
                       "mark": r.get("reason") or "no reason given", "run_ids": [r["run_id"]]})
    t.notes += [
        (f"equivalent = loss within {cmp.loss_tol:.1%} of the start run at the same B and T (final and mean, the loss rule "
         "of every table); faster = tokens/s beyond noise and higher than that start run's; fits = peak memory + "
         "headroom <= usable memory (the batch search's rule)"),
        ("best = the fastest run that fits and is a start run, or equivalent and faster; a faster run that is not "
         "equivalent is never chosen"),
        *s.notes,
    ]
    if s.unchecked is not None:
        t.notes.append(f"{s.unchecked.group.label} at B={s.unchecked.shape[0]} is faster than the best but no start run at "
                       f"that B checks its loss: it is not chosen")
    return t


# ---------------------------------------------------------------- MFU and memory of one group; the kernel split of two

def _median(values) -> float | None:
    values = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(values) if values else None


def mfu(g: Group, key: str) -> Mfu | None:
    """mfu_datasheet or mfu_measured from explain.mfu, median over the group's runs (above 100%: 'peak suspect')."""
    value = _median(((r.get("explain") or {}).get("mfu") or {}).get(key) for r in g.records)
    return None if value is None else Mfu(value)


def peak_memory(g: Group, over=statistics.median) -> Memory | None:
    """The peak memory of g's runs (harness.sweep.peak_memory of each record: NVML device used, else the allocator's
    reserved; CPU: peak RSS), the median over the runs (over=max: the largest). This module's one reading of it."""
    peaks = [sweepmod.peak_memory(r) for r in g.records]
    known = [(value, metric) for value, metric in peaks if value is not None]
    if not known:
        return None
    return Memory(over(value for value, _m in known), "/".join(sorted({metric for _v, metric in known})))


def memory_text(g: Group) -> str | None:
    """peak_memory as text (harness.tune prints it)."""
    memory = peak_memory(g)
    return None if memory is None else memory.text()


def split_table(title: str, before: Group, after: Group) -> Table:
    """The kernel-time split of `after` against `before` (its start at the same B and T): what explains the gain."""
    a, b = kernel_split(before), kernel_split(after)
    t = Table("fastest", title, [("what", "per step"), ("a", f"start: {before.label}"), ("b", f"{after.label}"),
                                 ("delta", "B - A"), ("share_a", "share A"), ("share_b", "share B")])
    if a is None or b is None:
        t.notes.append("no kernel profile (explain.kernels) on " + " and ".join(
            x.label for x, s in ((before, a), (after, b)) if s is None))
        return t
    for key, label in SPLIT:
        va, vb = a.get(key), b.get(key)
        scale = 1.0 if key == "step_ms" else 1000.0  # us -> ms
        row = {"what": label, "a": f"{va / scale:,.2f}" if va is not None else None,
               "b": f"{vb / scale:,.2f}" if vb is not None else None,
               "delta": f"{(vb - va) / scale:+,.2f}" if None not in (va, vb) else None}
        if key not in ("step_ms", "busy", "uncaptured"):
            row["share_a"] = fmt_pct(va / a["busy"]) if a["busy"] else None
            row["share_b"] = fmt_pct(vb / b["busy"]) if b["busy"] else None
        t.rows.append(row)
    compiled = [x.label for x in (before, after) if x.workload.get("compile") not in (None, "off")]
    if b.get("device") == "cuda" and compiled and not (a["triton"] and b["triton"]):
        t.notes.append("no Inductor-generated kernel was captured on a compiled run: profiles taken before the fix in "
                       "gpt/torch_compat.py device_kernel_events (torch 2.4+) dropped every Triton kernel, so their time "
                       "is in 'step time not in captured kernels' and the shares are of the rest")
    what = "GPU kernel time" if b.get("device") == "cuda" else "CPU op self time (CPU ops stand in for kernels)"
    t.notes.append(f"ms per step: the timed median for the step time, else {what} per profiled step "
                   "(explain.kernels, profiled after the timed steps); shares of all kernel time. lm_head GEMMs = the "
                   "GEMMs whose M, N or K is the vocab (explain.kernels.vocab_gemms); the plain path's softmax and "
                   "cross-entropy kernels are Inductor-generated and fused with other work, so they count there")
    return t


# ---------------------------------------------------------------- the report's section: per GPU

def _estimate(g: Group) -> stats.Estimate:
    return g.throughput if g.kind == "measured" else Compare.ref_estimate(g)


def _fastest(groups: list[Group]) -> Group | None:
    ok = [g for g in groups if g.throughput.point is not None]
    return max(ok, key=lambda g: g.throughput.point) if ok else None


def beyond_candidates(cmp: Compare, gpu: str) -> list[Candidate]:
    plan = "beyond-ladder"
    return [candidate(cmp, g, plan) for g in cmp.ds.groups
            if g.gpu == gpu and plan in {p for p, _r, _i in g.rungs} and not is_start(g, plan)]


def _row(cmp: Compare, seed: Group | None, what: str, g: Group | None, parity: str | None = None,
         run: str | None = None, source: str | None = None) -> dict:
    """One line of the overview: g's tokens/s against the seed ladder's best, MFU, memory, loss parity."""
    if g is None:
        return {"what": what, "run": run or "none in these records"}
    vs = Cell(stats.ratio(_estimate(seed), _estimate(g), cmp.floor)[0]) if seed is not None and g is not seed else None
    pooled = f" ({len(g.records)} runs pooled)" if len(g.records) > 1 else ""
    return {"what": what, "run": (run or f"{'/'.join(sorted({p for p, _r, _i in g.rungs}))} {g.label}") + pooled,
            "env": source or g.env, "batch": g.batch, "tokens_s": _estimate(g).point, "vs_seed": vs,
            "mfu_ds": mfu(g, "mfu_datasheet"), "mfu_meas": mfu(g, "mfu_measured"),
            "memory": peak_memory(g), "parity": parity, "run_ids": run_ids(g)}


def gpu_overview(cmp: Compare, gpu: str, tuned: list[Search], user_best: Group | None) -> list[Table]:
    """One GPU's table (the seed ladder's best, beyond-ladder, harness.tune, the user's best, the peer) and the
    kernel split of the fastest found beyond the seed ladder against its start."""
    seed = _fastest([g for g in cmp.ds.groups if g.gpu == gpu and SEED_PLAN in {p for p, _r, _i in g.rungs}])
    t = Table("fastest", f"{OVERVIEW_TITLE}{gpu}", [
        ("what", "what"), ("run", "run"), ("env", "env / source"), ("batch", "B, T"), ("tokens_s", "tokens/s"),
        ("vs_seed", "vs the seed ladder's best"), ("mfu_ds", "MFU (datasheet)"), ("mfu_meas", "MFU (measured GEMM peak)"),
        ("memory", "memory MiB"), ("parity", "loss vs its start")])
    seed_fits, why = fits(seed) if seed is not None else (True, None)
    t.rows.append(_row(cmp, seed, SEED_ROW, seed, "start" if seed else None,
                       run=None if seed_fits else f"{'/'.join(sorted({p for p, _r, _i in seed.rungs}))} {seed.label} "
                                                  f"(does not fit the batch search's headroom: {why})"))
    beyond = [c for c in beyond_candidates(cmp, gpu) if c.eligible]
    best_beyond = max(beyond, key=lambda c: c.tokens_per_s) if beyond else None
    t.rows.append(_row(cmp, seed, BEYOND_ROW, best_beyond.group if best_beyond else None, best_beyond.parity_text(cmp.loss_tol) if best_beyond else None))
    found = [s.best for s in tuned if s.best is not None]
    best_tuned = max(found, key=lambda c: c.tokens_per_s) if found else None
    t.rows.append(_row(cmp, seed, TUNE_ROW, best_tuned.group if best_tuned else None,
                       best_tuned.parity_text(cmp.loss_tol) if best_tuned else None,
                       run=None if best_tuned else "none: no `python -m harness.tune` run (plan fastest) on this GPU in these records"))
    if user_best is not None:
        info = user_best.first.get("reference") or {}
        t.rows.append(_row(cmp, seed, USER_ROW, user_best,
                           run=f"{user_best.label} (torch {info.get('torch') or 'not stated'})",
                           source=f"{user_best.gpu}, {info.get('source', '?')}:{info.get('line', '?')}"))
    else:
        t.rows.append(_row(cmp, seed, USER_ROW, None))
    peers = [p for p in cmp.ds.peers if p.gpu == gpu]
    for p in peers:
        info = p.first.get("peer") or {}
        t.rows.append(_row(cmp, seed, f"peer: {info.get('name', p.label)}", p, run=info.get("program") or p.label,
                           source=f"{info.get('source', '?')}:{info.get('line', '?')} (torch {p.torch_version})"))
    if not peers:
        t.rows.append(_row(cmp, seed, "peer", None))
    t.notes += [
        ("tokens/s: measured runs = tokens per step / median timed step; the user's log = its one logged step; the "
         "peer = its own median of steps 10-49. Only measured runs have a noise estimate."),
        (f"equivalent: loss within {cmp.loss_tol:.1%} of the start configuration at the same B and T on this GPU "
         "(plan beyond-ladder: the seed ladder's last rung; harness.tune: its start rung). A faster run that is not "
         "equivalent is not counted here."),
        "memory: measured = NVML device used; the user's log = nvidia-smi; the peer = torch's peak reserved.",
    ]
    if user_best is not None:
        t.notes.append(f"the user's numbers come from their own {user_best.gpu} GPU, not this one")
    if best_tuned is None:
        t.notes.append("no harness.tune run exists in these records yet: the fastest measured so far is "
                       + (f"{best_beyond.group.label} ({best_beyond.group.batch}, plan beyond-ladder)" if best_beyond else
                          f"the seed ladder's best run ({seed.label}, {seed.batch})" if seed else "nothing"))
    tables = [t]
    shown = max((c for c in (best_tuned, best_beyond) if c is not None), key=lambda c: c.tokens_per_s, default=None)
    if shown is not None:
        tables.append(split_table(f"{SPLIT_TITLE}{gpu}: {shown.group.label} ({shown.group.batch}) against its start "
                                  f"{shown.partner.label} at the same B and T", shown.partner, shown.group))
    return tables


def overview(cmp: Compare) -> list[Table]:
    """Per device in the records: gpu_overview."""
    tuned: dict[str, list[Search]] = {}
    for s in searches(cmp):
        tuned.setdefault(s.gpu, []).append(s)
    user_best = _fastest([r for r in cmp.ds.references if r.first.get("status") == "ok"])
    return [t for gpu in cmp.ds.gpus() for t in gpu_overview(cmp, gpu, tuned.get(gpu, []), user_best)]
