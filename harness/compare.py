"""Compare run records: `python -m harness.compare results/` prints the verdict (which build or device is faster or
leaner, by how much, how sure, what changed underneath) in one screen; --table NAME or --detail for the tables.

The command line only: it parses the options (those shared with harness.report are defined once, in common_parser),
then calls harness.analysis (loading, grouping by the one comparability rule, the table builders) and harness.console.render
(text, markdown, CSV, JSON). Significance: harness.analysis.stats (one rule, printed in the footer). No torch import: this
runs on a laptop that has only the results.
"""

from __future__ import annotations

import argparse
import sys

from harness import argtypes
from harness.analysis import stats
from harness.analysis.context import DEFAULT_LOSS_TOL, Compare
from harness.analysis.dataset import Dataset
from harness.analysis.export import export_parquet
from harness.analysis.options import CompareOptions, NothingToCompare, UsageError, analyse
from harness.analysis.tables import registry
from harness.analysis.tables.registry import TABLES
from harness.analysis.tables.underneath import TOP_UNDERNEATH
from harness.analysis.verdict import verdict
from harness.console.output import OutputError, emit, fail, hold, run_process
from harness.console.render import header_lines, more_lines, render_csv, render_json, render_text, verdict_lines
from harness.console.textsafe import TEXT, bounded, markdown, terminal

FORMATS = ("text", "markdown", "csv", "json")


def parser() -> argparse.ArgumentParser:
    p = common_parser("python -m harness.compare", __doc__.split("\n\n")[0])
    p.add_argument("--format", choices=FORMATS, default="text",
                   help="text for a terminal (default), markdown, csv (numbers as numbers, units in the column names), json")
    p.add_argument("--table", action="append", default=[], choices=list(TABLES), metavar="NAME",
                   help=f"this table instead of the verdict (repeatable): {', '.join(TABLES)}")
    p.add_argument("--detail", action="store_true", help="the verdict and then every table (csv and json: every table "
                   "unless --table)")
    p.add_argument("--export-parquet", metavar="DIR", type=argtypes.path_arg, help="write the runs compared and their timed steps "
                   "as DIR/runs.parquet and DIR/steps.parquet (for Spark, Trino, DuckDB: docs/cluster.md) instead")
    return p


def common_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """Options shared by harness.compare and harness.report."""
    p = argparse.ArgumentParser(prog=prog, description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=stats.rule_text())
    p.add_argument("paths", nargs="+", metavar="PATH", type=argtypes.path_text, help="record files or directories (searched recursively)")
    p.add_argument("--baseline-env", metavar="ENV", help="env every other env is compared with (default: the oldest torch)")
    p.add_argument("--baseline-gpu", metavar="GPU", help="GPU (name or unique part of it) every other GPU is compared with "
                   "(default: lowest compute capability)")
    p.add_argument("--env", action="append", default=[], metavar="ENV", help="only this env (repeatable); reference "
                   "records are kept beside it (they are not an env; --env reference for them alone)")
    p.add_argument("--gpu", action="append", default=[], metavar="GPU", help="only GPUs whose name contains this (repeatable)")
    p.add_argument("--plan", action="append", default=[], metavar="PLAN", help="only this plan (repeatable)")
    p.add_argument("--rung", action="append", default=[], metavar="RUNG", help="only this rung (repeatable)")
    p.add_argument("--noise-floor", type=argtypes.fraction, default=stats.NOISE_FLOOR, metavar="FRACTION",
                   help=f"smallest relative delta called beyond noise (default {stats.NOISE_FLOOR})")
    p.add_argument("--loss-tol", type=argtypes.tolerance, default=DEFAULT_LOSS_TOL, metavar="FRACTION",
                   help=f"relative loss difference flagged as drift (default {DEFAULT_LOSS_TOL})")
    p.add_argument("--all", action="store_true", help=f"what changed underneath: every kernel change, not the {TOP_UNDERNEATH} "
                   "largest per pair")
    p.add_argument("--include-contended", action="store_true", help="put the runs timed under contention back into "
                   "the deltas, marked (by default they are left out and listed with their rerun command)")
    p.add_argument("--index", metavar="DIR", type=argtypes.path_text, help="keep the record indexes in DIR (default: FOLDER/.harness-index/ "
                   "beside each folder's records; a folder you may delete)")
    p.add_argument("--no-index", action="store_true", help="read every record file directly, without the index")
    return p


def options_from(args: argparse.Namespace) -> CompareOptions:
    """The parsed shared options as keyword arguments of the comparison (harness.analysis.options)."""
    return CompareOptions(tuple(args.paths), args.baseline_env, args.baseline_gpu, tuple(args.env), tuple(args.gpu),
                          tuple(args.plan), tuple(args.rung), args.noise_floor, args.loss_tol, args.all,
                          args.include_contended, use_index=not args.no_index, index=args.index)


def said(line) -> str:
    """A line for the terminal that may quote a record (a warning, a notice, an error naming envs and devices): at
    most TEXT characters (harness.console.textsafe.bounded; its words kept whole: a file's path is what finds it), no control
    character sent."""
    return terminal(bounded(line, TEXT))


def analyse_or_exit(p: argparse.ArgumentParser, args: argparse.Namespace, warn) -> tuple[Dataset, Compare]:
    """analyse at the edge: a bad option is the parser's usage error (exit 2), nothing to compare one line (exit 1).
    The comparison is held until the process ends (harness.console.output.hold)."""
    try:
        ds, cmp = analyse(options_from(args), warn, notice=lambda line: print(said(line), file=sys.stderr))
        hold(ds, cmp)
        return ds, cmp
    except UsageError as exc:
        p.error(said(exc))  # it may name envs and devices the records hold
    except NothingToCompare as exc:
        print(said(f"error: {exc}"), file=sys.stderr)
        sys.exit(1)


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(argv)
    warnings: list[str] = []

    def warn(line: str) -> None:
        warnings.append(line)  # exact in --format json's "warnings"
        print(said(line), file=sys.stderr)

    ds, cmp = analyse_or_exit(p, args, warn)
    if args.export_parquet:
        try:
            emit("".join(f"{terminal(path)}\n" for path in export_parquet(ds, args.export_parquet)))
            return 0
        except OSError as exc:
            return fail(f"python -m harness.compare: --export-parquet {args.export_parquet}: {exc.strerror or exc}")
        except OutputError as exc:
            return fail(f"python -m harness.compare: {exc}")
    names = args.table or list(TABLES)
    if args.format in ("csv", "json"):
        tables = registry.build(cmp, names)
        out = render_csv(tables) if args.format == "csv" else render_json(tables, ds, cmp.footer(), warnings, verdict(cmp))
    elif args.table:
        out = render_text(registry.build(cmp, names), header_lines(ds, args.paths), cmp.footer(),
                          markdown=args.format == "markdown")
    else:
        lines = header_lines(ds, args.paths, legend=False) + [""] + \
            verdict_lines(verdict(cmp), cmp.name, cmp.word, ds.env_versions) + more_lines(TABLES)
        if args.format == "markdown":  # a record's text adds no HTML, link or image, even if it closes the fence
            out = "```\n" + "\n".join(map(markdown, lines)) + "\n```\n"
        else:
            out = "\n".join(lines) + "\n"
        if args.detail:
            out += "\n" + render_text(registry.build(cmp, names), [], cmp.footer(), markdown=args.format == "markdown")
    try:
        emit(terminal(out))  # a record's strings reach no terminal as escape sequences (harness.console.textsafe)
    except OutputError as exc:
        return fail(f"python -m harness.compare: {exc}")
    return 0


if __name__ == "__main__":
    run_process("python -m harness.compare", main)  # Ctrl-C or SIGTERM: one line, exit 130/143, no half-written file
