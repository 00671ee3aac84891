"""What a bisect prints and keeps: every point it measured, the answer with its numbers and intervals, and what
changed underneath across the boundary: the versions, kernel ("underneath"), library and kernel-time split tables
harness.compare shows for that pair of builds. Also bisect.json (rewritten after every point) and the landscape
chart (harness.report.versions_chart). No torch import.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from tabulate import tabulate

from harness.analysis import series, stats
from harness.analysis.context import Compare
from harness.analysis.dataset import load
from harness.analysis.tables import registry
from harness.analysis.tables.fastest import split_table
from harness.bisect.search import Point, Result, delta_text
from harness.console.render import render_text
from harness.record.files import write_atomic
from harness.report import versions_chart


def record_paths(point: Point, records_dir: Path) -> list[Path]:
    return [records_dir / f"{r.run_id}.json" for r in point.group.records] if point.group else []


def points_table(result: Result) -> str:
    """Every candidate the search measured (and the ones that failed), oldest first."""
    rows = []
    for p in result.measured():
        if p.failed:
            rows.append([p.version, "not measured", "", "", p.failed[:70]])
            continue
        point, low, high = result.metric.value(p.group)
        scale = 1 / 2**20 if result.metric.name == "peak_memory" else 1.0
        bounds = f"{low * scale:,.0f}..{high * scale:,.0f}" if low is not None else "-"
        runs = f"{len(p.group.records)}" + (" contended" if p.group.contended else "")
        rows.append([p.version, f"{point * scale:,.0f}", bounds, runs, p.verdict or ""])
    unit = "MiB" if result.metric.name == "peak_memory" else result.metric.unit
    kind = f"{stats.CONFIDENCE:.0%} CI"
    return tabulate(rows, headers=["torch", f"{result.metric.name} ({unit})", kind, "runs", "verdict"],
                    tablefmt="simple", disable_numparse=True)


def answer_lines(result: Result) -> list[str]:
    """The answer in a few lines: the boundary, both numbers with intervals, its share of the whole change."""
    m, cands = result.metric, result.candidates
    a, b = result.points[cands[0].version], result.points[cands[-1].version]
    if result.outcome == "no difference":
        undecided = (" Undecided: the interval is still wider than the noise floor after the most runs allowed "
                     "(--max-repeats)." if result.undecided else "")
        return [(f"No boundary: torch {a.version} and {b.version} do not differ beyond noise in {m.label} "
                 f"({delta_text(result.total_delta)}).{undecided}")]
    if result.outcome == "blocked" and result.boundary is None:
        return [line for line in result.lines if line.startswith("end ")]
    if result.outcome == "landscape":
        return [f"Landscape of {m.label} over {len(result.measured())} torch build(s)."]
    if result.boundary is None:
        return ["Unfinished: the search was interrupted; the points above are kept."]
    lo, hi = (result.points[v] for v in result.boundary)
    lines = [f"Boundary: torch {lo.version} -> {hi.version} ({m.label}).",
             f"  {lo.version}: {m.text(lo.group)}",
             f"  {hi.version}: {m.text(hi.group)}",
             f"  {lo.version} -> {hi.version}: {delta_text(result.boundary_delta)}; the whole range {a.version} -> "
             f"{b.version}: {delta_text(result.total_delta)}"
             + (f"; this step carries {result.share:.0%} of it (log scale)" if result.share is not None else "")]
    between = [c.version for c in cands if cands.index(result.points[lo.version].candidate)
               < cands.index(c) < cands.index(result.points[hi.version].candidate)]
    if between:
        lines.append(f"  not narrower: {', '.join(between)} between them could not be measured (see above)")
    if result.spread:
        lines.append("  A midpoint was like neither end: the change is not one step. This is the step the search "
                     "narrowed to (at each split, the half whose ends differ more); --landscape shows every build.")
    if not result.boundary_delta.beyond:
        lines.append("  The two builds at the boundary do not differ beyond noise themselves: the change is spread "
                     "or small steps; no single release brought it.")
    if result.undecided:
        lines.append(f"  Undecided after the most runs allowed: torch {', '.join(result.undecided)} (a larger "
                     f"--max-repeats decides them, or says that no run count here can).")
    busy = [p.version for p in (lo, hi) if p.group.contended]
    if busy:
        lines.append(f"  Measured under contention (other processes used the CPUs): {', '.join(busy)}; rerun to confirm.")
    return lines


def underneath(result: Result, records_dir: Path, show_all: bool = False) -> str:
    """The tables harness.compare shows for the boundary pair: versions, kernels, libraries, kernel-time split."""
    if result.boundary is None:
        return ""
    lo, hi = (result.points[v] for v in result.boundary)
    ds = load([*record_paths(lo, records_dir), *record_paths(hi, records_dir)], warn=lambda line: None)
    if len(ds.groups) != 2:
        return "(what changed underneath: the two builds' records do not form two comparable groups)\n"
    base = next(g for g in ds.groups if g.env == lo.group.first.env).env if ds.groups else None
    cx = Compare(ds, baseline_env=base, show_all=show_all)
    first, second = sorted(ds.groups, key=lambda g: ds.env_order[g.env])
    tables = [*registry.build(cx, ["versions", "underneath", "libraries"]),
              split_table(f"Kernel-time split: torch {lo.version} (A) vs {hi.version} (B)", first, second)]
    return render_text(tables, [], [stats.rule_text(cx.floor)])


def write_state(result: Result, out: Path, command: str) -> Path:
    """bisect.json: the search so far (rewritten after every point, so an interrupted search says what it had)."""
    def delta(d):
        return None if d is None else d.to_dict()

    state = {
        "command": command, "updated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "mode": result.mode, "metric": result.metric.name, "outcome": result.outcome,
        "candidates": [c.version for c in result.candidates],
        "points": [{"torch": p.version, "env": p.candidate.env_name, "failed": p.failed, "verdict": p.verdict,
                    "value": result.metric.value(p.group)[0] if p.group else None,
                    "bounds": list(result.metric.value(p.group)[1:]) if p.group else None,
                    "runs": [r.run_id for r in p.group.records] if p.group else [],
                    "contended": bool(p.group and p.group.contended),
                    "against": [{"torch": v, **d.to_dict()} for v, d in p.against]} for p in result.measured()],
        "boundary": list(result.boundary) if result.boundary else None,
        "boundary_delta": delta(result.boundary_delta), "total_delta": delta(result.total_delta),
        "share": result.share, "spread": result.spread, "undecided": result.undecided, "lines": result.lines,
    }
    path = out / f"{result.mode}-{result.metric.name}.json"
    return write_atomic(path, json.dumps(state, indent=1) + "\n")


def landscape_chart(result: Result, out: Path, rung: str) -> Path | None:
    """The metric against the version for the measured candidates (harness.report.versions_chart.draw)."""
    groups = [p.group for p in result.measured() if p.group is not None]
    if len(groups) < 2:
        return None
    g = groups[0]
    title = (f"{rung} ({g.batch}, preset {g.workload.preset}) on {g.gpu}: "
             f"{len(groups)} torch builds")
    name = f"landscape-{rung}.png" if result.mode == "landscape" else f"bisect-{rung}-{result.metric.name}.png"
    path = out / name
    write_atomic(path, versions_chart.draw(series.version_points(groups), title, boundary=result.boundary))
    return path
