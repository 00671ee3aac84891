"""The steps of a torch landscape, judged by harness.compare's rule: each build against the one before it.

    python scripts/landscape_steps.py results/cpu-bisect-2t/records
    python scripts/landscape_steps.py results/cpu-bisect-2t/records --against results/cpu-bisect/records

One folder of one rung's records under several torch builds (a bisect's or a landscape's records/), one device: the
builds' cells with the run-to-run spread pooled over all of them (the rule compare applies to a folder), then each
build against the one before it, and the whole range. With --against, a second folder of the same builds on another
device (another thread count, another CPU): each step on the first device over the same step on the second, with its
interval from the two steps' log forms: is a step a property of the build, or of where it ran? Contended and failed
runs count nowhere, as in compare. No torch import.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

from harness import argtypes
from harness.analysis import noise, stats
from harness.analysis.dataset import torch_version_key
from harness.analysis.group import Group
from harness.bisect.search import METRICS, Metric, delta_text, group_of
from harness.record.io import iter_records
from harness.record.view import RecordView


def builds(folder: Path) -> dict[str, Group]:
    """torch release -> its cell (ok, uncontended runs), with the spread pooled over the folder's cells."""
    runs: dict[str, list[dict]] = {}
    for _path, record in iter_records([folder], warn=lambda line: None):
        v = RecordView(record)
        if v.ok and not v.contended and v.torch_version:
            runs.setdefault(v.torch_version.split("+", 1)[0], []).append(record)
    devices = {RecordView(rs[0]).device_label for rs in runs.values()}
    if len(devices) > 1:
        raise SystemExit(f"error: {folder} holds runs of {len(devices)} devices ({', '.join(sorted(devices))}): one a folder")
    cells = {b: group_of(rs) for b, rs in sorted(runs.items(), key=lambda kv: torch_version_key(kv[0]))}
    noise.by_device(list(cells.values()), [])
    return cells


def step_of_steps(metric: Metric, first: dict[str, Group], second: dict[str, Group], a: str, b: str) -> str:
    """b/a on the second device, then (b/a on the first) / (b/a on the second) - 1 with its interval from the two steps'
    log forms and its verdict."""
    d1, form1 = stats.ratio(metric.estimate(first[a]), metric.estimate(first[b]))
    d2, form2 = stats.ratio(metric.estimate(second[a]), metric.estimate(second[b]))
    if d1.value is None or d2.value is None or form1 is None or form2 is None:
        return "n/a (a side has no noise estimate)"
    d = stats.difference(form1, form2)
    return f"there {delta_text(d2)}; here/there {delta_text(d)}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("records", type=argtypes.path_arg, help="a landscape's records folder (one device)")
    p.add_argument("--against", type=argtypes.path_arg, help="the same builds' records on another device")
    p.add_argument("--metric", choices=sorted(METRICS), default="tokens_per_s")
    p.add_argument("--pair", action="append", default=[], metavar="A:B", help="also judge build B against build A "
                   "(e.g. 2.9.1:2.15.0); repeatable")
    args = p.parse_args(argv)
    for folder in filter(None, (args.records, args.against)):
        if not folder.is_dir():
            p.error(f"{folder}: no such folder")
    metric = METRICS[args.metric]
    cells = builds(args.records)
    if len(cells) < 2:
        p.error(f"{args.records}: {len(cells)} build(s) with ok runs; a landscape needs 2 or more")
    other = builds(args.against) if args.against else {}
    order = list(cells)
    pairs = [tuple(x.split(":", 1)) for x in args.pair]
    unknown = sorted({v for pair in pairs for v in pair if v not in cells} | {x for x in args.pair if ":" not in x})
    if unknown:
        p.error(f"--pair: {', '.join(unknown)}: not a build of {args.records} (builds: {', '.join(order)}), or no A:B")
    print(f"here: {args.records}, {len(order)} builds on {next(iter(cells.values())).gpu}")
    if other:
        print(f"there: {args.against}, {len(other)} builds on {next(iter(other.values())).gpu}\n"
              "each step here; under it the same step there, and here/there (the ratio of the two steps)")
    for a, b in [*itertools.pairwise(order), (order[0], order[-1]), *pairs]:
        print(f"{a:>7} -> {b:<7} {delta_text(metric.delta(cells[a], cells[b]))}")
        if a in other and b in other:
            print(f"{'':17} {step_of_steps(metric, cells, other, a, b)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
