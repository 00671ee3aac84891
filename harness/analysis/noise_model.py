"""The noise model a delta's interval rests on: how much runs of one configuration differ (Spread, Noise), how much
invocations do (Between), one cell's runs as logs with their invocations (CellRuns), and what one device's runs say
about noise, per metric (DeviceSpread, made by harness.analysis.noise.fit). Plain values and the few rules read off
them: the spread a cell uses (cell_spread), a counter's two modes (modes), calibrate's pooled summary (pooled_noise).
Kept apart from harness.analysis.stats, which judges deltas with them: stats imports this module, never the other way
round.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

MODE_GAP = 0.10  # two levels of a per-run counter this far apart (relative), each tight, are two modes
MODE_TIGHT = 5.0  # ... where the gap is this many times the spread inside either level


@dataclass(frozen=True, eq=False)
class Spread:
    """One estimate of a variance of log values, with its degrees of freedom (inf: taken as known). Compared by
    identity: two cells that use one Spread share its estimate, and an interval counts it once."""

    var: float
    df: float

    @property
    def sd(self) -> float:
        return math.sqrt(self.var)


@dataclass(frozen=True, eq=False)
class Between:
    """The variance of an invocation's offset, estimated as sum(coefficient * Spread.var) over its parts: the mean
    square between invocations (scaled by the runs an invocation counts for) less the run-to-run variance it holds
    (harness.analysis.noise). Kept as parts, not one number, so an interval counts each estimate once, with its
    own degrees of freedom, and an offset measured near zero still carries its uncertainty."""

    parts: tuple  # ((Spread, coefficient), ...): the mean square first, then the run-to-run spreads it holds
    configs: int = 0  # configurations (calibration sets included) with runs of 2+ invocations, behind it
    n0: float = 1.0  # the runs an invocation behind it counts for (its mean square: offset + run-to-run / n0)
    lendable: bool = False  # 2+ configurations behind it, alike: a cell with no run-to-run spread may be judged by it

    @property
    def mean_square(self) -> Spread:
        """The variance of the mean of n0 runs of one invocation (offset and run-to-run noise together)."""
        return self.parts[0][0]

    @property
    def var(self) -> float:
        return max(math.fsum(c * s.var for s, c in self.parts), 0.0)

    @property
    def sd(self) -> float:
        return math.sqrt(self.var)

    @property
    def df(self) -> float:
        """The degrees of freedom a delta carrying it has at most: its mean square's (stats.Linear.variance)."""
        return self.mean_square.df


@dataclass(frozen=True)
class Noise:
    """How much runs of one configuration differ: the sd of log(per-run value) (about the relative sd), with its
    degrees of freedom and what it rests on. source: "own" (its configuration's runs), "device" (pooled over the
    device's configurations alike in noise), "between invocations" (a cell judged by how its device's invocations
    differ)."""

    sd: float
    df: float
    cells: int = 1  # cells (or calibration sets) it rests on
    runs: int = 0
    source: str = "own"

    def describe(self) -> str:
        return f"{self.sd:.1%} ({self.cells} cell{'s' if self.cells != 1 else ''}, {self.runs} runs)"


@dataclass(frozen=True)
class CellRuns:
    """The per-run values of one cell as logs, each with the invocation it came from (runs of one harness process
    share one; harness.record.view.RecordView.invocation)."""

    logs: tuple[float, ...]
    invocations: tuple = ()
    values: tuple[float, ...] = ()

    @staticmethod
    def of(values: list, invocations: list | None = None) -> CellRuns:
        invocations = invocations if invocations is not None else [None] * len(values)
        kept = [(float(v), i) for v, i in zip(values, invocations, strict=True) if v is not None and v > 0]
        return CellRuns(tuple(math.log(v) for v, _i in kept), tuple(i for _v, i in kept), tuple(v for v, _i in kept))

    @property
    def geometric_mean(self) -> float:
        """exp(mean of the logs), taken about the smallest value, so runs that agree give their value to the bit."""
        if not self.values:
            return math.exp(self.mean)
        ref = min(self.values)
        return ref * math.exp(math.fsum(math.log(v / ref) for v in self.values) / len(self.values))

    @property
    def n(self) -> int:
        return len(self.logs)

    @cached_property  # read by k, df_within, ss_within and the offset's estimate: grouped once
    def by_invocation(self) -> dict:
        out: dict = {}
        for x, i in zip(self.logs, self.invocations, strict=True):
            out.setdefault(i, []).append(x)
        return out

    @property
    def k(self) -> int:
        """How many invocations its runs came from."""
        return len(self.by_invocation)

    @property
    def mean(self) -> float:
        return math.fsum(self.logs) / len(self.logs)

    @property
    def df_within(self) -> int:
        return self.n - self.k

    @property
    def ss_within(self) -> float:
        """The sum of squared deviations of its logs from their invocation's mean."""
        out = []
        for xs in self.by_invocation.values():
            m = math.fsum(xs) / len(xs)
            out.extend((x - m) ** 2 for x in xs)
        return math.fsum(out)


@dataclass(frozen=True, eq=False)
class DeviceSpread:
    """What one device's runs say about noise, for one metric (harness.analysis.noise.fit makes it).

    A configuration (a comparison set: workload and flags) pools its cells' runs across envs and calibration: the
    same configuration is taken to be alike in noise whichever build runs it. Configurations whose spreads agree
    (Bartlett's test) share one pooled spread (`pooled`, over `members`), and one of them clearly noisier than the
    rest (a one-sided F test) keeps its own (`apart`) while still counting in the pool; where they do not agree,
    every configuration keeps its own (`apart`, `alike` False, no pool). A configuration without 2 runs of one
    invocation borrows `pooled` only where the device showed its configurations alike (`borrowable`: 2+ of them).
    between: the variance of an invocation's offset (None: not measured on this device)."""

    pooled: Spread | None
    members: frozenset = frozenset()  # the configurations `pooled` rests on
    apart: dict = field(default_factory=dict)  # configuration -> its own Spread (it differs, or is clearly noisier)
    alike: bool = True  # every configuration's spread agreed with the rest's (none told apart by Bartlett's test)
    runs: int = 0
    between: Between | None = None
    calibration_runs: int = 0
    modes: dict = field(default_factory=dict)  # configuration -> (low, high): a cell of it peaked at two levels

    @property
    def cells(self) -> int:
        """Configurations with a spread of their own (pooled or apart)."""
        return len(self.members | set(self.apart))

    @property
    def borrowable(self) -> bool:
        return self.pooled is not None and len(self.members) >= 2 and self.alike

    @property
    def sd(self) -> float:
        return (self.pooled or self.typical_apart()).sd

    @property
    def df(self) -> float:
        return (self.pooled or self.typical_apart()).df

    def typical_apart(self) -> Spread:
        """Where no configuration is pooled: the median one of those apart (for a one-line summary only)."""
        spreads = sorted(self.apart.values(), key=lambda s: (s.var, s.df))
        return spreads[len(spreads) // 2]

    def spread_for(self, config) -> Spread | None:
        """The spread a configuration's cells use: its own if apart, the pooled one if it is pooled or may borrow."""
        if config in self.apart:
            return self.apart[config]
        if config in self.members or self.borrowable:
            return self.pooled
        return None

    def noise(self, config) -> Noise | None:
        spread = self.spread_for(config)
        if spread is None:
            return None
        if config in self.apart:
            return Noise(spread.sd, spread.df, 1, 0, "own")
        return Noise(spread.sd, spread.df, len(self.members), self.runs, "device")


def cell_spread(runs: CellRuns, device: DeviceSpread | None, config=None) -> tuple[Spread, Noise] | None:
    """The run-to-run spread a cell of `config` uses, and its description; None where nothing is known (one run,
    no device spread, or a device whose configurations differ in noise)."""
    if device is not None:
        spread = device.spread_for(config)
        return None if spread is None else (spread, device.noise(config))
    if runs.df_within < 1:
        return None
    own = Spread(runs.ss_within / runs.df_within, runs.df_within)
    return own, Noise(own.sd, own.df, 1, runs.n, "own")


def modes(cell: CellRuns) -> tuple[float, float] | None:
    """(low, high) where a cell's runs fall at two levels: the widest gap between its sorted values is at least
    MODE_GAP and MODE_TIGHT times the spread inside either side, each side 2+ runs (a peak RSS of 600 or 790 MiB,
    within one invocation too); None otherwise."""
    logs = sorted(cell.logs)
    if len(logs) < 4:
        return None
    gap, at = max((logs[i + 1] - logs[i], i) for i in range(len(logs) - 1))
    low, high = logs[:at + 1], logs[at + 1:]
    if len(low) < 2 or len(high) < 2:
        return None
    inside = max(_sd(low), _sd(high))
    if gap < math.log1p(MODE_GAP) or gap < MODE_TIGHT * inside:
        return None
    return math.exp(math.fsum(low) / len(low)), math.exp(math.fsum(high) / len(high))


def _sd(logs: list[float]) -> float:
    mean = math.fsum(logs) / len(logs)
    return math.sqrt(math.fsum((x - mean) ** 2 for x in logs) / (len(logs) - 1))


def pooled_noise(cells: list[list[float]], source: str = "device") -> Noise | None:
    """The spread pooled over cells (each the per-run values of one configuration, one invocation): the sum of
    squared log deviations / the sum of (runs - 1). None when no cell has 2 runs. (harness.calibrate's summary of
    its own runs; comparisons use harness.analysis.noise.fit.)"""
    ss, df, n_cells, runs = [], 0, 0, 0
    for values in cells:
        cell = CellRuns.of(list(values))
        if cell.n < 2:
            continue
        ss.append(cell.ss_within)
        df += cell.df_within
        n_cells += 1
        runs += cell.n
    if not df:
        return None
    return Noise(math.sqrt(math.fsum(ss) / df), df, n_cells, runs, source)
