"""The options harness.compare and harness.report share, defined once, what they become (CompareOptions,
harness.analysis.options), and the edge both load the records through: a bad option is argparse's usage error,
nothing to compare one line. No torch import.
"""

from __future__ import annotations

import argparse
import sys

from harness import argtypes
from harness.analysis import stats
from harness.analysis.context import DEFAULT_LOSS_TOL, Compare
from harness.analysis.dataset import Dataset
from harness.analysis.options import CompareOptions, NothingToCompare, UsageError, analyse
from harness.analysis.tables.underneath import TOP_UNDERNEATH
from harness.console.output import hold
from harness.console.textsafe import TEXT, bounded, terminal


def compare_parser(prog: str, description: str) -> argparse.ArgumentParser:
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
