"""The technical report, generated from records: `python -m harness.report results/ -o report/`.

Writes DIR/report.md (charts as PNG files beside it), DIR/report.html (one self-contained page, charts
embedded as base64) and the PNGs. Every finding is computed from the same tables harness.compare
prints; a chart with no data is not drawn and the text says so. No torch import.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.argtypes import path_text
from harness.cli.compare_options import analyse_or_exit, compare_parser, said
from harness.console.output import OutputError, emit, fail, run_process
from harness.console.textsafe import terminal
from harness.report import chart_cache, document, drawing, outline


def make_parser():
    p = compare_parser("python -m harness.report", __doc__.split("\n\n")[0])
    p.add_argument("-o", "--out", required=True, metavar="DIR", type=path_text, help="directory for report.md, report.html and the PNGs")
    return p


def _say(line: str) -> None:
    print(said(line), file=sys.stderr)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = make_parser()
    args = p.parse_args(argv)
    kept = None if args.no_index else chart_cache.ChartCache.beside_index(args.paths, args.index, _say)
    # the chart workers are forked now, before the records are read: they stay small, and import the drawing code
    # while the records are read
    with drawing.Drawings(kept=kept, preload=outline.CHART_MODULES) as drawn:
        _ds, cmp = analyse_or_exit(p, args, _say)
        doc = outline.build(cmp, args.paths, "python -m harness.report " + " ".join(argv), drawn)
    try:
        emit("".join(f"{terminal(path)}\n" for path in document.write(doc, Path(args.out))))
    except OutputError as exc:
        return fail(f"python -m harness.report: {exc}")
    return 0


if __name__ == "__main__":
    run_process("python -m harness.report", main)  # Ctrl-C or SIGTERM: one line, exit 130/143, no half-written file
