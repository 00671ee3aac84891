"""The values a table row holds and how each reads: Cell (a Delta with its style), Mfu, Number, Change, Table,
number formats.

Table rows keep numbers and these typed values; harness.render turns them into text, markdown, CSV or JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness.analysis import stats


@dataclass
class Cell:
    """A delta to render: style pct (relative %), ratio (x), pp (difference of effects)."""

    delta: stats.Delta
    style: str = "pct"

    def brief(self) -> str:
        """Value and verdict, no interval."""
        d = self.delta
        if d.value is None:
            return "n/a"
        text = Cell(stats.Delta(d.value, verdict=stats.NA), self.style).text()
        return text + {stats.BEYOND: "", stats.WITHIN: " (within noise)", stats.SINGLE: " (single sample)",
                       stats.FEW: " (too few samples)", stats.ONE_RUN: " (one run a side, noise unknown)",
                       stats.MODES: " (two modes, not decided)"}.get(d.verdict, "") + (" (noise borrowed)" if d.borrowed and d.verdict == stats.BEYOND else "")

    def _fmt(self, x: float, digits: int) -> str:
        return f"{1 + x:.{digits}f}" if self.style == "ratio" else f"{x * 100:+.{digits}f}"

    def _significant(self, x: float, digits: int) -> int:
        """How many significant digits the change shows at that many decimals: '+284.1%' 4, '+0.0091%' 2, '1.0040x' 2
        (a ratio's change from 1, not its leading 1)."""
        shown = self._fmt(x, digits) if self.style != "ratio" else f"{x:.{digits}f}"
        return len("".join(c for c in shown if c.isdigit()).lstrip("0"))

    def text(self) -> str:
        d = self.delta
        if d.value is None:
            return "n/a" if d.verdict == stats.NA else f"n/a ({d.verdict})"
        unit = {"pct": "%", "pp": " pp", "ratio": "x"}[self.style]
        digits = 2 if self.style == "ratio" else 1
        if d.verdict in (stats.BEYOND, stats.WITHIN):
            # an interval narrower than the last digit gets more digits (up to 3 more) rather than vanishing, while the
            # value shows fewer than 4 significant digits: a counter's near-point interval is not worth '+284.1312%'
            while (digits < 5 and d.low != d.high and self._fmt(d.low, digits) == self._fmt(d.high, digits)
                   and self._significant(d.value, digits) < 4):
                digits += 1
        head = self._fmt(d.value, digits) + unit
        if d.verdict in (stats.BEYOND, stats.WITHIN):
            low, high = self._fmt(d.low, digits), self._fmt(d.high, digits)
            bounds = f"(range {low}..{high})" if d.bounds == "range" else f"[{low},{high}]"
            # borrowed: a side of one run took its device's run-to-run spread (the footer says so)
            return f"{head} {bounds} {'beyond' if d.beyond else 'within noise'}" + (" (borrowed)" if d.borrowed else "")
        if d.verdict == stats.SINGLE:
            return f"{head} (single sample)"
        if d.verdict == stats.FEW:
            return f"{head} (too few samples)"
        if d.verdict == stats.ONE_RUN:
            return f"{head} (one run a side, noise unknown)"
        if d.verdict == stats.MODES:
            return f"{head} (two modes, not decided)"
        return head


@dataclass
class Mfu:
    """An MFU to render. Above 100% the peak it divides by is below the rate the run achieved, so that peak is
    wrong (a calibration slowed by other load, or a datasheet entry for another variant): never shown bare."""

    value: float

    @property
    def suspect(self) -> bool:
        return self.value > 1.0

    def text(self) -> str:
        return fmt_pct(self.value) + (" (peak suspect)" if self.suspect else "")


@dataclass(frozen=True)
class Number:
    """A number a row keeps as a number, with the format every output shows it in (text, markdown, CSV and JSON all
    show text(), as when the row held the formatted string)."""

    value: float | None
    format: Callable[[float | None], str | None]

    def text(self) -> str | None:
        return self.format(self.value)

    def __str__(self) -> str:
        return str(self.text())


@dataclass(frozen=True)
class Change:
    """One quantity before -> after (a knob table's tokens/s of its two runs), shown as 'before -> after'."""

    before: float | None
    after: float | None

    def text(self) -> str:
        return f"{fmt_int(self.before)} -> {fmt_int(self.after)}"

    def __str__(self) -> str:
        return self.text()


@dataclass(frozen=True)
class Memory:
    """Bytes and which memory they are (RecordView.peak_memory's names: 'device used', 'reserved', 'peak RSS');
    written as e.g. '48,716 device used' (MiB) only where it is shown."""

    bytes: float
    metric: str

    def text(self) -> str:
        return f"{fmt_mib(self.bytes)} {self.metric}"

    __str__ = text


SHOWN_AS_TEXT = (Number, Change, Memory)  # typed values text and markdown show as their text()


MFU_SUSPECT_NOTE = ("MFU above 100% is marked 'peak suspect': the GEMM peak it divides by is below the FLOP rate the run "
                    "achieved, so that peak is wrong (a measured calibration slowed by other load, or a datasheet entry "
                    "for another variant of the device); the run's tokens/s are not affected")


CONTENDED_NOTE = ("'contended': measured while other work ran on the machine (record.contention: other processes' "
                  "CPU time on the worker's CPUs, steal, other GPU processes); its times are slower than the machine "
                  "can do, and a delta against it says so much about the load as about the change")


@dataclass
class Table:
    name: str
    title: str
    columns: list  # (key, header)
    rows: list = field(default_factory=list)
    notes: list = field(default_factory=list)


def fmt_ms(x):
    return None if x is None else (f"{x:.3f}" if x < 10 else f"{x:.2f}" if x < 1000 else f"{x:,.0f}")


def fmt_int(x):
    return None if x is None else f"{x:,.0f}"


def fmt_mib(x):
    return None if x is None else f"{x / 2**20:,.0f}"


# Past this a ratio or a percentage is shown with three significant digits: an interval resting on one degree of
# freedom can be 10^48 wide, and 49 digits say no more than 4.57e+48 (nor fit a line).
HUGE = 1e4


def fmt_pct(x):
    return None if x is None else f"{x * 100:.1f}%" if abs(x * 100) < HUGE else f"{x * 100:.3g}%"


def fmt_signed_pct(x):
    if x is None:
        return None
    return f"{round(x * 100, 2) or 0.0:+.2f}%" if abs(x * 100) < HUGE else f"{x * 100:+.3g}%"  # no "-0.00%"


def fmt_change(x: float) -> str:
    """A relative change: '+7.5%', '-3.0%', '+4.57e+48%'."""
    return f"{x * 100:+.1f}%" if abs(x * 100) < HUGE else f"{x * 100:+.3g}%"


def fmt_times(r: float) -> str:
    """A ratio, without its 'x': '1.82', '4.57e+48'."""
    return f"{r:.2f}" if abs(r) < HUGE else f"{r:.3g}"


def shorten(name, width=90):
    name = str(name)
    return name if len(name) <= width else name[: width - 3] + "..."
