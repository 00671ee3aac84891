"""Compare run records: `python -m harness.compare results/ [--format text|markdown|csv|json]`.

The command line only: it parses the options (those shared with harness.report are defined once, in common_parser),
then calls harness.analysis (loading, grouping by the one comparability rule, the table builders) and harness.render
(text, markdown, CSV, JSON). Significance: harness.analysis.stats (one rule, printed in the footer). No torch import: this
runs on a laptop that has only the results.
"""

from __future__ import annotations

import argparse
import sys

from harness.analysis import stats
from harness.analysis.context import DEFAULT_LOSS_TOL, TABLES, Compare
from harness.analysis.dataset import Dataset, Filters, load
from harness.analysis.tables.underneath import TOP_UNDERNEATH
from harness.output import OutputError, emit, fail
from harness.render import header_lines, render_csv, render_json, render_text
from harness.textsafe import terminal

FORMATS = ("text", "markdown", "csv", "json")


def parser() -> argparse.ArgumentParser:
    p = common_parser("python -m harness.compare", __doc__.split("\n\n")[0])
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("--table", action="append", default=[], choices=TABLES, help="only this table (repeatable; default all)")
    return p


def common_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """Options shared by harness.compare and harness.report."""
    p = argparse.ArgumentParser(prog=prog, description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=stats.rule_text())
    p.add_argument("paths", nargs="+", metavar="PATH", help="record files or directories (searched recursively)")
    p.add_argument("--baseline-env", metavar="ENV", help="env every other env is compared with (default: the oldest torch)")
    p.add_argument("--baseline-gpu", metavar="GPU", help="GPU (name or unique part of it) every other GPU is compared with "
                   "(default: lowest compute capability)")
    p.add_argument("--env", action="append", default=[], metavar="ENV", help="only this env (repeatable); reference "
                   "records are kept beside it (they are not an env; --env reference for them alone)")
    p.add_argument("--gpu", action="append", default=[], metavar="GPU", help="only GPUs whose name contains this (repeatable)")
    p.add_argument("--plan", action="append", default=[], metavar="PLAN", help="only this plan (repeatable)")
    p.add_argument("--rung", action="append", default=[], metavar="RUNG", help="only this rung (repeatable)")
    p.add_argument("--noise-floor", type=float, default=stats.NOISE_FLOOR, metavar="FRACTION",
                   help=f"smallest relative delta called beyond noise (default {stats.NOISE_FLOOR})")
    p.add_argument("--loss-tol", type=float, default=DEFAULT_LOSS_TOL, metavar="FRACTION",
                   help=f"relative loss difference flagged as drift (default {DEFAULT_LOSS_TOL})")
    p.add_argument("--boot", type=int, default=stats.N_BOOT, metavar="N", help=f"bootstrap resamples (default {stats.N_BOOT})")
    p.add_argument("--all", action="store_true", help=f"what changed underneath: every kernel change, not the {TOP_UNDERNEATH} "
                   "largest per pair")
    return p


def resolve_baselines(p: argparse.ArgumentParser, args, ds: Dataset) -> tuple[str | None, str | None]:
    env = gpu = None
    if args.baseline_env:
        envs = ds.envs()
        matches = [e for e in envs if e == args.baseline_env] or [e for e in envs if e.split("@")[0] == args.baseline_env]
        if len(matches) != 1:
            p.error(f"--baseline-env {args.baseline_env}: {'ambiguous' if matches else 'no such env'} (envs here: {', '.join(envs) or 'none'})")
        env = matches[0]
    if args.baseline_gpu:
        gpus = ds.gpus()
        matches = [g for g in gpus if g == args.baseline_gpu] or [g for g in gpus if args.baseline_gpu.lower() in g.lower()]
        if len(matches) != 1:
            p.error(f"--baseline-gpu {args.baseline_gpu}: {'matches ' + ', '.join(matches) if matches else 'no such GPU'} (GPUs here: {', '.join(gpus) or 'none'})")
        gpu = matches[0]
    return env, gpu


def analyse(args, p: argparse.ArgumentParser, warn) -> tuple[Dataset, Compare]:
    """Shared by harness.compare and harness.report: load, check options, build the comparison."""
    if not 0 <= args.noise_floor < 1:
        p.error("--noise-floor must be in [0, 1)")
    if args.loss_tol <= 0:
        p.error("--loss-tol must be positive")
    if not stats.MIN_BOOT <= args.boot <= stats.MAX_BOOT:
        p.error(f"--boot {args.boot}: must be from {stats.MIN_BOOT} to {stats.MAX_BOOT:,}")
    filters = Filters(args.env, args.gpu, args.plan, args.rung)
    ds = load(args.paths, warn, filters, n_boot=args.boot)
    if not ds.valid_records:
        print(f"error: no valid record found under {', '.join(args.paths)}", file=sys.stderr)
        sys.exit(1)
    # References pass --env (Filters): an --env that matches no record still leaves nothing to compare.
    if not (ds.groups or ds.references or ds.peers or ds.failed or ds.left_out) or (args.env and not ds.kept_envs & set(args.env)):
        print(f"error: {ds.valid_records} valid record(s), but none matches the filters", file=sys.stderr)
        sys.exit(1)
    env, gpu = resolve_baselines(p, args, ds)
    return ds, Compare(ds, env, gpu, args.noise_floor, args.loss_tol, show_all=args.all)


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(argv)
    warnings: list[str] = []

    def warn(line: str) -> None:
        warnings.append(line)
        print(terminal(line), file=sys.stderr)

    ds, cmp = analyse(args, p, warn)
    tables = cmp.tables(args.table or TABLES)
    footer = cmp.footer()
    if args.format == "json":
        out = render_json(tables, ds, footer, warnings)
    elif args.format == "csv":
        out = render_csv(tables)
    else:
        out = render_text(tables, header_lines(ds, args.paths), footer, markdown=args.format == "markdown")
    try:
        emit(terminal(out))  # a record's strings reach no terminal as escape sequences (harness.textsafe)
    except OutputError as exc:
        return fail(f"python -m harness.compare: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
