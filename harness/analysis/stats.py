"""Is a delta beyond noise? One rule, used by every table, the verdict, the report, the bisect, tune and the repeats
that harness.run adds until a rung is decided.

The run (one worker process) is the unit of noise: two runs of one build differ by more than the steps inside one
run do (on the shared 2-core CPU of this project by 5-26%, on an H100 by under 1%), so no interval may rest on
step-to-step noise alone.

  value     a cell's tokens/s is tokens per step / the median timed step of its runs pooled (warm-up excluded); a
            run's own tokens/s is the same over its own steps. Memory: the median over runs of each run's peak.
  spread    how much runs of one configuration differ: the standard deviation of log(per-run value), so relative.
            The device's spread is pooled over every cell of that device label with 2+ runs (and over its
            calibration runs, harness.calibrate): a variance pooled over cells, with its degrees of freedom. A cell
            uses the larger of its own runs' spread and its device's, with the device's degrees of freedom (a cell
            noisier than its device keeps its own spread).
  interval  a cell's uncertainty is spread / sqrt(runs), Student-t with those degrees of freedom; its replicates are
            draws of that (seeded per cell, so every output is reproducible), and a delta's 99% interval is the
            0.5..99.5 percentile of the replicate ratios (differences of effects and geometric means combine
            replicate by replicate).
  verdict   beyond noise: the interval excludes 0 AND |delta| >= the floor (1%); within noise otherwise, with the
            change it could have detected and about how many runs a side would detect half of it. A cell of one run
            borrows its device's spread, and says so ("borrowed"); where the device has no spread at all (no cell
            with 2+ runs, no calibration): "one run a side: run-to-run noise unknown", never beyond noise.

Why 99% and a pooled spread: one A/A comparison (a build against itself) is a few dozen deltas; at 95% one in twenty
of them would be called beyond noise by chance alone, and a spread from two runs is itself a guess (pooling over the
device's cells gives it the degrees of freedom that two runs lack). tests/test_noise.py holds the rule to at most 1 in
20 on real A/A sets of this machine, and checks that real effects stay beyond noise.

numpy only (no scipy), no torch.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import statistics
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.99
N_BOOT = 10_000
MIN_BOOT, MAX_BOOT = 100, 100_000  # --boot: fewer make a noisy interval; more take minutes per table for nothing
NOISE_FLOOR = 0.01  # relative (1%); for differences of effects, 1 percentage point
MIN_SAMPLES = 5  # fewer timed samples than this in a cell: no noise estimate
REPEATS_TO_KNOW = 3  # what the "noise unknown" verdict tells a user to run

BEYOND = "beyond noise"
WITHIN = "within noise"
SINGLE = "single sample, no noise estimate"
FEW = "too few samples, no noise estimate"
ONE_RUN = f"one run a side: run-to-run noise unknown (--repeats {REPEATS_TO_KNOW} to know)"
NA = "n/a"

# Student's t, two-sided 99% (the 0.995 quantile), by degrees of freedom; between the rows: linear in 1/df.
_T99 = {1: 63.657, 2: 9.925, 3: 5.841, 4: 4.604, 5: 4.032, 6: 3.707, 7: 3.499, 8: 3.355, 9: 3.250, 10: 3.169,
        11: 3.106, 12: 3.055, 13: 3.012, 14: 2.977, 15: 2.947, 16: 2.921, 17: 2.898, 18: 2.878, 19: 2.861, 20: 2.845,
        22: 2.819, 24: 2.797, 26: 2.779, 28: 2.763, 30: 2.750, 40: 2.704, 60: 2.660, 120: 2.617}
_Z99 = 2.576


def t_quantile(df: float) -> float:
    """The two-sided 99% critical value of Student's t with df degrees of freedom (df >= 1; inf: the normal's)."""
    if df < 1:
        raise ValueError(f"degrees of freedom {df}: at least 1")
    keys = sorted(_T99)
    if df in _T99:
        return _T99[df]
    if df > keys[-1]:
        lo, hi, t_lo, t_hi = keys[-1], math.inf, _T99[keys[-1]], _Z99
    else:
        hi = next(k for k in keys if k > df)
        lo = max(k for k in keys if k < df)
        t_lo, t_hi = _T99[lo], _T99[hi]
    w = (1 / lo - 1 / df) / (1 / lo - (0 if hi == math.inf else 1 / hi))
    return t_lo + w * (t_hi - t_lo)


def rule_text(noise_floor: float = NOISE_FLOOR, n_boot: int = N_BOOT) -> str:
    """The significance rule in one paragraph (footer of every output, and the docs)."""
    return (
        f"Significance: the run is the unit of noise (runs of one build differ by more than the steps inside a run "
        f"do, so no interval rests on step noise alone). tokens/s = tokens per step / median timed step (warm-up "
        f"excluded; a cell's runs pooled); memory = the median of the runs' peaks. Run-to-run spread = the sd of "
        f"log per-run values, pooled over the device's cells with 2+ runs and its calibration runs; a cell uses the "
        f"larger of its own and its device's. Interval: {CONFIDENCE:.0%} (a build compared with itself must not be "
        f"called faster by chance), Student-t on spread/sqrt(runs) "
        f"({n_boot} seeded replicates). 'beyond noise' when the interval excludes 0 and |delta| >= {noise_floor:.0%} "
        f"(1 pp for differences of effects), else 'within noise'. A one-run cell borrows its device's spread "
        f"('borrowed'); with none known: '{ONE_RUN}'. Fewer than {MIN_SAMPLES} timed steps: no noise estimate."
    )


def interval_name() -> str:
    """What the bounds of a delta are, for legends and headers: '99% interval'."""
    return f"{CONFIDENCE:.0%} interval"


@dataclass(frozen=True)
class Noise:
    """How much runs of one configuration differ: the sd of log(per-run value) (about the relative sd), with its
    degrees of freedom and what it rests on."""

    sd: float
    df: int
    cells: int = 1  # cells (or calibration sets) it is pooled over
    runs: int = 0
    source: str = "own"  # "own" (the cell's runs) or "device" (pooled over the device's cells and calibration)

    def describe(self) -> str:
        return f"{self.sd:.1%} ({self.cells} cell{'s' if self.cells != 1 else ''}, {self.runs} runs)"


def pooled_noise(cells: list[list[float]], source: str = "device") -> Noise | None:
    """The spread pooled over cells: each cell is the per-run values of one configuration (positive numbers); the
    cells with 2+ runs count (sum of squared log deviations / sum of (runs - 1)). None when no cell has 2 runs."""
    ss, df, n_cells, runs = 0.0, 0, 0, 0
    for values in cells:
        logs = np.log([v for v in values if v is not None and v > 0])
        if len(logs) < 2:
            continue
        ss += float(np.sum((logs - logs.mean()) ** 2))
        df += len(logs) - 1
        n_cells += 1
        runs += len(logs)
    if not df:
        return None
    return Noise(math.sqrt(ss / df), df, n_cells, runs, source)


@dataclass(frozen=True)
class Delta:
    """A relative change (0.12 = +12%) or a difference of effects, with its interval and verdict."""

    value: float | None
    low: float | None = None
    high: float | None = None
    verdict: str = NA
    bounds: str = "ci"  # what low..high are: "ci" (the interval) or "range" (min..max, for the user's logs only)
    borrowed: bool = False  # a side of one run took its device's run-to-run spread
    detectable: float | None = None  # within noise: the smallest change this comparison could have called (half-width)
    runs_for_half: int | None = None  # about how many runs a side would detect half of `detectable` (said when within)

    @property
    def beyond(self) -> bool:
        return self.verdict == BEYOND

    def to_dict(self) -> dict:
        low, high = ("range_low", "range_high") if self.bounds == "range" else ("ci_low", "ci_high")
        out = {"value": self.value, low: self.low, high: self.high, "verdict": self.verdict}
        if self.borrowed:
            out["noise"] = "borrowed from the device"
        if self.detectable is not None:
            out["could_detect"] = self.detectable
            out["runs_a_side_for_half"] = self.runs_for_half
        return out


@dataclass
class Estimate:
    """A point value with its replicates (None when there is no noise estimate, `why` says which case)."""

    point: float | None
    boot: np.ndarray | None
    n: int  # timed samples behind it (memory: runs)
    repeats: int  # runs behind it
    noise: Noise | None = None  # the spread its replicates were drawn with
    why: str | None = None  # no replicates: SINGLE, FEW or ONE_RUN

    @property
    def borrowed(self) -> bool:
        return self.repeats < 2 and self.noise is not None

    def half_width(self) -> float | None:
        """The relative half-width of this cell's own 99% interval (what --repeats auto drives down)."""
        if self.noise is None or not self.repeats:
            return None
        return math.expm1(t_quantile(self.noise.df) * self.noise.sd / math.sqrt(self.repeats))


def seed_for(key: str) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)


def cell_noise(run_values: list[float], device: Noise | None) -> Noise | None:
    """The spread a cell's interval uses: the larger of its own runs' and its device's, with the device's degrees
    of freedom where the device has an estimate (its own otherwise); None with one run and no device estimate."""
    own = pooled_noise([run_values], source="own")
    if device is None:
        return own
    if own is not None and own.sd > device.sd:
        return Noise(own.sd, device.df, device.cells, device.runs, "own")
    return device


def replicates(point: float, noise: Noise, runs: int, n_boot: int, key: str) -> np.ndarray:
    """point * exp(sd / sqrt(runs) * t_df): draws of the cell's value (seeded by key)."""
    rng = np.random.default_rng(seed_for(key))
    draws = rng.standard_t(noise.df, size=n_boot) if noise.df < 1000 else rng.standard_normal(n_boot)
    # t with few degrees of freedom has tails heavy enough to overflow exp: clipped far beyond any 99% bound
    return point * np.exp(np.clip(noise.sd / math.sqrt(runs) * draws, -30.0, 30.0))


NUMPY_MEDIAN_FROM = 1000  # values from which numpy's partition is quicker than sorting them in Python


def median(values: list) -> float | None:
    """The median of numbers (the mean of the middle two for an even count: np.median's value to the bit), None for
    none. In Python for a few: a run's steps, a cell's few runs or a log line's one sample each cost microseconds
    this way, about fifty with numpy (a report of 100,000 records takes some 100,000 medians); with numpy for many:
    a cell of 800 runs pools 32,000 steps, 4 ms sorted in Python, 1 ms partitioned."""
    if not values:
        return None
    if len(values) < NUMPY_MEDIAN_FROM:
        return float(statistics.median(values))
    return float(np.median(np.asarray(values, dtype=float)))


def run_throughput(samples_ms, tokens_per_step: float | None) -> float | None:
    """One run's tokens/s: tokens per step / its median timed step."""
    return rate(median([x for x in samples_ms if x is not None]), tokens_per_step)


def rate(median_ms: float | None, tokens_per_step: float | None) -> float | None:
    """tokens/s of a run whose median timed step is median_ms (RecordView.timed_median: the same median)."""
    if median_ms is None or not tokens_per_step:
        return None
    return tokens_per_step / (median_ms / 1000.0) if median_ms > 0 else None


def throughput(samples_ms: list, tokens_per_step: float | None, key: str = "", n_boot: int = N_BOOT,
               device: Noise | None = None, median_ms: float | None = None,
               run_medians: list | None = None) -> Estimate:
    """tokens/s from per-run lists of timed step times (ms), with replicates from the run-to-run spread. median_ms: the
    median of those steps pooled, where the caller has it already (a cell's ms/step: one sort of its steps, not two);
    run_medians: each run's own median, in the order of samples_ms, where the caller has them (a record's view keeps
    its own: the noise rule read them already)."""
    if run_medians is not None:
        run_medians = [m for s, m in zip(samples_ms, run_medians, strict=True) if len(s)]
    # plain numbers: a run's median is taken in Python (a record's steps are a list of them already)
    samples = [s if type(s) is list else [float(x) for x in s] for s in samples_ms if len(s)]
    n = sum(len(s) for s in samples)
    if not n or not tokens_per_step:
        return Estimate(None, None, n, len(samples))
    if median_ms is None:
        median_ms = median(list(itertools.chain.from_iterable(samples)))
    if median_ms <= 0:
        return Estimate(None, None, n, len(samples))
    point = tokens_per_step / (median_ms / 1000.0)
    if n < MIN_SAMPLES:
        return Estimate(point, None, n, len(samples), why=SINGLE if n <= 1 else FEW)
    per_run = [run_throughput(s, tokens_per_step) for s in samples] if run_medians is None else \
        [rate(m, tokens_per_step) for m in run_medians]
    return _estimate(point, per_run, n, device, n_boot, key)


def memory(values: list, key: str = "", n_boot: int = N_BOOT, device: Noise | None = None) -> Estimate:
    """A per-run counter (peak memory): the median over runs, with replicates from the run-to-run spread."""
    runs = [float(v) for v in values if v is not None and v > 0]
    if not runs:
        return Estimate(None, None, 0, 0)
    return _estimate(median(runs), runs, len(runs), device, n_boot, key)


def _estimate(point: float, per_run: list, n: int, device: Noise | None, n_boot: int, key: str) -> Estimate:
    runs = [v for v in per_run if v is not None]
    noise = cell_noise(runs, device)
    if noise is None:
        return Estimate(point, None, n, len(runs), why=ONE_RUN)
    return Estimate(point, replicates(point, noise, len(runs), n_boot, key), n, len(runs), noise)


def _verdict(value: float, low: float, high: float, floor: float) -> str:
    return BEYOND if (low > 0 or high < 0) and abs(value) >= floor else WITHIN


def _no_estimate(*estimates: Estimate) -> str | None:
    whys = [e.why or (SINGLE if e.n <= 1 else FEW) for e in estimates if e.boot is None]
    return _missing(whys) if whys else None


def ratio(a: Estimate, b: Estimate, floor: float = NOISE_FLOOR) -> tuple[Delta, np.ndarray | None]:
    """b relative to a (b/a - 1), and its replicates (for differences of effects and geometric means)."""
    if a.point is None or b.point is None or a.point == 0:
        return Delta(None), None
    value = b.point / a.point - 1.0
    missing = _no_estimate(a, b)
    if missing:
        return Delta(value, verdict=missing), None
    boot = b.boot / a.boot - 1.0
    d = interval(value, boot, floor, borrowed=a.borrowed or b.borrowed)
    return _with_power(d, math.ceil(8 / (1 / max(a.repeats, 1) + 1 / max(b.repeats, 1))), floor), boot


def _with_power(d: Delta, runs_for_half: int | None, floor: float) -> Delta:
    """A within-noise delta with what it could have detected (its half-width, at least the floor) and about how many
    runs a side would detect half that (the half-width goes as sqrt(1/runs_a + 1/runs_b): n = 8 / (1/runs_a +
    1/runs_b) a side; below the floor more runs do not help, so none is said)."""
    half = max(abs(d.high - d.value), abs(d.value - d.low), floor) if d.verdict == WITHIN else None
    if half is not None and half / 2 < floor:
        runs_for_half = None
    return Delta(d.value, d.low, d.high, d.verdict, d.bounds, d.borrowed, half, runs_for_half)


def interval(value: float, boot: np.ndarray, floor: float = NOISE_FLOOR, borrowed: bool = False) -> Delta:
    """The delta's interval from its replicates (the central CONFIDENCE share of them) and its verdict."""
    low, high = percentile_bounds(boot)
    return Delta(value, low, high, _verdict(value, low, high, floor), borrowed=borrowed)


def percentile_bounds(boot: np.ndarray) -> tuple[float, float]:
    """The central CONFIDENCE share of replicates: (low, high). Every interval drawn or printed comes from here."""
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, high = (float(x) for x in np.percentile(boot, [tail, 100 - tail]))
    return low, high


def _missing(verdicts: list[str]) -> str:
    for why in (SINGLE, FEW, ONE_RUN):
        if why in verdicts:
            return why
    return FEW


def combine(parts: list[tuple[float, tuple[Delta, np.ndarray | None]]], floor: float = NOISE_FLOOR) -> Delta:
    """A weighted sum of effects (e.g. a 2x2 factor: 0.5*(e22 - e12) + 0.5*(e21 - e11)), in absolute units."""
    if any(d.value is None for _, (d, _b) in parts):
        return Delta(None)
    value = sum(w * d.value for w, (d, _b) in parts)
    if any(b is None for _, (_d, b) in parts):
        return Delta(value, verdict=_missing([d.verdict for _, (d, _b) in parts]))
    boot = sum(w * b for w, (_d, b) in parts)
    return interval(value, boot, floor, borrowed=any(d.borrowed for _, (d, _b) in parts))


def counter(a: Estimate, b: Estimate, floor: float = NOISE_FLOOR) -> Delta:
    """A per-run counter (peak memory) of b against a's (Estimates from memory()): the same rule as tokens/s."""
    return ratio(a, b, floor)[0]


def geomean(parts: list[tuple[Delta, np.ndarray | None]], floor: float = NOISE_FLOOR) -> Delta:
    """The geometric mean of several ratios (each a Delta b/a - 1 with its replicates): exp(mean(log(1 + d))) - 1.
    Its interval comes from the replicates combined replicate by replicate (every cell drawn on its own);
    a part without replicates leaves the mean without a noise estimate."""
    values = [d.value for d, _b in parts]
    if not parts or any(v is None or v <= -1 for v in values):
        return Delta(None)
    value = float(np.exp(np.mean(np.log1p(values))) - 1.0)
    boots = [b for _d, b in parts]
    if any(b is None for b in boots):
        return Delta(value, verdict=_missing([d.verdict for d, _b in parts]))
    boot = np.exp(np.mean(np.log1p(np.stack(boots)), axis=0)) - 1.0
    d = interval(value, boot, floor, borrowed=any(d.borrowed for d, _b in parts))
    runs = [p.runs_for_half for p, _b in parts if p.runs_for_half]
    return _with_power(d, max(runs) if runs else None, floor)
