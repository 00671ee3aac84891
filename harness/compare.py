"""Compare run records: `python -m harness.compare results/` prints the verdict (which build or device is faster or
leaner, by how much, how sure, what changed underneath) in one screen; --table NAME or --detail for the tables.

The command line only: it parses the options (those shared with harness.report: harness.cli.compare_options),
then calls harness.analysis (loading, grouping by the one comparability rule, the table builders) and harness.console's
render, verdict_text and csv_json (text, markdown, CSV, JSON). Significance: harness.analysis.stats (one rule, printed in the footer). No torch import: this
runs on a laptop that has only the results.
"""

from __future__ import annotations

import argparse
import sys

from harness import argtypes
from harness.analysis.export import export_parquet
from harness.analysis.tables import registry
from harness.analysis.tables.registry import TABLES
from harness.analysis.verdict import verdict
from harness.cli.compare_options import analyse_or_exit, compare_parser, said
from harness.console.csv_json import render_csv, render_json
from harness.console.output import OutputError, emit, fail, run_process
from harness.console.render import header_lines, more_lines, render_text
from harness.console.textsafe import markdown, terminal
from harness.console.verdict_text import verdict_lines

FORMATS = ("text", "markdown", "csv", "json")


def make_parser() -> argparse.ArgumentParser:
    p = compare_parser("python -m harness.compare", __doc__.split("\n\n")[0])
    p.add_argument("--format", choices=FORMATS, default="text",
                   help="text for a terminal (default), markdown, csv (numbers as numbers, units in the column names), json")
    p.add_argument("--table", action="append", default=[], choices=list(TABLES), metavar="NAME",
                   help=f"this table instead of the verdict (repeatable): {', '.join(TABLES)}")
    p.add_argument("--detail", action="store_true", help="the verdict and then every table (csv and json: every table "
                   "unless --table)")
    p.add_argument("--export-parquet", metavar="DIR", type=argtypes.path_arg, help="write the runs compared and their timed steps "
                   "as DIR/runs.parquet and DIR/steps.parquet (for Spark, Trino, DuckDB: docs/cluster.md) instead")
    return p


def main(argv=None) -> int:
    p = make_parser()
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
