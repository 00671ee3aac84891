"""python -m harness.gpu_check [--dry-run] [options]   |   python -m harness.gpu_check unpack ARCHIVE [--into DIR]

  python -m harness.gpu_check --dry-run                       # the plan, with estimated H100 times, no GPU needed
  python -m harness.gpu_check --budget-s 480 --out /tmp/gc --pack-to "$OUT"
  python -m harness.gpu_check unpack gpu-check-h100-80gb-hbm3-20261126T101500Z.tar.gz

Exit 0 when every started run left a record and compare and report ran (oom and unsupported are results), 1 when
one did not, 2 on bad options or no CUDA device. Everything is checked before the sanity check starts.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from harness import argtypes
from harness.console import output
from harness.console.textsafe import one_line
from harness.gpu_check import budget, choose, estimate, pack, plan, runner, text
from harness.provenance import envinfo
from harness.record.io import check_writable
from harness.record.model import RecordError

ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_GPU = "NVIDIA H100 80GB HBM3"  # the dry run's device: a lent machine's first kind


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness.gpu_check", description=(
        "One budgeted GPU call: the CUDA sanity check, then single runs in order of value while the budget lasts "
        "(none started that would not finish), compare and report on what exists, all packed into three files. "
        "'unpack ARCHIVE' puts such an archive into results/gpu-<device>-<date>/."))
    p.add_argument("--budget-s", type=argtypes.seconds, default=480.0, help="seconds for the whole call, closing included (480)")
    p.add_argument("--reserve-s", type=argtypes.seconds_or_none, default=estimate.CLOSING_S,
                   help=f"seconds kept for compare, report and packing ({estimate.CLOSING_S:.0f})")
    p.add_argument("--tiers", help=f"comma-separated tiers in the order to run ({','.join(plan.tier_names())}: the default)")
    p.add_argument("--steps", type=argtypes.steps, help=f"steps of every run, with --warmup-steps (default: each tier's: "
                   f"{plan.SHORT[0]} with {plan.SHORT[1]} warm-up for the padding A/B, {plan.FULL[0]} with {plan.FULL[1]} "
                   "for the knobs)")
    p.add_argument("--warmup-steps", type=argtypes.warmup_steps, help="warm-up steps of every run (needs --steps)")
    p.add_argument("--out", type=argtypes.path_text, help="the call's results folder, new or empty (default results/runs/gpu-check-<UTC time>)")
    p.add_argument("--pack-to", type=argtypes.path_text, help="also pack everything into this folder after every run (a device call's $OUT)")
    p.add_argument("--records", action="append", type=argtypes.path_text, help="committed GPU records the estimates start from (repeatable; "
                   "default: every results/gpu-*/ folder)")
    p.add_argument("--dry-run", action="store_true", help="print the plan with estimated times and run nothing")
    p.add_argument("--gpu", default=DEFAULT_GPU, help=f"the device the dry run plans for (default {DEFAULT_GPU!r})")
    return p


def make_unpack_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness.gpu_check unpack", description=(
        "Extract a gpu_check archive into results/gpu-<device>-<date>/ with a README.md of how it was made."))
    p.add_argument("archive", type=argtypes.path_arg)
    p.add_argument("--results", type=argtypes.path_arg, default=Path("results"), help="the folder it goes under (default results/)")
    p.add_argument("--into", type=argtypes.path_arg, help="the exact folder instead (must not exist)")
    return p


def unpack_main(argv: list[str]) -> int:
    p = make_unpack_parser()
    args = p.parse_args(argv)
    try:
        target = pack.unpack(args.archive, args.results, args.into)
    except pack.PackError as exc:  # one line (not argparse's usage above it), exit 2
        return output.fail(f"{p.prog}: {one_line(exc)}", 2)
    try:
        output.emit(f"unpacked into {one_line(target)}/ (README.md written: add what a reader must know under "
                    "'Corrections and gaps')\n")
    except output.OutputError as exc:
        return output.fail(str(exc))
    return 0


def check(p: argparse.ArgumentParser, args) -> tuple[list[plan.Tier], list[Path]]:
    if args.budget_s <= 0 or args.reserve_s < 0 or args.reserve_s >= args.budget_s:
        p.error("--budget-s must be positive and --reserve-s from 0 to below it")
    if (args.steps is None) != (args.warmup_steps is None):
        p.error("--steps and --warmup-steps go together")
    if args.steps is not None and (args.steps < 2 or not 0 <= args.warmup_steps < args.steps):
        p.error("--steps must be at least 2 and --warmup-steps from 0 to below it")
    steps = None if args.steps is None else (args.steps, args.warmup_steps)
    try:
        tiers = plan.select([t.strip() for t in args.tiers.split(",")] if args.tiers else None, steps)
    except ValueError as exc:
        p.error(str(exc))
    paths = [Path(x) for x in args.records] if args.records else sorted((ROOT / "results").glob("gpu-*/"))
    missing = [str(x) for x in paths if not x.exists()]
    if missing:
        p.error(f"--records: no such folder {', '.join(missing)}")
    if not args.dry_run:
        args.out = args.out or f"results/runs/gpu-check-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}"
        if Path(args.out).is_dir() and any(Path(args.out).iterdir()):
            p.error(f"--out {args.out} is not empty: a call's folder holds that call alone (it is packed whole)")
        if args.pack_to and Path(args.out).resolve() in (Path(args.pack_to).resolve(), *Path(args.pack_to).resolve().parents):
            p.error("--pack-to must be outside --out (the archive packs --out whole)")
        try:
            check_writable(args.out)
            if args.pack_to:
                check_writable(args.pack_to)
        except RecordError as exc:
            p.error(str(exc))
    return tiers, paths


def dry_run(args, tiers, records) -> int:
    names = estimate.gpu_names(records)
    est = estimate.Estimator(records, args.gpu)
    clock = budget.SimulatedClock(estimate.SANITY_S)
    lines: list[str] = []
    chooser = choose.Chooser(records, args.gpu)  # decides from the committed records alone
    outcomes = budget.spend(tiers, budget.simulated_runner(clock, est), clock,
                            args.budget_s - args.reserve_s, est, say=lambda line: None, decide=chooser)
    started = [o for o in outcomes if o.started]
    lines.append(text.wrap(
        f"gpu_check dry run for {args.gpu}: budget {args.budget_s:.0f} s = sanity ~{estimate.SANITY_S:.0f} s (assumed) + "
        f"runs + {args.reserve_s:.0f} s for compare, report and packing; steps per run W+N = warm-up + timed; "
        f"estimates from {len(est.records)} committed records of "
        f"{'that GPU' if not est.fallback else 'other GPUs (' + ', '.join(names) + ')'}, each + {estimate.LAUNCH_S:.0f} s worker start."))
    lines.append("")
    lines.append(text.runs_table(outcomes, dry_run=True, start_s=estimate.SANITY_S))
    lines.append("")
    lines.append(text.wrap(f"{len(started)} of {len(outcomes)} runs start if every run takes its estimate, ending at "
                           f"~{clock.now:.0f} s, then the closing; the real call re-estimates after every run from "
                           "the runs it has done, and gives each run the time left as its timeout."))
    lines += text.tier_lines(tiers, outcomes)
    lines += text.choice_lines(chooser.choices, "decided from the committed records (the call decides from its runs)")
    output.emit("\n".join(lines) + "\n")
    return 0


def summary_text(summary: dict, tiers, outcomes, start_s: float) -> str:
    head = text.wrap(f"gpu_check on {summary['gpu']}: {summary['used_s']:.0f} s of {summary['budget_s']:.0f} s; "
                     f"{sum(o.started for o in outcomes)} of {len(outcomes)} runs started; estimates x"
                     f"{summary['scale']:.2f} by this call's runs; compare exit {summary['compare'].get('exit', 'not yet')}, "
                     f"report exit {summary['report'].get('exit', 'not yet')}")
    legend = text.wrap("tokens/s from the median timed step; peak MiB: NVML's device used (another metric named); "
                       "compare.txt and report/ read the same records with the noise rule")
    return "\n".join([head, "", text.runs_table(outcomes, dry_run=False, start_s=start_s), legend, "",
                      *text.tier_lines(tiers, outcomes),
                      *text.choice_lines(summary.get("choices") or [], "decided from this call's runs")]) + "\n"


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["unpack"]:
        return unpack_main(argv[1:])
    p = make_parser()
    args = p.parse_args(argv)
    tiers, paths = check(p, args)
    records = estimate.load_gpu_records(paths)
    if args.dry_run:
        try:
            return dry_run(args, tiers, records)
        except output.OutputError as exc:
            return output.fail(str(exc))

    t0, started_at = time.monotonic(), datetime.now(timezone.utc).isoformat(timespec="seconds")
    out, python = Path(args.out), sys.executable
    code, found = runner.run_sanity(python, out / "logs")
    if found is None:
        print("gpu_check: the sanity check found no CUDA device (above); nothing run", file=sys.stderr)
        return 2
    sanity_s = time.monotonic() - t0
    gpu = found["gpu"]
    est = estimate.Estimator(records, gpu)
    summary = {"tool": "python -m harness.gpu_check", "command": ["python", "-m", "harness.gpu_check", *argv],
               "gpu": gpu, "started_at": started_at, "finished_at": None, "budget_s": args.budget_s,
               "reserve_s": args.reserve_s,
               "tiers": [t.name for t in tiers], "source": envinfo.code_identity(),
               "sanity": {**found, "exit": code, "seconds": round(sanity_s, 1)}, "runs": [], "scale": 1.0,
               "compare": {"paths": []}, "report": {}, "used_s": 0.0}
    outcomes: list[budget.Outcome] = []
    runs = plan.runs_of(tiers)

    def save() -> None:
        """The summary so far (runs not reached yet listed as such), packed when --pack-to: a call cut short keeps it."""
        pending = [budget.Outcome(r, 0.0, "", note="not reached: the call ended first") for r in runs[len(outcomes):]]
        # (spend decides runs in plan order, so the first len(outcomes) runs are the decided ones)
        summary["runs"] = [o.to_dict() for o in outcomes + pending]
        summary["scale"], summary["used_s"] = round(est.scale, 3), round(time.monotonic() - t0, 1)
        summary["archive_name"] = pack.archive_name(summary)
        if args.pack_to:
            pack.pack(out, summary, summary_text(summary, tiers, outcomes + pending, sanity_s), Path(args.pack_to))

    if code != 0:
        print("gpu_check: the sanity check failed (above); not running the GPU steps", file=sys.stderr)
        save()
        return 1
    chooser = choose.Chooser(records, gpu, out)  # decides from this call's runs as they finish
    outcomes_done = budget.spend(tiers, runner.WorkerRunner(python, out), time.monotonic,
                                 t0 + args.budget_s - args.reserve_s, est, on_done=lambda o: (outcomes.append(o), save()),
                                 decide=chooser)
    summary["choices"] = chooser.choices
    committed = [x for x in paths if any(r.environment.gpu.name == gpu
                                         for r in estimate.load_gpu_records([x]))]
    reference = [ROOT / "results" / "reference"] if (ROOT / "results" / "reference").is_dir() else []
    summary.update(runner.closing(python, out, committed + reference, deadline=t0 + args.budget_s))
    summary["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    save()
    print()
    print(summary_text(summary, tiers, outcomes_done, sanity_s), end="")
    failed = [o for o in outcomes_done if o.started and o.status in ("error", "timeout")]
    return 1 if failed or summary["compare"]["exit"] or summary["report"]["exit"] else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["unpack"]:  # Ctrl-C, SIGTERM or SIGHUP: one line, exit 130/143/129, its temp folder removed
        output.run_process("python -m harness.gpu_check unpack", lambda: unpack_main(sys.argv[2:]))
    sys.exit(main())
