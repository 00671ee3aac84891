"""Batch search: the largest batch size B that runs, with memory headroom, each try in a fresh worker.

  python -m harness.batch_search --preset gpt2-124m --rung fused-adamw-clip --out results/runs
  python -m harness.batch_search --preset tiny --rung fp32 --set compile=off --memory-budget-gib 0.9 --start 4 --multiple 4

Stepping, then bisecting: B = start, 2*start, 4*start, ... (never past --max; --max itself is tried
when doubling jumps over it) until a try does not fit; then bisection between the last B that fit and
the first that did not, over multiples of --multiple, until they are --multiple apart.

A try fits when its status is ok AND peak memory + headroom <= usable memory, where
  usable   = the memory budget if given (--memory-budget-gib: on CUDA the per-process memory fraction,
             on CPU a check of the worker's peak RSS, the worker marking the run `oom` past it),
             else the device's total memory (CUDA: environment.gpu.memory_bytes; CPU: host RAM);
  peak     = the record's most inclusive peak (CUDA: NVML device used, else allocator peak reserved; CPU: peak RSS);
  headroom = --headroom-gib (default 5 GiB on a GPU, 0 on a CPU).
The rule itself is harness.analysis.fit's (harness.tune and the fastest-found table judge by it too).

Each try is one record, tagged sweep = {name: batch-search, field: batch_size, value: B}. At the end:
a table of every try (B, status, tokens/s, peak memory, fits), the largest B that fits, and the knee
(harness.analysis.sweep.knee over the B's that fit: the smallest B whose tokens/s is within --knee-tolerance of
the best). Exit 0 when some B fits, 1 when none does (or the search stopped on a non-memory failure).

Each try is a harness.runner.request.RunRequest (the search's own, with this B as a sweep point) run by
harness.runner.launcher: the same process isolation, the same records, the same rerun commands as harness.run.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace

from tabulate import tabulate

from harness import argtypes
from harness.analysis import fit
from harness.analysis import sweep as sweepmod
from harness.analysis.fit import CPU_HEADROOM_GIB, GPU_HEADROOM_GIB
from harness.cli.run_options import add_option
from harness.runner import launcher
from harness.runner.plan import load_plan
from harness.runner.progress import fmt
from harness.runner.request import USAGE_ERRORS, RunRequest, build_points, check_request

SWEEP_NAME = "batch-search"
STOP_STATUSES = ("unsupported", "invalid")  # not about memory: a smaller B would not change them


@dataclass(frozen=True)
class SearchOptions:
    """How the search steps and judges (the --start/--max/--multiple/--headroom-gib/--knee-tolerance options)."""

    start: int = 16
    max: int = 1024
    multiple: int = 8
    headroom_gib: float | None = None  # None: GPU_HEADROOM_GIB on a GPU, CPU_HEADROOM_GIB on a CPU
    knee_tolerance: float = sweepmod.KNEE_TOLERANCE


def judge(options: SearchOptions, record: dict) -> fit.Fit:
    """One try against the fit rule (harness.analysis.fit) with this search's headroom."""
    return fit.judge(record, options.headroom_gib)


def next_bisect(lo: int, hi: int, multiple: int) -> int | None:
    """The multiple of `multiple` strictly between lo and hi nearest their middle (rounding down); None if none."""
    mid = (lo + hi) // 2
    below = (mid // multiple) * multiple
    above = below + multiple
    for candidate in (below, above):
        if lo < candidate < hi:
            return candidate
    return None


def search(options: SearchOptions, attempt) -> dict:
    """The stepping-then-bisecting search. attempt(B) -> judged try. Returns {tries, best, stopped}."""
    tries: dict[int, dict] = {}

    def trial(b: int) -> dict:
        if b not in tries:
            tries[b] = attempt(b)
        return tries[b]

    good, bad, stopped = None, None, None
    b = options.start
    while True:  # stepping: doubling until a try does not fit
        t = trial(b)
        if t.status in STOP_STATUSES:
            stopped = f"B={b}: {t.why} (not a memory limit; searching further would not change it)"
            break
        if not t.fits:
            bad = b
            break
        good = b
        if b >= options.max:
            break
        b = min(b * 2, options.max)
    if stopped is None and bad is not None:  # bisection between the last fit and the first non-fit
        lo = good or 0
        while (b := next_bisect(lo, bad, options.multiple)) is not None:
            t = trial(b)
            if t.status in STOP_STATUSES:
                stopped = f"B={b}: {t.why}"
                break
            if t.fits:
                lo = good = b
            else:
                bad = b
    return {"tries": tries, "best": good, "first_bad": bad, "stopped": stopped}


def report(options: SearchOptions, result: dict) -> str:
    tries = [result["tries"][b] for b in sorted(result["tries"])]
    fitting = [t for t in tries if t.fits]
    the_knee = sweepmod.knee([(t.batch_size, t.tokens_per_s) for t in fitting], options.knee_tolerance)
    best_tps = max((t.tokens_per_s for t in fitting if t.tokens_per_s is not None), default=None)
    rows = []
    for t in tries:
        mark = ", ".join(m for m, on in (("largest fit", t.batch_size == result["best"]),
                                         ("knee", t.batch_size == the_knee and t.fits)) if on)
        rows.append([
            t.batch_size, t.status, fmt(t.tokens_per_s, ",.0f"),
            "-" if best_tps is None or t.tokens_per_s is None else format(t.tokens_per_s / best_tps, ".1%"),
            fmt(t.peak_bytes, ",.0f", 2**20), fmt(t.usable_bytes, ",.0f", 2**20),
            fmt(t.headroom_bytes, ",.0f", 2**20), "yes" if t.fits else "no", mark or (t.why or "")[:90],
        ])
    headers = ["B", "status", "tokens/s", "vs best fit", "peak MiB", "usable MiB", "headroom MiB", "fits", "note"]
    lines = [tabulate(rows, headers=headers, disable_numparse=True), ""]
    source = next((t.memory_source for t in tries if t.memory_source != "-"), "-")
    budget = any(t.record.workload.memory_budget_gib for t in tries)
    lines.append(f"fits = status ok and peak memory ({source}) + headroom <= usable memory "
                 f"({'the memory budget' if budget else 'the device total'})")
    lines.append(sweepmod.knee_definition(options.knee_tolerance, what="B", among="fitting B's"))
    if result["stopped"]:
        lines.append(f"search stopped: {result['stopped']}")
    if result["best"] is None:
        lines.append(f"answer: no B fits (smallest tried {min(result['tries'])})")
    else:
        edge = (f"; B={result['first_bad']} does not" if result["first_bad"] is not None
                else f"; --max {options.max} reached, larger B not tried")
        lines.append(f"answer: largest B that fits = {result['best']} (resolution {options.multiple}{edge}); "
                     f"knee = {the_knee if the_knee is not None else '-'}")
    return "\n".join(lines)


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness.batch_search", description=(
        "Find the largest batch size that runs with memory headroom: doubling from --start, then bisecting; "
        "each try a fresh worker process and its own record."))
    add_option(p, "plan")
    p.add_argument("--rung", required=True, help="the plan rung whose settings are searched (e.g. fused-adamw-clip)")
    add_option(p, "preset")
    add_option(p, "set")
    add_option(p, "steps", help="steps per try (default: the preset's)")
    add_option(p, "warmup_steps")
    add_option(p, "seq_len")
    add_option(p, "model")
    add_option(p, "device")
    p.add_argument("--start", type=argtypes.batch_size, default=16, help="first B tried (default 16)")
    p.add_argument("--max", type=argtypes.batch_size, default=1024, help="largest B tried (default 1024)")
    p.add_argument("--multiple", type=argtypes.batch_size, default=8, help="bisection resolution: B's tried are multiples of it (default 8)")
    p.add_argument("--headroom-gib", dest="headroom_gib", type=argtypes.gib,
                   help=f"memory kept free (default {GPU_HEADROOM_GIB:g} GiB on a GPU, {CPU_HEADROOM_GIB:g} on a CPU)")
    p.add_argument("--memory-budget-gib", dest="memory_budget_gib", type=argtypes.positive_gib,
                   help="cap usable memory (emulate a smaller card): CUDA per-process fraction, CPU peak-RSS check")
    p.add_argument("--knee-tolerance", dest="knee_tolerance", type=argtypes.fraction, default=sweepmod.KNEE_TOLERANCE,
                   help=f"knee: smallest B within this fraction of the best tokens/s (default {sweepmod.KNEE_TOLERANCE})")
    add_option(p, "out")
    add_option(p, "env")
    add_option(p, "timeout", help="seconds per try before its worker is killed")
    add_option(p, "threads")
    return p


def try_request(base: RunRequest, b: int) -> RunRequest:
    """harness.run's request for one try: the search's request with this B as a sweep point."""
    return replace(base, sweep=f"batch_size={b}", sweep_name=SWEEP_NAME)


def run_args(args: argparse.Namespace, b: int) -> RunRequest:
    """The request for one try of a parsed batch_search command line: this rung, this B, one repeat."""
    sets = list(args.set or [])
    if args.memory_budget_gib is not None:
        sets.append(f"memory_budget_gib={args.memory_budget_gib}")
    return try_request(replace(RunRequest.from_args(args), rungs=args.rung, repeats=1, sets=tuple(sets)), b)


def main(argv=None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.start > args.max:  # each alone is in range (harness.argtypes)
        parser.error(f"--start {args.start} is above --max {args.max}")
    options = SearchOptions(start=args.start, max=args.max, multiple=args.multiple, headroom_gib=args.headroom_gib,
                            knee_tolerance=args.knee_tolerance)
    first = run_args(args, options.start)
    try:
        load_plan(first.plan).check_rungs([args.rung])
        check_request(first)  # every option checked before the first worker starts
    except USAGE_ERRORS as exc:
        parser.error(str(exc))
    return run_search(first, options)


def run_search(request: RunRequest, options: SearchOptions) -> int:
    """The search with every try a worker (`request`: the first try's; each try replaces its B), then the report."""
    count = 0
    records: list[dict] = []

    def attempt(b: int) -> dict:
        nonlocal count
        count += 1
        try_req = try_request(request, b)
        plan_name, points = build_points(try_req)
        print(f"try {count}: B={b}", flush=True)
        t = judge(options, launcher.run_points(try_req, plan_name, points, records)[-1])
        if t.status == "ok" and not t.fits:
            print(f"         does not fit: {t.why}", flush=True)
        return t

    print(f"batch search: plan {request.plan}, rung {request.rungs}, preset {request.preset}, B from {options.start} to "
          f"{options.max} (multiples of {options.multiple}), env {request.env} -> {request.out}/", flush=True)
    with launcher.report_stops("python -m harness.batch_search", records, request.out) as stop:
        result = search(options, attempt)
    if stop.exit_code is not None:
        return stop.exit_code
    print()
    print(report(options, result))
    return 0 if result["best"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
