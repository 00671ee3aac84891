"""The typed results of harness.analysis.answers (an answer, its chart's data, a key finding) and the words every
answer uses for a Delta: its interval and its own verdict (stats), so the noise rule of harness.analysis.stats flows
through unchanged and a single sample or a delta not beyond noise is never worded as a win. No torch import.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from harness.analysis import stats
from harness.analysis.cells import VERDICT_WORDS, Cell, fmt_change
from harness.analysis.series import Point

GIB = 2**30

# ---------------------------------------------------------------- typed results

@dataclass(frozen=True)
class Bar:
    """One bar of an answer's chart: a value (with its interval, where there is one), hatched when it is the user's
    logged single sample or a delta not beyond noise."""

    label: str
    value: Point
    hatched: bool = False
    note: str = ""  # the verdict words, written beside the bar


@dataclass
class Chart:
    """What an answer's chart draws: bars per panel (panel title -> bars), the unit of each panel, and its title,
    which states the answer."""

    kind: str  # "delta" (signed %), "stack" (memory parts, GiB), "bars" (tokens/s and GiB), "sweep"
    title: str
    panels: dict[str, list] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)


@dataclass
class Answer:
    key: str
    question: str  # in the user's words
    sentences: list[str]
    records: tuple = ()
    command: str | None = None  # what would answer the part these records cannot
    chart: Chart | None = None
    table: list[dict] | None = None  # rows, when a table shows it better than a chart
    headline: KeyFinding | None = None


@dataclass(frozen=True)
class KeyFinding:
    text: str
    size: float  # |relative effect|, the order of the summary
    records: tuple = ()


@dataclass
class BatchCurve:
    label: str
    reference: bool
    points: list[tuple]  # (B, tokens/s, GiB or None)
    failed: list[tuple]  # (B, status)
    knee: int | None = None


# ---------------------------------------------------------------- words for a Delta

def said(d: stats.Delta, style: str = "pct") -> str:
    """A delta, its interval and its verdict in words (harness.analysis.cells.Cell: one wording everywhere)."""
    return Cell(d, style).text()


def span(deltas: list[stats.Delta]) -> str:
    """'+5.9% to +7.9% (all beyond noise)' over several deltas; the verdicts counted in words."""
    values = sorted(d.value for d in deltas if d.value is not None)
    if not values:
        return "n/a"
    if len(values) == 1:
        return said(next(d for d in deltas if d.value is not None))
    counts = Counter(VERDICT_WORDS.get(d.verdict, d.verdict) for d in deltas if d.value is not None)
    words = (f"all {next(iter(counts))}" if len(counts) == 1
             else "; ".join(f"{n} {verdict_}" for verdict_, n in counts.most_common()))
    return f"{fmt_change(values[0])} to {fmt_change(values[-1])} ({words})"


def delta_bar(label: str, d: stats.Delta, reference: bool = False) -> Bar:
    """A delta in % as a bar: hatched unless beyond noise; a measured one not beyond noise says its verdict (the
    user's logged single samples are hatched grey, which the chart's axis says)."""
    return Bar(label, Point(d.value * 100, None if d.low is None else d.low * 100, None if d.high is None else d.high * 100),
               hatched=reference or not d.beyond, note="" if d.beyond or reference else Cell(d).words())


def verb_title(what: str, verb: str, metric: str, size: str) -> str:
    """'TF32 raises peak alloc 9-19% (no noise estimate)': the caveat after the size."""
    verb, _, caveat = verb.partition(" (")
    return f"{what} {verb} {metric} {size}" + (f" ({caveat}" if caveat else "")


def single(d: stats.Delta) -> stats.Delta:
    """A delta between two of the user's logged lines: single samples, whatever the counter rule says."""
    return stats.Delta(d.value, verdict=stats.SINGLE) if d.value is not None and d.low is None else d


def gib_span(lo: float, hi: float) -> str:
    return f"{lo:+.1f} GiB" if f"{lo:+.1f}" == f"{hi:+.1f}" else f"{lo:+.1f} to {hi:+.1f} GiB"


def title_range(values: list[float]) -> str:
    """'7-19%' (all positive), '-2% to +17%' (signs differ), for a chart's title."""
    lo, hi = min(values), max(values)
    if round(lo * 100) == round(hi * 100):
        return f"{lo * 100:+.0f}%"
    if lo >= 0 or hi <= 0:
        return f"{abs(lo) * 100:.0f}-{abs(hi) * 100:.0f}%" if lo >= 0 else f"-{abs(hi) * 100:.0f} to -{abs(lo) * 100:.0f}%"
    return f"{lo * 100:+.0f}% to {hi * 100:+.0f}%"


def moves(deltas: list[stats.Delta], up: str, down: str) -> str:
    """The verb a title may use: up/down only when every delta is beyond noise in that direction."""
    if deltas and all(d.beyond and d.value > 0 for d in deltas):
        return up
    if deltas and all(d.beyond and d.value < 0 for d in deltas):
        return down
    if deltas and all(d.verdict == stats.WITHIN for d in deltas):
        return "does not move beyond noise"
    if deltas and all(d.value is not None and d.value > 0 for d in deltas) and not any(d.verdict == stats.WITHIN for d in deltas):
        return up + " (no noise estimate)"
    if deltas and all(d.value is not None and d.value < 0 for d in deltas) and not any(d.verdict == stats.WITHIN for d in deltas):
        return down + " (no noise estimate)"
    return "changes"
