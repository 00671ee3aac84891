"""Run a plan: one fresh worker process per rung and repeat, one record each, a summary at the end.

  python -m harness.run --plan seed-ladder --preset tiny --out results/
  python -m harness.run --plan seed-ladder --rungs fused-adamw-clip --sweep batch_size=64,80,96   # a sweep

No torch import in this process: flags, compile caches, CUDA context and memory statistics cannot
leak between rungs, and an OOM or a segfault ends only its own rung.

Everything that can be checked is checked before the first worker starts (plan, values, --env, --rungs,
--timeout, that --out takes a file). Each worker runs in its own session: on a timeout, SIGTERM, SIGINT
or SIGHUP its whole process group (compiler subprocesses included) is killed, and its temp dir removed;
an interrupted run prints what finished and exits 128 + the signal number (143 for SIGTERM, 130 for
SIGINT). A worker also dies with its runner if the runner itself is killed (harness.worker).

This module is the command line only: the request is harness.request, the worker processes harness.launcher,
the lines printed harness.progress.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.launcher import Interrupted, RecordsUnwritable, run_points, stop_on_signals
from harness.progress import contention_warning, finished_lines, summary_table
from harness.request import (
    DEFAULT_OUT,
    DEFAULT_TIMEOUT_S,
    USAGE_ERRORS,
    Point,
    RunRequest,
    add_option,
    check_request,
    selection_line,
)
from harness.request import build_points as build_request_points
from harness.request import rerun_command as request_rerun_command


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness.run", description="Run a plan of the GPT workload; one record per rung in --out.")
    add_option(p, "plan")
    add_option(p, "preset", help="model shape (default: tiny, trains in seconds on a CPU)")
    add_option(p, "out", help=f"directory for the records (default: {DEFAULT_OUT}/, git-ignored, apart from the records shipped in results/)")
    add_option(p, "env")
    p.add_argument("--repeats", type=int, help="repeats per rung (default: the plan's, else 1)")
    p.add_argument("--rungs", help="comma-separated rung names to run (default: all)")
    add_option(p, "set", help="override a workload field for every rung (repeatable)")
    add_option(p, "flag", help="override a frozen flag for every rung (repeatable; wins over the plan's), e.g. "
               "inductor_shape_padding=off (harness/flags.py lists them)")
    p.add_argument("--sweep", metavar="FIELD=V1,V2,...", help="run every rung once per value of a workload field, "
                   "each point its own process and record (the value wins over the plan and --set; replaces the plan's sweeps)")
    p.add_argument("--sweep-name", dest="sweep_name", help="the name the points' records are tagged with (default: FIELD)")
    add_option(p, "steps", help="steps per rung (shorthand for --set steps=N)")
    add_option(p, "warmup_steps")
    add_option(p, "batch_size")
    add_option(p, "seq_len")
    add_option(p, "device")
    add_option(p, "threads")
    add_option(p, "timeout", help=f"seconds per worker before it is killed (default {DEFAULT_TIMEOUT_S})")
    return p


def build_points(args: argparse.Namespace) -> tuple[str, list[Point]]:
    """The points a parsed `python -m harness.run` command line makes (harness.cluster expands its matrix with it)."""
    return build_request_points(RunRequest.from_args(args))


def rerun_command(args: argparse.Namespace, point: Point) -> str:
    """The rerun command of one point of a parsed `python -m harness.run` command line."""
    return request_rerun_command(RunRequest.from_args(args), point)


def main(argv=None) -> int:
    parser = make_parser()
    request = RunRequest.from_args(parser.parse_args(argv))
    records: list[dict] = []
    points: list[Point] = []
    with stop_on_signals():
        try:
            try:
                plan_name, points = check_request(request)
            except USAGE_ERRORS as exc:
                parser.error(str(exc))
            print(f"plan {plan_name}: {len(points)} run(s), env {request.env}, preset {request.preset} -> "
                  f"{Path(request.out).as_posix()}/", flush=True)
            chosen = selection_line(request, points)
            if chosen:
                print(chosen, flush=True)
            run_points(request, plan_name, points, records)
        except Interrupted as exc:
            print("\n".join(finished_lines(records, len(points), request.out)), flush=True)
            print(f"python -m harness.run: interrupted by {exc}: the running worker and its subprocesses were stopped; "
                  f"{len(records)} run(s) finished, their records are in {request.out}/", file=sys.stderr, flush=True)
            return exc.exit_code
        except RecordsUnwritable as exc:
            print("\n".join(finished_lines(records, len(points), request.out)), flush=True)
            print(f"python -m harness.run: {exc}; {len(records)} run(s) finished, their records are in {request.out}/",
                  file=sys.stderr, flush=True)
            return 1
    print()
    print(summary_table(records))
    warning = contention_warning(records)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    return 1 if any(r["status"] == "error" for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
