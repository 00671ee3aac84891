"""Which torch release changed it: bisect installed torch builds for one rung's number, or draw the landscape.

  python -m harness.bisect --rung bf16 --metric tokens_per_s --good 2.1.2 --bad 2.15.0 --device cpu
  python -m harness.bisect --rung bf16 --metric peak_memory --good torch212 --bad latest --out results/bisect
  python -m harness.bisect --rung bf16 --good 2.1.2 --bad 2.15.0 --landscape --newest-patches
  python -m harness.bisect --good 2.1.2 --bad 2.15.0 --list        # the candidates and their specs, nothing installed
  python -m harness.bisect --at 2.8.0 --rung bf16 --repeats 1       # one build, measured again (a record's rerun)

--good/--bad: env names (envs/<name>/env.yaml) or torch versions. Candidates: the torch releases between them that
the index offers for the env's Python on this platform (`pip index versions`), then nightlies where a nightly index
is configured (HARNESS_TORCH_INDEX_URL_NIGHTLY). Each becomes a spec under --out/envs/, is installed with harness.envs'
install code into --venvs, and is measured in the harness's own worker processes; its records (--out/records/) are
reused by the next bisect or landscape of the same rung and workload on this machine. The ends first, with repeats;
if they do not differ beyond noise (harness.analysis.stats: compare's rule) nothing else is installed.
Ctrl-C keeps every finished point (the same command reuses them).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from harness import argtypes
from harness.analysis import stats
from harness.bisect.candidates import (
    CandidateError,
    candidate_at,
    candidate_spec,
    candidates_between,
    newest_patches,
    resolve_end,
)
from harness.bisect.explain import answer_lines, landscape_chart, points_table, underneath, write_state
from harness.bisect.search import METRICS, Search, calibration_runs
from harness.cli.run_options import add_option
from harness.runner.launcher import Interrupted, stop_on_signals
from harness.runner.request import AUTO, AUTO_MAX_REPEATS, USAGE_ERRORS, RunRequest

DEFAULT_OUT = "results/bisect"  # under results/runs' rule: results/bisect is git-ignored
DEFAULT_VENVS = ".venvs/bisect"
DEFAULT_CALIBRATION = "results/runs"  # where python -m harness.calibrate writes by default


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness.bisect", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--good", metavar="A", help="one end: an env name (torch212) or a torch version")
    p.add_argument("--bad", metavar="B", help="the other end, likewise")
    p.add_argument("--at", metavar="V", help="instead of a range: measure this one build --repeats more times, reusing "
                   "nothing (the rerun command of every record a bisect writes)")
    p.add_argument("--rung", help="the rung of --plan to measure (required unless --list)")
    p.add_argument("--metric", choices=sorted(METRICS), default="tokens_per_s", help="the number to bisect (default tokens_per_s)")
    p.add_argument("--landscape", action="store_true", help="measure every candidate instead, and draw the metric against the version")
    p.add_argument("--newest-patches", action="store_true", help="only the newest patch of each minor release (and both ends)")
    p.add_argument("--list", action="store_true", help="print the candidates and what each installs; measure nothing")
    p.add_argument("--out", default=DEFAULT_OUT, type=argtypes.path_text, help=f"the bisect's folder: specs, records, logs, results (default {DEFAULT_OUT}/)")
    p.add_argument("--repeats", type=argtypes.repeats_or_auto, default=3, help="runs per candidate (default 3), or 'auto': 2 "
                   "each, then one more run at a time of a build whose comparison with its neighbours is undecided, "
                   "up to --max-repeats")
    p.add_argument("--max-repeats", dest="max_repeats", type=argtypes.max_repeats, metavar="N",
                   help=f"with --repeats auto: at most N runs of a build, 2 to 1,000 (default {AUTO_MAX_REPEATS})")
    p.add_argument("--index-url", help="the index torch releases come from (default: pip's configured index, else PyPI)")
    p.add_argument("--find-links", type=argtypes.path_arg, metavar="DIR", help="a folder of torch wheels instead of an index")
    p.add_argument("--python", help="the candidates' Python (default: the good end's spec's, else this interpreter's)")
    p.add_argument("--venvs", type=argtypes.path_arg, default=Path(DEFAULT_VENVS), help=f"where candidate venvs go (default {DEFAULT_VENVS}/)")
    p.add_argument("--remove-venvs", action="store_true", help="remove each candidate's venv once it is measured (with --repeats auto: once two newer builds are, or at the end, so the runs added to an undecided pair install nothing)")
    p.add_argument("--free-disk", action="store_true", help="with --remove-venvs: also drop the build's torch, triton and "
                   "nvidia-* wheels from uv's cache (GBs per build; a rerun downloads them again)")
    p.add_argument("--noise-floor", type=argtypes.fraction, default=stats.NOISE_FLOOR, help=f"smallest relative change called beyond noise (default {stats.NOISE_FLOOR})")
    p.add_argument("--calibration", action="append", type=argtypes.path_text, metavar="DIR",
                   help="harness.calibrate's records of this device, pooled into its run-to-run spread as harness.compare "
                   f"pools them (repeatable; default: {DEFAULT_CALIBRATION}/ and the bisect's own records/)")
    p.add_argument("--include-contended", action="store_true", help="reuse runs timed under contention too (by default "
                   "a contended run counts nowhere, as in harness.compare, and the build is measured again)")
    p.add_argument("--all", action="store_true", help="what changed underneath: every kernel change, not the largest few")
    add_option(p, "plan")
    add_option(p, "preset")
    add_option(p, "set")
    add_option(p, "flag")
    add_option(p, "steps")
    add_option(p, "warmup_steps")
    add_option(p, "batch_size")
    add_option(p, "seq_len")
    add_option(p, "device")
    add_option(p, "threads")
    add_option(p, "timeout")
    return p


def main(argv=None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    out = Path(args.out)
    auto = args.repeats == AUTO
    if not auto and args.max_repeats is not None:
        parser.error("--max-repeats needs --repeats auto")
    if auto and args.at:
        parser.error("--at measures one build --repeats times: a number, not auto")
    max_runs = (args.max_repeats or AUTO_MAX_REPEATS) if auto else 0
    args.repeats = 2 if auto else args.repeats  # auto: two runs each to start, more where undecided
    if args.metric != "tokens_per_s" and args.repeats < 2 and not args.list:
        parser.error(f"--metric {args.metric} is one number per run: it needs --repeats 2 or more for a noise estimate")
    if args.at and (args.good or args.bad or args.landscape or args.newest_patches):
        parser.error("--at measures one build: no --good, --bad, --landscape or --newest-patches with it")
    if not args.at and not (args.good and args.bad):
        parser.error("--good and --bad are required (or --at for one build)")
    try:
        python = args.python or _default_python(args.at or args.good, "at" if args.at else "good")
        cands = ([candidate_at(args.at, python, args.index_url, args.find_links)] if args.at else
                 candidates_between(args.good, args.bad, python, args.index_url, args.find_links))
    except CandidateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.newest_patches:
        cands = newest_patches(cands)
    if args.list:
        for c in cands:
            spec = candidate_spec(c, python)
            where = f"from {c.index_url}" if c.index_url else ("from " + str(args.find_links) if args.find_links else "default index")
            print(f"{c.version:22} env {c.env_name:22} {where}; beside torch: {', '.join(spec.extra_pins) or 'nothing'}")
        return 0
    if not args.rung:
        parser.error("--rung is required (the one rung of --plan to measure)")

    request = RunRequest(plan=args.plan, preset=args.preset, out=str(out / "records"), env="local", repeats=1,
                         rungs=args.rung, sets=tuple(args.set or ()), flags=tuple(args.flag or ()), steps=args.steps,
                         warmup_steps=args.warmup_steps, batch_size=args.batch_size, seq_len=args.seq_len,
                         device=args.device, timeout=args.timeout, threads=args.threads)
    from harness.bisect.measure import Measurer  # the runner side: imported once the input is good

    try:
        measurer = Measurer(request, out, python, args.venvs, args.repeats, args.find_links, args.remove_venvs,
                            args.free_disk, reuse=not args.at, include_contended=args.include_contended,
                            keep=2 if max_runs else 0)
    except USAGE_ERRORS as exc:
        parser.error(str(exc))
    metric = METRICS[args.metric]
    command = shlex.join(["python", "-m", "harness.bisect", *(sys.argv[1:] if argv is None else argv)])
    mode = "landscape" if args.landscape or args.at else "bisect"
    if args.at:
        print(f"torch {cands[0].version}: {args.repeats} new run(s) of rung {args.rung} ({args.preset}), "
              f"{metric.name} -> {out.as_posix()}/", flush=True)
    else:
        print(f"{mode} {metric.name} of rung {args.rung} ({args.preset}): {len(cands)} candidate(s) "
              f"{cands[0].version} .. {cands[-1].version}, {args.repeats} run(s) each -> {out.as_posix()}/", flush=True)
    # --at writes no search state: the bisect's own file stays what the search found
    calibration = calibration_runs(args.calibration or [DEFAULT_CALIBRATION, str(out / "records")],
                                   args.include_contended)
    if calibration:
        print(f"calibration: {len(calibration)} run(s) of harness.calibrate pooled into the device's spread", flush=True)
    search = Search(cands, metric, measurer, args.noise_floor, mode=mode, max_runs=max_runs, calibration=calibration,
                    on_point=(lambda result: None) if args.at else (lambda result: write_state(result, out, command)))
    with stop_on_signals():
        try:
            result = search.landscape() if mode == "landscape" else search.bisect()
        except Interrupted as exc:
            measurer.close()
            done = search.result.measured()
            if not args.at:
                write_state(search.result, out, command)
            print(f"\ninterrupted ({exc}): {len(done)} finished point(s) kept in {out / 'records'}; the same command "
                  "reuses them", file=sys.stderr)
            return exc.exit_code
    measurer.close()
    print()
    print(points_table(result))
    if args.at:
        print(f"records in {measurer.records_dir} (new runs only; the bisect and landscape reuse them with the rest)")
        return 0 if result.measured() and not result.measured()[0].failed else 1
    print()
    print("\n".join(answer_lines(result)))
    chart = landscape_chart(result, out, args.rung) if args.landscape or result.boundary else None
    explained = underneath(result, measurer.records_dir, args.all) if result.boundary else ""
    if explained:
        print("\nWhat changed underneath, across the boundary (harness.compare's tables for this pair):\n")
        print(explained)
    state = write_state(result, out, command)
    print(f"kept: {state}" + (f", {chart}" if chart else "") + f", records in {measurer.records_dir}")
    return 0 if result.outcome in ("boundary", "no difference", "landscape") else 1


def _default_python(end: str, what: str) -> str:
    """The Python of the env that `end` names (--at or --good), else this interpreter's version."""
    _version, spec = resolve_end(end, what)
    return spec.python if spec and spec.python else f"{sys.version_info.major}.{sys.version_info.minor}"


if __name__ == "__main__":
    sys.exit(main())
