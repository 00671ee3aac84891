"""The fastest configuration on the device this runs on: `python -m harness.tune`.

  python -m harness.tune --preset gpt2-124m --batch-size 64 --device cuda --out results/runs/fastest
  python -m harness.tune --preset tiny --set compile=off --knobs sdpa-auto,lm-head-liger --steps 6 --device cpu --out /tmp/t

Every run is a fresh worker (harness.run's), its record in --out tagged plan `fastest`:
  1. start: one rung of a plan (default: the seed ladder's fused-adamw-clip, its best rung on the H100 and H200
     records in results/gpu-*), at the preset's B or --batch-size, 3 runs (or --repeats, if more): the device's
     run-to-run spread, which each knob's run borrows (harness.analysis.stats) where the first knob's 2 runs agree;
  2. each knob alone on top of the start: the rungs of --knobs-plan (default beyond-ladder: SDPA backends, compile
     modes, fused lm_head losses, Inductor options), each rung's change against that plan's defaults; the first
     knob twice (a second configuration's spread: one configuration cannot show that others are as quiet);
  3. when two or more knobs helped, all of them together, a stack rung "a+b" (harness.runner.plan; of knobs that
     change the same field or flag, the faster); with --budget-s, every smaller stack of them too, the largest
     expected gain first, while the budget lasts;
  4. the batch search (harness.batch_search's) on the winner at the start's B, from that B up to --max-batch;
  5. where the fastest batch size that fits has no start run, the start at that B, and where it does not fit there,
     in micro-batches (B/2 x 2, ...: the same sequences): a loss is compared only on as many sequences per step.
What helped, the winner and the best are harness.analysis.fastest's rules (the report uses the same): a run counts when its
loss is within --loss-tol of the start's at the same B (harness.compare's loss rule) and its tokens/s are beyond
noise above it; a faster run whose loss drifts is reported as not equivalent and never chosen. At the end: every
run against the start, the best configuration with its tokens/s, MFU (datasheet and measured GEMM peak), memory,
and the kernel-time split against the start at the same B.

--from DIR (repeatable) starts from earlier measurements: the knobs that were equivalent and faster than their start at
the same B and T on this device in DIR's records (plan beyond-ladder, e.g. a gpu_check call, or an earlier tune) are not
run alone again; the search runs the start (the deltas are within this invocation) and goes straight to their stacks
(where one knob helped there, to that knob).
--budget-s starts no run that the runs so far say would not finish within it (the start always runs).

The rungs are written to a plan file in --out (fastest-<time>.yaml) that every record's rerun command names.
Exit 0 when the start ran, 1 when it did not (nothing to compare against), 2 on bad options (all checked first).
No torch import here: every measurement is a worker process.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from itertools import combinations
from pathlib import Path

import yaml

from harness import argtypes, batch_search
from harness.analysis import fastest, fit, stats
from harness.analysis.cells import fmt_signed_pct
from harness.analysis.context import DEFAULT_LOSS_TOL, Compare
from harness.analysis.dataset import load
from harness.analysis.group import run_ids
from harness.analysis.tables import fastest as fastest_tables
from harness.cli.run_options import add_option
from harness.console.render import render_text
from harness.record.files import write_atomic
from harness.record.io import check_writable
from harness.record.view import RecordView
from harness.runner import launcher
from harness.runner.flags import parse_assignments as parse_flag_assignments
from harness.runner.plan import STACK, PlanError, builtin_plans, load_plan
from harness.runner.request import (
    DEFAULT_OUT,
    USAGE_ERRORS,
    RunRequest,
    build_points,
    check_request,
    parse_assignments,
)


def knobs_of(plan) -> dict[str, dict]:
    """Each rung of a (non-cumulative) plan as a knob: {name: {"set": fields it changes against the plan's defaults,
    "flags": its flag overrides}}; rungs that change nothing (the plan's own start) are not knobs."""
    if plan.cumulative:
        raise PlanError(f"plan {plan.name} is cumulative: its rungs are not single knobs")
    out = {}
    for rung in plan.rungs:
        changed = {k: v for k, v in rung.settings.items() if plan.defaults.get(k) != v}
        if changed or rung.flags:
            out[rung.name] = {"set": changed, "flags": dict(rung.flags)}
    return out


@dataclass(frozen=True)
class TuneOptions:
    """What harness.tune searches and how it judges (its own options; the runs' are a RunRequest)."""

    start_plan: str = "seed-ladder"
    start_rung: str = "fused-adamw-clip"
    knobs_plan: str = "beyond-ladder"
    knobs: str | None = None  # comma-separated knob names; None: every rung that changes something
    batch_search: bool = True
    max_batch: int = 1024
    multiple: int = 8
    loss_tol: float = DEFAULT_LOSS_TOL
    noise_floor: float = stats.NOISE_FLOOR
    include_contended: bool = False  # runs timed under contention count (marked) instead of being left out
    from_dirs: tuple[str, ...] = ()  # earlier measurements: the knobs that helped there are stacked, not rerun alone
    budget_s: float | None = None  # seconds for the whole search; None: no limit (and only the full stack is run)


START_RUNS = 3  # runs of the start: with fewer the spread every knob is judged by rests on one degree of freedom
# runs of the first knob: a second configuration's spread, so the device shows whether its configurations are alike in
# noise; a knob's single run borrows the pooled spread only where two of them agree (harness.analysis.noise)
MICRO_BATCHES = (1, 2, 4, 8)  # the start in this many micro-batches, in turn, where it does not fit whole
SECOND_RUNS = 2


class Session:
    """One search: its plan file (rewritten as rungs are added; rungs once written never change) and its records."""

    def __init__(self, request: RunRequest, options: TuneOptions, defaults: dict, base_flags: dict, knobs: dict):
        self.options, self.defaults, self.base_flags, self.knobs = options, defaults, base_flags, knobs
        self.rungs = [{"name": fastest.START_RUNG, **({"flags": base_flags} if base_flags else {})}]
        for name, knob in knobs.items():
            self.rungs.append(self._rung(name, knob["set"], knob["flags"]))  # not a record: the knob table
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        out = Path(request.out)
        self.plan_path = out / f"fastest-{stamp}.yaml"
        n = 1
        while self.plan_path.exists():
            n += 1
            self.plan_path = out / f"fastest-{stamp}-{n}.yaml"
        # what every run of the search shares; the start's own --set/--flag/B/T are in the plan file's defaults
        self.request = replace(request, plan=str(self.plan_path), sets=(), flags=(), batch_size=None, seq_len=None)
        self.records: list[dict] = []
        self.t0 = time.monotonic()
        self.run_s = 0.0  # the longest run so far (its wall time): what the next run is expected to take

    def _rung(self, name: str, sets: dict, flags: dict) -> dict:
        rung: dict = {"name": name}
        if sets:
            rung["set"] = dict(sets)
        if self.base_flags or flags:
            rung["flags"] = {**self.base_flags, **flags}  # not a record: the knob table
        return rung

    def write_plan(self) -> None:
        a = self.options
        data = {
            "name": fastest.FASTEST_PLAN,
            "description": (f"written by python -m harness.tune: start = {a.start_plan}/{a.start_rung}, knobs = the rungs "
                            f"of {a.knobs_plan}, each alone, then together where they helped"),
            "cumulative": False, "defaults": self.defaults, "rungs": self.rungs,
        }
        self.plan_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.plan_path, f"# {data['description']}; rerun a record with its rerun.command\n"
                     + yaml.safe_dump(data, sort_keys=False))

    def request_for(self, rungs: list[str], sweep: str | None = None, sets: tuple[str, ...] = ()) -> RunRequest:
        """These rungs of the plan file (and a batch-size sweep point, and more --set values, if any)."""
        return replace(self.request, rungs=",".join(rungs), sweep=sweep, sets=(*self.request.sets, *sets),
                       sweep_name=batch_search.SWEEP_NAME if sweep else None)

    def fits(self, runs: int) -> bool:
        """Whether `runs` more runs, each as long as the longest so far, end within --budget-s (always, without one;
        the start, before any run, always)."""
        budget = self.options.budget_s
        return budget is None or not self.run_s or time.monotonic() - self.t0 + runs * self.run_s <= budget

    def budget_note(self, runs: int) -> str:
        left = self.options.budget_s - (time.monotonic() - self.t0)
        return f"~{runs * self.run_s:.0f} s by the longest run so far, {max(left, 0):.0f} s of --budget-s left"

    def run(self, rungs: list[str], sweep: str | None = None, repeats: int | None = None,
            sets: tuple[str, ...] = ()) -> list[dict]:
        request = self.request_for(rungs, sweep, sets)
        if repeats is not None:
            request = replace(request, repeats=repeats)
        plan_name, points = build_points(request)
        if not self.fits(len(points)):
            print(f"not started: {', '.join(rungs)} ({self.budget_note(len(points))})", flush=True)
            return []
        records: list[dict] = []
        t0 = time.monotonic()
        try:
            launcher.run_points(request, plan_name, points, records)  # fills `records` as runs finish
        finally:
            self.records += records  # an interrupted search still lists what finished
            if records:
                self.run_s = max(self.run_s, (time.monotonic() - t0) / len(records))
        return records

    def analyse(self) -> tuple[Compare, fastest.Search | None]:
        paths = [Path(self.request.out) / f"{r['run_id']}.json" for r in self.records]
        ds = load(paths, warn=lambda line: print(line, file=sys.stderr), include_contended=self.options.include_contended)
        cmp = Compare(ds, noise_floor=self.options.noise_floor, loss_tol=self.options.loss_tol)
        found = fastest.searches(cmp)
        return cmp, (found[0] if found else None)


def largest_gain_first(helped: dict[str, float]) -> list[str]:
    """The knobs that helped ({knob: gain}), the largest gain first (then by name: one order whatever the input's)."""
    return sorted(helped, key=lambda k: (-helped[k], k))


def stacks(session: Session, helped: dict[str, float]) -> list[str]:
    """The stack rungs to run ("a+b"), from the knobs that helped ({knob: gain}): of knobs that
    change the same field or flag, the faster; then all of them together, and with --budget-s every smaller stack
    of two or more too, the largest expected gain (the product of their gains alone) first."""
    chosen, taken = [], set()
    for name in largest_gain_first(helped):
        knob = session.knobs.get(name)
        if knob is None:
            continue
        keys = set(knob["set"]) | {f"flag:{k}" for k in knob["flags"]}  # not a record: the knob table
        if not keys & taken:
            chosen.append(name)
            taken |= keys
    if len(chosen) < 2:
        return []
    order = {name: i for i, name in enumerate(session.knobs)}  # the plan file's: one stack, one name
    chosen.sort(key=order.__getitem__)
    if session.options.budget_s is None:
        return [STACK.join(chosen)]
    subsets = [c for n in range(len(chosen), 1, -1) for c in combinations(chosen, n)]
    gain = {c: math.prod(1.0 + helped[k] for k in c) for c in subsets}
    return [STACK.join(c) for c in sorted(subsets, key=lambda c: (-gain[c], -len(c), c))]


class BudgetSpent(Exception):
    pass


def batch(session: Session, winner: fastest.Candidate) -> None:
    """The batch search on the winner, from its B: the winner's own run is the first try."""
    a = session.options
    b0 = winner.shape[0]
    options = batch_search.SearchOptions(start=b0, max=a.max_batch, multiple=a.multiple)
    base = replace(session.request, rungs=winner.group.label, repeats=1)

    def attempt(b: int) -> fit.Fit:
        if b == b0:
            return batch_search.judge(options, winner.group.first)
        if not session.fits(1):
            raise BudgetSpent(f"batch search stopped before B={b} ({session.budget_note(1)})")
        request = batch_search.try_request(base, b)
        plan_name, points = build_points(request)
        print(f"batch search on {winner.group.label}: B={b}", flush=True)
        record = launcher.run_points(request, plan_name, points)[0]
        session.records.append(record)
        return batch_search.judge(options, record)

    try:
        result = batch_search.search(options, attempt)
    except BudgetSpent as exc:
        print(exc, flush=True)
        return
    print(batch_search.report(options, result), flush=True)


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness.tune", description=(
        "Find the fastest equivalent configuration on this device: the start rung, each knob alone, the knobs that "
        "helped together, the batch search on the winner; each run a fresh worker and its own record."))
    p.add_argument("--start-plan", default="seed-ladder", help="plan of the starting rung (default seed-ladder)")
    p.add_argument("--start-rung", default="fused-adamw-clip", help="the starting rung (default fused-adamw-clip)")
    p.add_argument("--knobs-plan", default="beyond-ladder", help=f"plan whose rungs are the knobs ({', '.join(builtin_plans())} "
                   "or a .yaml path; default beyond-ladder)")
    p.add_argument("--knobs", help="comma-separated knob (rung) names to try (default: every rung that changes something)")
    add_option(p, "preset")
    add_option(p, "set", help="override a workload field of the start (repeatable; knobs win)")
    add_option(p, "flag", help="override a frozen flag of the start (repeatable; knobs win)")
    add_option(p, "batch_size", help="B of the start (default: the preset's)")
    add_option(p, "seq_len", help="T (default: the preset's)")
    add_option(p, "model")
    add_option(p, "steps")
    add_option(p, "warmup_steps")
    p.add_argument("--repeats", type=argtypes.repeats, default=1, help="repeats of the start, knob and combined runs (default 1)")
    add_option(p, "device")
    p.add_argument("--no-batch-search", dest="batch_search", action="store_false", help="skip the batch search on the winner")
    p.add_argument("--max-batch", dest="max_batch", type=argtypes.batch_size, default=1024, help="largest B the batch search tries (default 1024)")
    p.add_argument("--multiple", type=argtypes.batch_size, default=8, help="batch search resolution (default 8)")
    p.add_argument("--loss-tol", dest="loss_tol", type=argtypes.tolerance, default=DEFAULT_LOSS_TOL,
                   help=f"relative loss tolerance (default {DEFAULT_LOSS_TOL})")
    p.add_argument("--noise-floor", dest="noise_floor", type=argtypes.fraction, default=stats.NOISE_FLOOR,
                   help=f"smallest relative gain that counts (default {stats.NOISE_FLOOR})")
    p.add_argument("--from", dest="from_dirs", action="append", type=argtypes.path_text, default=[], metavar="DIR",
                   help="earlier records (repeatable): the knobs that helped there on this device at this B are stacked "
                   "without running each alone again")
    p.add_argument("--budget-s", type=argtypes.seconds, help="seconds for the whole search: no run starts that the runs "
                   "so far say would not finish; the stacks of the knobs that helped are tried, largest expected gain "
                   "first, while it lasts (default: no limit, and only all of them together)")
    p.add_argument("--include-contended", action="store_true", help="let runs timed under contention count, marked "
                   "(by default they are left out, as in harness.compare, and the answer says to rerun them)")
    add_option(p, "out", help=f"directory for the records and the plan file (default: {DEFAULT_OUT}/)")
    add_option(p, "env")
    add_option(p, "timeout")
    add_option(p, "threads")
    return p


def prepare(p: argparse.ArgumentParser, request: RunRequest, options: TuneOptions) -> Session:
    """Everything checked before the first worker starts: plans, rungs, knobs, fields, flags; every point built."""
    try:
        check_writable(request.out)  # the plan file goes there first: a bad --out is one line, not a traceback
        start_plan = load_plan(options.start_plan)
        rung = start_plan.rung(options.start_rung)
        knobs = knobs_of(load_plan(options.knobs_plan))
        if options.knobs:
            wanted = [k.strip() for k in options.knobs.split(",") if k.strip()]
            missing = [k for k in wanted if k not in knobs]
            if missing:
                raise PlanError(f"no knob(s) {', '.join(missing)} in plan {options.knobs_plan}; it has {', '.join(knobs)}")
            knobs = {k: knobs[k] for k in wanted}
        missing = [d for d in options.from_dirs if not Path(d).exists()]
        if missing:
            raise PlanError(f"--from: no such folder {', '.join(missing)}")
        clash = {fastest.START_RUNG, fastest.COMBINED_RUNG} & set(knobs)
        if clash:
            raise PlanError(f"plan {options.knobs_plan}: rung name(s) {', '.join(sorted(clash))} are harness.tune's own")
        defaults = {**rung.settings, **parse_assignments(request.sets)}
        for name in ("batch_size", "seq_len"):
            if getattr(request, name) is not None:
                defaults[name] = getattr(request, name)
        base_flags = {**rung.flags, **parse_flag_assignments(list(request.flags))}
        # a knob that changes nothing against this start would only repeat it
        same = [k for k, v in knobs.items() if all(defaults.get(f) == x for f, x in v["set"].items())
                and all(base_flags.get(f, "default") == x for f, x in v["flags"].items())]  # not a record: the knob table
        for k in same:
            print(f"knob {k}: already part of the start configuration, not run", flush=True)
            del knobs[k]
        session = Session(request, options, defaults, base_flags, knobs)
        session.write_plan()
        try:
            # every point valid, --env/--out/--timeout/--threads usable, or exit 2 now (before any worker)
            check_request(session.request_for([r["name"] for r in session.rungs]))
        except USAGE_ERRORS:
            session.plan_path.unlink()
            raise
    except USAGE_ERRORS as exc:
        p.error(str(exc))
    return session


def start_on(session: Session, g) -> None:
    """The start on as many sequences per step as run g, to check g's loss: at g's B (and accumulation), else, where
    it does not fit (oom), in micro-batches (B/2 x 2, B/4 x 4, ...: the same sequences, in the same order)."""
    w = g.workload
    for k in (k for k in MICRO_BATCHES if w.batch_size % k == 0):
        b, accum = w.batch_size // k, (w.grad_accum or 1) * k
        print(f"start at B={b}" + (f"x{accum}" if accum > 1 else "") + f", to check the loss of {g.label} there",
              flush=True)
        records = session.run([fastest.START_RUNG], sweep=f"batch_size={b}",
                              sets=(f"grad_accum={accum}",) if accum > 1 else ())  # the last --set of a field wins
        if not records or any(r.get("status") != "oom" for r in records):
            return  # it ran (or the budget stopped it): only a start that did not fit is tried in smaller parts


def main(argv=None) -> int:
    p = make_parser()
    args = p.parse_args(argv)
    options = TuneOptions(start_plan=args.start_plan, start_rung=args.start_rung, knobs_plan=args.knobs_plan,
                          knobs=args.knobs, batch_search=args.batch_search, max_batch=args.max_batch,
                          multiple=args.multiple, loss_tol=args.loss_tol, noise_floor=args.noise_floor,
                          include_contended=args.include_contended, from_dirs=tuple(args.from_dirs),
                          budget_s=args.budget_s)
    session = prepare(p, RunRequest.from_args(args), options)
    with launcher.report_stops("python -m harness.tune", session.records, session.request.out,
                               note=f"plan file {session.plan_path}") as stop:
        code = search_and_report(session)
    return code if stop.exit_code is None else stop.exit_code


def measured_before(session: Session) -> dict[str, float] | None:
    """{knob: gain} that helped in the --from records on the device of this search's start, at its B and T; None
    where the start did not run or those records have no run there (the search then goes on as without --from)."""
    start = next((RecordView(r) for r in session.records if r.get("rung") == fastest.START_RUNG and r.get("status") == "ok"),
                 None)
    if start is None:
        return None
    here = Compare(load([Path(d) for d in session.options.from_dirs] + [Path(session.request.out) / f"{start.run_id}.json"],
                        warn=lambda line: print(line, file=sys.stderr), include_contended=session.options.include_contended),
                   noise_floor=session.options.noise_floor, loss_tol=session.options.loss_tol)
    mine = next((g for g in here.ds.groups if start.run_id in run_ids(g)), None)
    shape = (start.workload.batch_size, start.workload.seq_len)
    measured = mine is not None and any(
        g.gpu == mine.gpu and (g.workload.batch_size, g.workload.seq_len) == shape and g is not mine
        and {p for p, _r, _i in g.rungs} & {fastest.FASTEST_PLAN, "beyond-ladder"} for g in here.ds.groups)
    if not measured:  # nothing measured before on this device at this B: each knob alone, as without --from
        print(f"--from: no run of plan beyond-ladder or {fastest.FASTEST_PLAN} on this device at B={shape[0]}, "
              f"T={shape[1]}: each knob runs alone", flush=True)
        return None
    return fastest.helped_before(here, mine.gpu, shape)


def search_and_report(session: Session) -> int:
    knobs = list(session.knobs)
    o, r = session.options, session.request
    print(f"tune: start {o.start_plan}/{o.start_rung}, {len(knobs)} knob(s) of {o.knobs_plan}: {', '.join(knobs) or 'none'}; "
          f"preset {r.preset}, env {r.env} -> {r.out}/ (plan file {session.plan_path})", flush=True)
    # the start runs START_RUNS times at least and the first knob SECOND_RUNS: the device's run-to-run spread over
    # two configurations, which a knob's single run borrows where they agree
    session.run([fastest.START_RUNG], repeats=max(r.repeats or 1, START_RUNS))
    before = measured_before(session) if o.from_dirs else None
    if knobs and before is None:
        session.run(knobs[:1], repeats=max(r.repeats or 1, SECOND_RUNS))
        for knob in knobs[1:]:
            session.run([knob])
    cmp, search = session.analyse()
    if search is None:
        start = next((r for r in map(RecordView, session.records) if r.rung == fastest.START_RUNG), None)
        if start is not None and start.ok and start.contended:
            print(f"\nthe start was timed under contention ({start.contention_reason}), so it counts nowhere: rerun "
                  "on a quiet machine, or pass --include-contended to let it count, marked", flush=True)
            return 1
        print(f"\nthe start did not run ({start.status if start else 'no record'}: {start.reason if start else None}): "
              "nothing to compare the knobs against")
        return 1
    if before is None:
        helped = {c.rung: c.delta.value for c in search.helped}
        print(f"\nhelped (equivalent and faster than the start): {', '.join(c.group.label for c in search.helped) or 'none'}",
              flush=True)
    else:
        helped = {k: v for k, v in before.items() if k in session.knobs}
        print(f"\nhelped before (--from, at B={search.start.workload.batch_size} on this device): "
              f"{', '.join(f'{k} {fmt_signed_pct(v)}' for k, v in helped.items()) or 'none'}", flush=True)
    todo = stacks(session, helped)
    if before is not None and not todo and helped:  # one knob helped there: it runs here, so it can win here
        todo = largest_gain_first(helped)[:1]
    for i, stack in enumerate(todo):
        print(f"{'together' if STACK in stack else 'alone'}: {stack}", flush=True)
        # from earlier measurements no knob ran twice here: the first stack does, for the spread the rest borrow
        session.run([stack], repeats=max(r.repeats or 1, SECOND_RUNS) if before is not None and i == 0 else None)
    cmp, search = session.analyse()
    print(f"winner at the start's B: {search.winner.group.label}", flush=True)
    if o.batch_search and search.winner.shape[0] <= o.max_batch:
        batch(session, search.winner)
        started: set[int] = set()
        while True:  # a loss is compared on as many sequences only: run the start where the fastest B has none
            cmp, search = session.analyse()
            c = search.unchecked
            if c is None or c.shape[0] in started:
                break
            started.add(c.shape[0])
            start_on(session, c.group)
    cmp, search = session.analyse()
    tables, lines = fastest_tables.tune_answer(cmp, search)
    print()
    header = f"harness.tune on {search.gpu} / {search.env}: {len(session.records)} run(s); plan file {session.plan_path}"
    print(render_text(tables, [header], lines + [stats.rule_text(cmp.floor)]), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
