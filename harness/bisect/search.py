"""The search itself, given a way to measure one candidate: the ends first, then midpoints, each classified by
harness.analysis's comparison rule (stats: the interval from the run-to-run spread, pooled over the builds measured so
far, for tokens/s and per-run counters alike); or, for the landscape, every candidate. No installs, no torch: `measure(candidate)` returns its records (or raises
CandidateFailed), so the tests drive it with stand-in measurements.

Classification of a midpoint M between the current ends L and H (both measured):
  like L      M vs L within noise, M vs H beyond noise: the change is after M
  like H      M vs H within noise, M vs L beyond noise: the change is at or before M
  like neither  beyond noise from both (between them: a change spread over releases; outside: not monotone), or within
              noise of both (noise: cannot tell). Said plainly; the search goes on into the half whose ends differ more,
              so it still ends at the largest step it can find, and says what share of the whole change that step is.
The search stops at two adjacent candidates (a failed candidate between them is stepped around and named).

Until decided (--repeats auto): a comparison within noise whose interval is still wider than the change it must tell
apart (half the whole A -> B change for a midpoint, the noise floor for the ends) adds one run to the side with fewer
runs, until it is decided or both sides have max_runs; then it says "undecided after N runs" and names the builds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.analysis import cell_values, noise, stats
from harness.analysis.cells import Cell
from harness.analysis.group import Group
from harness.bisect.candidates import Candidate
from harness.record.view import RecordView


class CandidateFailed(Exception):
    """A candidate that could not be measured (install failed, every run failed): recorded, stepped around."""


# --------------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str
    higher_is_better: bool

    def values(self, g: Group) -> list[float]:
        """Per-run values of a counter metric (memory, first step)."""
        if self.name == "peak_memory":
            return [float(v) for v in g.memory[1]]
        if self.name == "first_step_ms":
            return [float(v) for v in (r.first_step_ms for r in g.records)
                    if isinstance(v, (int, float))]
        raise ValueError(self.name)

    def estimate(self, g: Group) -> stats.Estimate:
        """The group's value with its uncertainty, by harness.compare's rule for this kind of number."""
        if self.name == "tokens_per_s":
            return g.throughput
        if self.name == "peak_memory":
            return g.memory_estimate
        return cell_values.memory(self.values(g))  # its own runs' spread: no device's

    def value(self, g: Group) -> tuple[float | None, float | None, float | None]:
        """(point, low, high): the value with its interval (low, high None without a noise estimate)."""
        est = self.estimate(g)
        bounds = est.bounds()
        return (est.point, None, None) if bounds is None else (est.point, *bounds)

    def delta(self, a: Group, b: Group, floor: float = stats.NOISE_FLOOR) -> stats.Delta:
        """b relative to a, by the rule harness.compare uses for this kind of number."""
        return stats.ratio(self.estimate(a), self.estimate(b), floor)[0]

    def text(self, g: Group) -> str:
        point, low, high = self.value(g)
        if point is None:
            return "n/a"
        scale, fmt = (1 / 2**20, "{:,.0f}") if self.name == "peak_memory" else (1.0, "{:,.0f}")
        unit = " MiB" if self.name == "peak_memory" else f" {self.unit}"
        bounds = "" if low is None else f" ({stats.CONFIDENCE:.0%} CI {fmt.format(low * scale)}..{fmt.format(high * scale)})"
        return fmt.format(point * scale) + unit + bounds


METRICS = {
    "tokens_per_s": Metric("tokens_per_s", "tokens/s", "tokens/s", True),
    "peak_memory": Metric("peak_memory", "peak memory (peak RSS on a CPU, peak allocated on a GPU)", "bytes", False),
    "first_step_ms": Metric("first_step_ms", "first step (compilation included)", "ms", False),
}


def group_of(records: list[dict]) -> Group:
    """The records of one candidate as one comparable group (the measurer gives only comparable, ok records); each
    run's invocation as harness.compare reads it (its record's, else the build's env: one venv a build)."""
    views = list(map(RecordView.of, records))
    first = views[0]
    return Group("measured", first.workload_hash, first.flags_hash, first.env, first.device_label, records=views,
                 invocations=[v.invocation or ("build", v.env) for v in views])


def calibration_runs(paths, include_contended: bool = False) -> list[tuple[RecordView, object]]:
    """harness.calibrate's ok runs under paths (its records: plan CALIBRATION_PLAN), with their invocations, for
    Search(calibration=...): the device's A/A spread, read as harness.compare reads it (dataset.load's)."""
    from harness.analysis.dataset import load

    folders = [p for p in paths if Path(p).is_dir()]
    return load(folders, warn=lambda line: None, include_contended=include_contended).calibration if folders else []


# --------------------------------------------------------------------------- the search


@dataclass
class Point:
    """One candidate as the search saw it."""

    candidate: Candidate
    group: Group | None = None
    failed: str | None = None  # why it could not be measured
    verdict: str | None = None  # "end A", "end B", "like A", "like B", "like neither: ..."
    against: list[tuple[str, stats.Delta]] = field(default_factory=list)  # (other version, delta of this vs it)
    order: int = 0  # when it was measured (0: not measured)

    @property
    def version(self) -> str:
        return self.candidate.version


@dataclass
class Result:
    metric: Metric
    candidates: list[Candidate]
    points: dict[str, Point]
    mode: str  # "bisect" or "landscape"
    outcome: str = "unfinished"  # "no difference", "boundary", "blocked", "landscape", "unfinished"
    lines: list[str] = field(default_factory=list)  # what the search said, in order
    boundary: tuple[str, str] | None = None
    boundary_delta: stats.Delta | None = None
    total_delta: stats.Delta | None = None
    share: float | None = None  # of the whole A -> B change (log scale) that the boundary step carries
    spread: bool = False  # a midpoint was like neither end
    undecided: list[str] = field(default_factory=list)  # builds whose comparisons stayed undecided at max_runs

    def measured(self) -> list[Point]:
        return sorted((p for p in self.points.values() if p.order), key=lambda p: p.candidate.key)


def _log_ratio(metric: Metric, a: Group, b: Group) -> float:
    va, vb = metric.value(a)[0], metric.value(b)[0]
    return abs(math.log(vb / va)) if va and vb and va > 0 and vb > 0 else 0.0


class Search:
    """One bisect or landscape over `candidates` (ordered good end first), measuring through `measure`."""

    def __init__(self, candidates: list[Candidate], metric: Metric, measure: Callable[..., list[dict]],
                 floor: float = stats.NOISE_FLOOR, say: Callable[[str], None] = print, mode: str = "bisect",
                 on_point: Callable[[Result], None] | None = None, max_runs: int = 0,
                 calibration: list | None = None):
        """measure(candidate) -> its records; with max_runs (--repeats auto), measure(candidate, n) -> at least n.
        calibration: (RecordView, invocation) of harness.calibrate's runs (calibration_runs), pooled into the
        device's spread as harness.compare pools them."""
        self.metric, self.measure, self.floor, self.say = metric, measure, floor, say
        self.calibration = calibration or []
        self.max_runs = max_runs
        self.on_point = on_point or (lambda result: None)
        self.result = Result(metric, candidates, {c.version: Point(c) for c in candidates}, mode)
        self._count = 0

    def _say(self, line: str) -> None:
        self.result.lines.append(line)
        self.say(line)

    def _measure(self, c: Candidate) -> Point:
        point = self.result.points[c.version]
        if point.group is not None or point.failed:
            return point
        try:
            records = self.measure(c)
            if not records:
                raise CandidateFailed("no run finished ok")
            point.group = group_of(records)
            if self.metric.value(point.group)[0] is None:
                raise CandidateFailed(f"its records have no {self.metric.label}")
        except CandidateFailed as exc:
            point.group, point.failed = None, str(exc)
        self._count += 1
        point.order = self._count
        self._pool_noise()
        self.on_point(self.result)
        return point

    def _pool_noise(self) -> None:
        """Every measured build's group made afresh with the run-to-run spread pooled over all of them and the
        device's calibration runs (the rule harness.compare uses over a folder), so no estimate rests on one build's
        runs alone."""
        measured = [p for p in self.result.points.values() if p.group is not None]
        for p in measured:
            p.group = group_of(p.group.records)
        noise.by_device([p.group for p in measured], self.calibration)

    def _vs(self, p: Point, other: Point, scale: float | None = None) -> stats.Delta:
        """p against other; until decided, when max_runs allows: more runs of the side with fewer."""
        d = self.metric.delta(other.group, p.group, self.floor)
        while self.max_runs and not self._decided(d, scale):
            grown = self._grow(p, other)
            if grown is None:
                for v in (other.version, p.version):
                    if v not in self.result.undecided:
                        self.result.undecided.append(v)
                self._say(f"  torch {other.version} vs {p.version}: undecided after {len(other.group.records)} + "
                          f"{len(p.group.records)} runs ({delta_text(d)}); --max-repeats to allow more")
                break
            d = self.metric.delta(other.group, p.group, self.floor)
        p.against.append((other.version, d))
        return d

    def _decided(self, d: stats.Delta, scale: float | None) -> bool:
        """Beyond noise, or within noise with an interval narrow enough to rule out a change of `scale` (at least
        the floor): a comparison that needs no more runs."""
        if d.value is None or d.beyond:
            return True
        if d.verdict != stats.WITHIN:  # no noise estimate yet: one run a side with none known
            return False
        return d.detectable is not None and d.detectable <= max(scale or 0.0, self.floor)

    def _grow(self, p: Point, other: Point) -> Point | None:
        """One more run of whichever side has fewer (below max_runs); None when both have max_runs."""
        for side in sorted((p, other), key=lambda x: len(x.group.records)):
            n = len(side.group.records)
            if n < self.max_runs:
                side.group = group_of(self.measure(side.candidate, n + 1))
                self._pool_noise()
                self._say(f"  torch {side.version}: run {n + 1} (undecided), {self.metric.text(side.group)}")
                self.on_point(self.result)
                return side
        return None

    def point_line(self, p: Point) -> str:
        if p.failed:
            around = "" if (p.verdict or "").startswith("end") else "; stepped around"
            return f"  torch {p.version}: not measured ({p.failed}){around}"
        busy = " [contended]" if p.group.contended else ""
        return f"  torch {p.version}: {self.metric.text(p.group)}, {len(p.group.records)} run(s){busy}"

    # ------------------------------------------------------------------ bisect
    def bisect(self) -> Result:
        r, cands = self.result, self.result.candidates
        if not self._ends_differ():
            return r
        lo, hi = 0, len(cands) - 1
        while True:
            inside = [i for i in range(lo + 1, hi) if not r.points[cands[i].version].failed]
            if not inside:
                break
            middle = (lo + hi) / 2
            i = min(inside, key=lambda j: (abs(j - middle), j))
            m = self._measure(cands[i])
            if m.failed:
                self._say(self.point_line(m))
                continue
            lo, hi = self._judge_middle(m, i, lo, hi)
        self._conclude(lo, hi)
        return r

    def _ends_differ(self) -> bool:
        """Measure both ends; False (the outcome said) when one cannot be measured or they do not differ."""
        r, cands = self.result, self.result.candidates
        a, b = self._measure(cands[0]), self._measure(cands[-1])
        a.verdict, b.verdict = "end A", "end B"
        for end, name in ((a, "A"), (b, "B")):
            self._say(self.point_line(end))
            if end.failed:
                r.outcome = "blocked"
                self._say(f"end {name} (torch {end.version}) could not be measured: {end.failed}; nothing to bisect")
                return False
        r.total_delta = self._vs(b, a, self.floor)
        if not r.total_delta.beyond:
            r.outcome = "no difference"
            self._say(f"torch {a.version} and {b.version} do not differ beyond noise in {self.metric.label}: "
                      f"{delta_text(r.total_delta)}; nothing else installed")
            return False
        self._say(f"A -> B: {delta_text(r.total_delta)}; {len(cands) - 2} candidate(s) between")
        return True

    def _judge_middle(self, m: Point, i: int, lo: int, hi: int) -> tuple[int, int]:
        """The measured point between lo and hi against both: like A, like B, or like neither (the change is spread,
        or not monotone: go on where the ends differ more). Its verdict is written once; the new (lo, hi)."""
        r, cands = self.result, self.result.candidates
        low_end, high_end = r.points[cands[lo].version], r.points[cands[hi].version]
        half = abs(math.expm1(_log_ratio(self.metric, low_end.group, high_end.group) / 2))  # the change to tell apart
        d_lo, d_hi = self._vs(m, low_end, half), self._vs(m, high_end, half)
        like_lo, like_hi = not d_lo.beyond, not d_hi.beyond
        if like_lo != like_hi:
            m.verdict = "like A" if like_lo else "like B"
            lo, hi = (i, hi) if like_lo else (lo, i)
        else:
            r.spread = True
            if like_lo:
                why = "within noise of both ends (noise, or a step too small to see here)"
            elif (d_lo.value or 0) * (d_hi.value or 0) < 0:
                why = "between the ends, beyond noise from both: the change is spread over releases"
            else:
                why = "beyond noise from both ends on the same side: not monotone"
            left = _log_ratio(self.metric, low_end.group, m.group)
            right = _log_ratio(self.metric, m.group, high_end.group)
            if left >= right:
                hi = i
                why += f"; going on in {low_end.version}..{m.version}, where the ends differ more"
            else:
                lo = i
                why += f"; going on in {m.version}..{high_end.version}, where the ends differ more"
            m.verdict = f"like neither: {why}"
        self._say(f"{self.point_line(m)}: {m.verdict} (vs {low_end.version}: {delta_text(d_lo)}; "
                  f"vs {high_end.version}: {delta_text(d_hi)})")
        return lo, hi

    def _conclude(self, lo: int, hi: int) -> None:
        """The boundary (lo, hi), its delta and its share of the whole change; blocked where candidates are left."""
        r, cands = self.result, self.result.candidates
        lo_p, hi_p = r.points[cands[lo].version], r.points[cands[hi].version]
        r.boundary = (lo_p.version, hi_p.version)
        r.boundary_delta = self.metric.delta(lo_p.group, hi_p.group, self.floor)
        total = _log_ratio(self.metric, r.points[cands[0].version].group, r.points[cands[-1].version].group)
        r.share = _log_ratio(self.metric, lo_p.group, hi_p.group) / total if total else None
        skipped = [cands[i].version for i in range(lo + 1, hi)]
        r.outcome = "blocked" if skipped else "boundary"
        self.on_point(r)

    # ------------------------------------------------------------------ landscape
    def landscape(self) -> Result:
        r, previous, first = self.result, None, None
        for c in r.candidates:
            p = self._measure(c)
            if not p.failed:
                if first is None:
                    first = p
                else:
                    self._vs(p, first)
                if previous is not None and previous is not first:
                    self._vs(p, previous)
                previous = p
            self._say(self.point_line(p) + "".join(f"; vs {v}: {delta_text(d)}" for v, d in p.against))
        r.outcome = "landscape"
        self.on_point(r)
        return r


def delta_text(d: stats.Delta | None) -> str:
    """'+12.3% [+10.1%, +14.2%] (beyond noise)': harness.analysis.cells.Cell's words, as everywhere."""
    return Cell(d).text() if d is not None else "n/a"
