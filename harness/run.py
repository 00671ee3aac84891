"""Run a plan: one fresh worker process per rung and repeat, one record each, a summary at the end.

  python -m harness.run --plan seed-ladder --preset tiny --out results/
  python -m harness.run --plan seed-ladder --rungs fused-adamw-clip --sweep batch_size=64,80,96   # a sweep

No torch import in this process: flags, compile caches, CUDA context and memory statistics cannot
leak between rungs, and an OOM or a segfault ends only its own rung.

Everything that can be checked is checked before the first worker starts (plan, values, --env, --rungs,
--timeout, that --out takes a file). Each worker runs in its own session: on a timeout, SIGTERM, SIGINT
or SIGHUP its whole process group (compiler subprocesses included) is killed, and its temp dir removed;
an interrupted run prints what finished and exits 128 + the signal number (143 for SIGTERM, 130 for
SIGINT). A worker also dies with its runner if the runner itself is killed (harness.lifeline).

This module is the command line only: the request is harness.runner.request (`parse_request` makes one from
harness.run's arguments held as data), the worker processes harness.runner.launcher, the lines printed harness.runner.progress.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from harness import argtypes
from harness.analysis.dataset import load
from harness.cli.run_options import add_option
from harness.runner.launcher import report_stops, run_points
from harness.runner.progress import contention_warning, point_label, summary_table
from harness.runner.request import (
    AUTO_MAX_REPEATS,
    AUTO_TARGET,
    DEFAULT_OUT,
    DEFAULT_TIMEOUT_S,
    USAGE_ERRORS,
    OptionError,
    RunRequest,
    check_request,
    selection_line,
)


class _RaisingParser(argparse.ArgumentParser):
    """An option the parser refuses raises OptionError instead of printing the usage and exiting (parse_request)."""

    def error(self, message: str):
        raise OptionError(message)


def make_parser(parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser) -> argparse.ArgumentParser:
    p = parser_class(prog="python -m harness.run", description="Run a plan of the GPT workload; one record per rung in --out.")
    add_option(p, "plan")
    add_option(p, "preset", help="model shape (default: tiny, trains in seconds on a CPU)")
    add_option(p, "out", help=f"directory for the records (default: {DEFAULT_OUT}/, git-ignored, apart from the records shipped in results/)")
    add_option(p, "env")
    p.add_argument("--repeats", type=argtypes.repeats_or_auto, help="runs per rung (default: the plan's, else 1), or 'auto': "
                   "add runs of a rung one process at a time until its tokens/s is known to within --target "
                   "(99%% interval, the run-to-run spread of harness.compare) or --max-repeats runs were made")
    p.add_argument("--max-repeats", dest="max_repeats", type=argtypes.max_repeats, metavar="N",
                   help=f"with --repeats auto: at most N runs of a rung, 2 to 1,000 (default {AUTO_MAX_REPEATS})")
    p.add_argument("--target", type=argtypes.target_percent, metavar="PCT",
                   help=f"with --repeats auto: the half-width to reach, a percentage "
                        f"(default {AUTO_TARGET * 100:.0f}%%)")
    p.add_argument("--rungs", help="comma-separated rung names to run (default: all); 'a+b' stacks rungs a and b of a "
                   "non-cumulative plan (their changes together), e.g. sdpa-cudnn+lm-head-cce")
    add_option(p, "set", help="override a workload field for every rung (repeatable)")
    add_option(p, "flag", help="override a frozen flag for every rung (repeatable; wins over the plan's), e.g. "
               "inductor_shape_padding=off (harness/runner/flags.py lists them)")
    p.add_argument("--sweep", metavar="FIELD=V1,V2,...", help="run every rung once per value of a workload field, "
                   "each point its own process and record (the value wins over the plan and --set; replaces the plan's sweeps)")
    p.add_argument("--sweep-name", dest="sweep_name", help="the name the points' records are tagged with (default: FIELD)")
    add_option(p, "steps", help="steps per rung (shorthand for --set steps=N)")
    add_option(p, "warmup_steps")
    add_option(p, "batch_size")
    add_option(p, "seq_len")
    add_option(p, "model")
    add_option(p, "device")
    add_option(p, "threads")
    add_option(p, "timeout", help=f"seconds per worker before it is killed (default {DEFAULT_TIMEOUT_S})")
    return p


AUTO_MIN_RUNS = 2  # --repeats auto: a rung's own spread needs two runs (its device's may already be known)


def run_until_decided(request: RunRequest, plan_name: str, points: list, records: list[dict], say=print) -> None:
    """--repeats auto: each point (rung, sweep value) runs once, then again, one process at a time, until its
    tokens/s interval is within the target by the rule harness.compare uses (the run-to-run spread of its runs
    and of the device's other cells in --out), or the cap is reached ("undecided after N runs"). A run that is not
    ok ends its point's repeats; a contended run counts toward the cap but not the interval (as in compare)."""
    cap, target = request.max_repeats or AUTO_MAX_REPEATS, request.target or AUTO_TARGET
    for k, first in enumerate(points, 1):
        made: list[dict] = []
        while True:
            run_points(request, plan_name, [replace(first, repeat=len(made))], records, numbering=(k, len(points)))
            made.append(records[-1])
            label = point_label(first)
            if made[-1]["status"] != "ok":
                say(f"      {label}: {made[-1]['status']}, no more runs of it")
                break
            if len(made) < AUTO_MIN_RUNS:
                continue
            half = half_width(request.out, {r["run_id"] for r in made})
            known = f"+-{half:.1%}" if half is not None else "no interval yet (contended runs count nowhere)"
            if half is not None and half <= target:
                say(f"      {label}: decided after {len(made)} runs: tokens/s {known} (target {target:.1%})")
                break
            if len(made) >= cap:
                say(f"      {label}: undecided after {len(made)} runs: tokens/s {known}, target {target:.1%} "
                    f"(--max-repeats to allow more)")
                break
            say(f"      {label}: {len(made)} runs, tokens/s {known} (target {target:.1%}): one more")


def half_width(out: str, run_ids: set[str]) -> float | None:
    """The relative half-width of the tokens/s interval of the cell holding these runs, as harness.compare computes
    it over --out (the device's spread pooled over every cell there); None while it has none (all contended)."""
    ds = load([out], warn=lambda line: None)
    group = next((g for g in ds.groups if run_ids & {r.run_id for r in g.records}), None)
    return group.throughput.half_width() if group is not None else None


def parse_request(argv: list[str]) -> RunRequest:
    """The request a `python -m harness.run` command line stands for (its arguments, without the program), for
    callers that hold those arguments as data (harness.cluster): an option the parser refuses raises OptionError,
    one line, where the command line itself prints the usage and exits 2."""
    return RunRequest.from_args(make_parser(_RaisingParser).parse_args(argv))


def main(argv=None) -> int:
    parser = make_parser()
    request = RunRequest.from_args(parser.parse_args(argv))
    records: list[dict] = []
    with report_stops("python -m harness.run", records, request.out) as stop:
        try:
            plan_name, points = check_request(request)
        except USAGE_ERRORS as exc:
            parser.error(str(exc))
        stop.total = len(points)
        runs = (f"{len(points)} rung(s) x {AUTO_MIN_RUNS} to {request.max_repeats or AUTO_MAX_REPEATS} run(s) until "
                f"decided" if request.auto else f"{len(points)} run(s)")
        print(f"plan {plan_name}: {runs}, env {request.env}, preset {request.preset} -> "
              f"{Path(request.out).as_posix()}/", flush=True)
        chosen = selection_line(request, points)
        if chosen:
            print(chosen, flush=True)
        if request.auto:
            run_until_decided(request, plan_name, points, records)
        else:
            run_points(request, plan_name, points, records)
    if stop.exit_code is not None:
        return stop.exit_code
    print()
    print(summary_table(records))
    warning = contention_warning(records)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    return 1 if any(r["status"] == "error" for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
