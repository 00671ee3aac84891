"""How noisy is this machine? An A/A measurement: two rungs, N runs each, each run its own worker process, nothing
changed between them, so every difference between the runs is noise.

  python -m harness.calibrate                          # fp32 and bf16 of the seed ladder, tiny, 5 runs each -> results/runs/
  python -m harness.calibrate --rung fp32 --runs 8 --threads 1 --out results/calibration

Its records carry the plan name `calibrate` (harness.analysis.noise.CALIBRATION_PLAN): harness.compare, the report,
harness.run --repeats auto and the bisect use them for the run-to-run spread of the device they ran on (pooled with
that device's configurations of 2+ runs) and show them in no table. Two rungs, because a one-run cell of another
rung may borrow the device's spread only where the device showed its configurations alike in noise (one rung
cannot show that). Each calibrate is one invocation: run it in several sessions (5 in all) and the offset between
invocations is measured too. It prints the spreads and the smallest change this machine can show with 2, 3 and 5
runs a side, by the rule every comparison uses (harness.analysis.stats).
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

from harness import argtypes
from harness.analysis import noise_model, stats
from harness.analysis.noise import CALIBRATION_PLAN, run_memory, run_tokens_per_s
from harness.cli.run_options import add_option
from harness.record.view import RecordView
from harness.runner.launcher import report_stops, run_points
from harness.runner.plan import MAX_REPEATS
from harness.runner.progress import contention_warning
from harness.runner.request import USAGE_ERRORS, RunRequest, check_request, override_args

MIN_RUNS = 3  # two runs give one degree of freedom: a spread that is itself a guess
DEFAULT_RUNS = 5
DEFAULT_RUNG = "fp32,bf16"
SIDES = (2, 3, 5)  # runs a side the summary answers for


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness.calibrate", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rung", default=DEFAULT_RUNG, help=f"the rung(s) of --plan to run, comma-separated (default "
                   f"{DEFAULT_RUNG}: two, so the device can show its configurations alike in noise)")
    p.add_argument("--runs", type=argtypes.whole(MIN_RUNS, MAX_REPEATS, "number of runs"), default=DEFAULT_RUNS,
                   help=f"runs of each rung, each its own process ({MIN_RUNS} to {MAX_REPEATS:,}; default {DEFAULT_RUNS})")
    add_option(p, "plan")
    add_option(p, "preset")
    add_option(p, "out")
    add_option(p, "env")
    add_option(p, "set")
    add_option(p, "flag")
    add_option(p, "steps")
    add_option(p, "warmup_steps")
    add_option(p, "device")
    add_option(p, "threads")
    add_option(p, "timeout")
    p.add_argument("--include-contended", action="store_true", help="count runs timed while other work kept the CPUs "
                   "busy, marked (by default they count nowhere, as in harness.compare)")
    return p


def detectable(noise, runs: int, floor: float = stats.NOISE_FLOOR) -> float:
    """The smallest relative change two sets of `runs` runs each can call beyond noise with this spread (a Noise or a
    Spread: sd and df)."""
    return max(math.expm1(stats.t_critical(noise.df) * noise.sd * math.sqrt(2 / runs)), floor)


def summary_lines(records: list[dict], device: noise_model.DeviceSpread | None = None,
                  include_contended: bool = False) -> list[str]:
    """The spread of these runs, rung by rung, and what it lets a comparison see with 2, 3 and 5 runs a side; then
    what the device's records in --out say as harness.compare reads them (alike, between invocations)."""
    views = [v for v in map(RecordView, records) if v.ok and (include_contended or not v.contended)]
    busy = sum(1 for v in map(RecordView, records) if v.ok and v.contended)
    counted = "counted, marked" if include_contended else "counted nowhere"
    lines = [f"{len(views)} run(s) counted of {len(records)}" + (f" ({busy} contended, {counted})" if busy else "")]
    by_rung: dict[str, list[RecordView]] = {}
    for v in views:
        by_rung.setdefault(v.rung, []).append(v)
    spreads = []
    for rung, runs in by_rung.items():
        tokens = [run_tokens_per_s(v) for v in runs]
        own = noise_model.pooled_noise([tokens], source="own")
        if own is None:
            lines.append(f"{rung}: fewer than 2 clean runs: no spread (run again when the machine is quiet)")
            continue
        spreads.append(own)
        lo, hi = min(tokens), max(tokens)
        line = (f"{rung}: tokens/s {lo:,.0f} .. {hi:,.0f} ({hi / lo - 1:.1%} from slowest to fastest); run-to-run sd "
                f"{own.sd:.1%} ({own.runs} runs, {own.df} degrees of freedom)")
        memory: dict[str, list] = {}
        for v in runs:
            metric, value = run_memory(v)
            memory.setdefault(metric, []).append(value)
        for metric, values in memory.items():
            mem = noise_model.pooled_noise([values], source="own")
            if mem is not None:
                line += f"; {metric} {min(values) / 2**20:,.0f} .. {max(values) / 2**20:,.0f} MiB, sd {mem.sd:.1%}"
        lines.append(line)
        lines.append(f"  smallest change in tokens/s called beyond noise ({stats.interval_name()}, floor "
                     f"{stats.NOISE_FLOOR:.0%}), from these runs alone: " +
                     ", ".join(f"{n} runs a side {detectable(own, n):.1%}" for n in SIDES))
    if not spreads:
        return lines
    if device is not None:
        said = (f"pooled over {device.cells} configuration(s) alike in noise ({device.runs} runs, sd {device.sd:.1%})"
                if device.alike and device.pooled is not None else
                f"its {device.cells} configurations differ in noise: each keeps its own")
        lines.append(f"the device as harness.compare reads --out: {said}; " +
                     ("a one-run cell of another rung may borrow it" if device.borrowable else
                      "a one-run cell borrows none (2+ configurations alike would lend it)"))
        if device.alike and device.pooled is not None:
            lines.append("  with it: " + ", ".join(f"{n} runs a side {detectable(device.pooled, n):.1%}" for n in SIDES))
        if device.between is not None:
            lines.append(f"invocations differ by {device.between.sd:.1%} (sd of an invocation's offset, from "
                         f"{device.between.configs} configuration(s), {device.between.df:.0f} degrees of freedom): "
                         "every delta between two invocations carries it")
        else:
            lines.append("the offset between invocations is not measured yet: each calibrate is one invocation; "
                         "5 in all (in other sessions) measure it")
    return lines


def main(argv=None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    request = replace(RunRequest.from_args(args), repeats=args.runs, rungs=args.rung)  # its own names for the two
    records: list[dict] = []
    with report_stops("python -m harness.calibrate", records, request.out) as stop:
        try:
            _plan, points = check_request(request)
        except USAGE_ERRORS as exc:
            parser.error(str(exc))
        rungs = [name.strip() for name in args.rung.split(",")]
        if len(points) != args.runs * len(rungs):
            parser.error(f"--rung {args.rung}: the plan sweeps it; calibrate one point a rung (--set FIELD=VALUE)")
        stop.total = len(points)
        print(f"calibrate: {args.runs} runs of {args.plan}/{args.rung} ({args.preset}), env {args.env} -> "
              f"{Path(request.out).as_posix()}/ (records tagged plan={CALIBRATION_PLAN})", flush=True)
        def rerun(point) -> str:  # one more run of this point's rung (a calibration of two rungs names one)
            return shlex.join(["python", "-m", "harness.calibrate", "--rung", point.rung, "--runs", "1", "--plan",
                               args.plan, "--preset", args.preset, "--out", request.out, "--env", args.env,
                               *override_args(request)])

        run_points(request, CALIBRATION_PLAN, points, records, rerun=rerun)
    if stop.exit_code is not None:
        return stop.exit_code
    print()
    lines = summary_lines(records, _device_noise(request.out, records, args.include_contended), args.include_contended)
    # at 120 columns, each line's continuation indented under it
    print("\n".join(textwrap.fill(line, 120, subsequent_indent=" " * (len(line) - len(line.lstrip()) + 2),
                                   break_on_hyphens=False) for line in lines))
    warning = contention_warning(records)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    return 0 if any(r["status"] == "ok" for r in records) else 1


def _device_noise(out: str, records: list[dict], include_contended: bool) -> noise_model.DeviceSpread | None:
    """The device's tokens/s spreads over everything in --out, as harness.compare computes them."""
    from harness.analysis.dataset import load

    labels = {RecordView(r).device_label for r in records if r["status"] == "ok"}
    noise = load([out], warn=lambda line: None, include_contended=include_contended).noise
    return next((noise[label].tokens for label in labels if label in noise and noise[label].tokens), None)


if __name__ == "__main__":
    sys.exit(main())
