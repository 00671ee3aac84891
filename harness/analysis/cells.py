"""The values a table row holds and how each reads: Cell (a Delta with its style), Mfu, Number, Change, Table,
number formats.

Table rows keep numbers and these typed values; harness.console.render turns them into text or markdown,
harness.console.csv_json into CSV or JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness.analysis import stats

# Past this a ratio or a percentage is shown with three significant digits: an interval resting on one degree of
# freedom can be 10^48 wide, and 49 digits say no more than 4.57e+48 (nor fit a line).
HUGE = 1e4


# A verdict as a delta's words say it, short enough for a table cell (stats' constants are the long forms).
VERDICT_WORDS = {stats.BEYOND: "beyond noise", stats.WITHIN: "within noise", stats.SINGLE: "single sample",
                 stats.FEW: "too few samples", stats.ONE_RUN: "one run a side, noise unknown",
                 stats.MODES: "two modes, not decided"}
UNITS = {"pct": "%", "pp": " pp", "ratio": "x", "faster": "x"}


@dataclass
class Cell:
    """A delta as words: the one place a delta, its interval and its verdict are worded, in every output (tables,
    the verdict, the answers, the findings, the bisect, the charts' labels). One grammar, four units:

        text()   '+7.5% [+7.2%, +8.2%] (beyond noise)', '1.13x faster [1.09x, 1.16x] (beyond noise; noise borrowed)',
                 '+56.1% [range +49.8%, +63.9%] (single sample)', '+43.8% (single sample)'
        brief()  the same without the interval: '+7.5% (beyond noise)'

    style: pct (a relative change in %), ratio (1 + the change, 'x'), faster (a tokens/s ratio as pyperf says it:
    '1.25x slower' below 1), pp (a difference of effects, percentage points)."""

    delta: stats.Delta
    style: str = "pct"

    def _slower(self) -> bool:
        return self.style == "faster" and self.delta.value is not None and self.delta.value < 0

    def _fmt(self, x: float, digits: int) -> str:
        """x (a change) as this style shows it, its unit left out: '+7.5', '1.13', '-44.7'; past HUGE three
        significant digits."""
        if self.style in ("ratio", "faster"):
            r = 1.0 + x
            if self._slower():
                r = 1.0 / r if r > 0 else float("inf")
            return f"{r:.{digits}f}" if abs(r) < HUGE else f"{r:.3g}"
        return f"{x * 100:+.{digits}f}" if abs(x * 100) < HUGE else f"{x * 100:+.3g}"

    def _significant(self, x: float, digits: int) -> int:
        """How many significant digits the change shows at that many decimals: '+284.1%' 4, '+0.0091%' 2, '1.0040x' 2
        (a ratio's change from 1, not its leading 1)."""
        shown = f"{x:.{digits}f}" if self.style in ("ratio", "faster") else self._fmt(x, digits)
        return len("".join(c for c in shown if c.isdigit()).lstrip("0"))

    def _digits(self) -> int:
        """2 decimals for a ratio, 1 for a change; an interval narrower than the last digit gets more (up to 3 more)
        rather than vanishing, while the value shows fewer than 4 significant digits (a counter's near-point interval
        is not worth '+284.1312%')."""
        d = self.delta
        digits = 2 if self.style in ("ratio", "faster") else 1
        if d.low is not None and d.high is not None:
            while (digits < 5 and d.low != d.high and self._fmt(d.low, digits) == self._fmt(d.high, digits)
                   and self._significant(d.value, digits) < 4):
                digits += 1
        return digits

    def _head(self, digits: int) -> str:
        head = self._fmt(self.delta.value, digits) + UNITS[self.style]
        if self.style == "faster":
            head += " slower" if self._slower() else " faster"
        return head

    def words(self, detail: bool = False) -> str:
        """The verdict in words: 'beyond noise', 'within noise; noise borrowed', 'single sample'; with detail, what a
        comparison within noise could have called and how many runs would decide it, or what would know the noise."""
        d = self.delta
        text = VERDICT_WORDS.get(d.verdict, d.verdict)
        if detail and d.verdict == stats.ONE_RUN:
            text += f": --repeats {stats.REPEATS_TO_KNOW} to know"
        if detail and d.verdict == stats.WITHIN and d.detectable is not None:
            text += f": could detect {fmt_pct(d.detectable)} or more"
            if d.runs_to_decide:
                text += f"; ~{d.runs_to_decide} runs a side would decide it"
        if d.borrowed and d.verdict in (stats.BEYOND, stats.WITHIN):
            text += "; noise borrowed"  # a side of one run took its device's run-to-run spread
        return text

    def brief(self) -> str:
        """Value and verdict, no interval."""
        d = self.delta
        if d.value is None:
            return "n/a" if d.verdict == stats.NA else f"n/a ({self.words()})"
        head = self._head(2 if self.style in ("ratio", "faster") else 1)
        return head if d.verdict == stats.NA else f"{head} ({self.words()})"

    def text(self, detail: bool = False) -> str:
        """Value, interval and verdict (detail: with what a comparison within noise could have called)."""
        d = self.delta
        if d.value is None:
            return "n/a" if d.verdict == stats.NA else f"n/a ({self.words()})"
        digits = self._digits()
        head = self._head(digits)
        if d.low is not None and d.high is not None:
            low, high = sorted((d.low, d.high), reverse=self._slower())
            unit = UNITS[self.style]
            head += f" [{'range ' if d.bounds == 'range' else ''}{self._fmt(low, digits)}{unit}, {self._fmt(high, digits)}{unit}]"
        return head if d.verdict == stats.NA else f"{head} ({self.words(detail)})"

    def __str__(self) -> str:
        return self.text()


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


def fmt_pct(x):
    return None if x is None else f"{x * 100:.1f}%" if abs(x * 100) < HUGE else f"{x * 100:.3g}%"


def fmt_signed_pct(x):
    if x is None:
        return None
    return f"{round(x * 100, 2) or 0.0:+.2f}%" if abs(x * 100) < HUGE else f"{x * 100:+.3g}%"  # no "-0.00%"


def fmt_change(x: float) -> str:
    """A relative change: '+7.5%', '-3.0%', '+4.57e+48%'."""
    return f"{x * 100:+.1f}%" if abs(x * 100) < HUGE else f"{x * 100:+.3g}%"


def shorten(name, width=90):
    name = str(name)
    return name if len(name) <= width else name[: width - 3] + "..."
