"""A cell's value from its runs: each run's tokens/s (tokens per step / its median timed step), and the cell's
Estimate (harness.analysis.stats), the geometric mean of its runs' values with the run-to-run spread it uses, for
tokens/s (throughput) and for a per-run counter such as peak memory (memory). Kept apart from stats: this is how a cell
is measured, stats how two cells are judged.
"""

from __future__ import annotations

import math
import statistics

from harness.analysis.noise_model import CellRuns, DeviceSpread, Noise, cell_spread
from harness.analysis.stats import FEW, MIN_SAMPLES, ONE_RUN, SINGLE, Estimate

NUMPY_MEDIAN_FROM = 1000  # values from which numpy's partition is quicker than sorting them in Python


def median(values: list) -> float | None:
    """The median of numbers (the mean of the middle two for an even count: np.median's value to the bit), None for
    none. In Python for a few (microseconds a run, where numpy costs about fifty); with numpy for many."""
    if not values:
        return None
    if len(values) < NUMPY_MEDIAN_FROM:
        return float(statistics.median(values))
    import numpy as np

    return float(np.median(np.asarray(values, dtype=float)))


def run_throughput(samples_ms, tokens_per_step: float | None) -> float | None:
    """One run's tokens/s: tokens per step / its median timed step."""
    return rate(median([x for x in samples_ms if x is not None]), tokens_per_step)


def rate(median_ms: float | None, tokens_per_step: float | None) -> float | None:
    """tokens/s of a run whose median timed step is median_ms (RecordView.timed_median: the same median)."""
    if median_ms is None or not tokens_per_step:
        return None
    return tokens_per_step / (median_ms / 1000.0) if median_ms > 0 else None


def throughput(samples_ms: list, tokens_per_step: float | None, device: DeviceSpread | None = None,
               run_medians: list | None = None, invocations: list | None = None, config=None) -> Estimate:
    """tokens/s from per-run lists of timed step times (ms): the geometric mean of the runs' own tokens/s, with its
    uncertainty. run_medians: each run's own median, in the order of samples_ms, where the caller has them;
    invocations: each run's invocation, in that order; config: its configuration (its spread's, on the device)."""
    invocations = invocations if invocations is not None else [None] * len(samples_ms)
    if run_medians is None:
        run_medians = [median([x for x in s if x is not None]) for s in samples_ms]
    kept = [(s, m, i) for s, m, i in zip(samples_ms, run_medians, invocations, strict=True) if len(s)]
    n = sum(len(s) for s, _m, _i in kept)
    per_run = [rate(m, tokens_per_step) for _s, m, _i in kept]
    runs = CellRuns.of(per_run, [i for _s, _m, i in kept])
    if not n or not runs.n:
        return Estimate(None, n, len(kept))
    if n < MIN_SAMPLES:
        return Estimate(runs.geometric_mean, n, runs.n, why=SINGLE if n <= 1 else FEW)
    return _estimate(runs, n, device, config)


def memory(values: list, device: DeviceSpread | None = None, invocations: list | None = None,
           config=None) -> Estimate:
    """A per-run counter (peak memory): the geometric mean over runs, with its uncertainty by the same rule."""
    runs = CellRuns.of([float(v) if v is not None else None for v in values], invocations)
    if not runs.n:
        return Estimate(None, 0, 0)
    return _estimate(runs, runs.n, device, config)


def _estimate(runs: CellRuns, n: int, device: DeviceSpread | None, config) -> Estimate:
    log, point = runs.mean, runs.geometric_mean
    spread = cell_spread(runs, device, config)
    loads = tuple((i, len(xs) / runs.n) for i, xs in runs.by_invocation.items())
    if spread is None:
        between = device.between if device is not None else None
        if between is not None and between.lendable:
            # no run-to-run spread for this configuration, but how the device's invocations differ (offset and
            # run-to-run noise together) is measured: against another invocation, that is its noise
            ms = between.mean_square
            noise = Noise(math.sqrt(ms.var * between.n0), ms.df, between.configs, 0, "between invocations")
            return Estimate(point, n, runs.n, noise, log=log, loads=loads, device=device, by_invocations=True,
                            config=config)
        return Estimate(point, n, runs.n, why=ONE_RUN, log=log, device=device, config=config)
    spread, noise = spread
    within = ((spread, 1.0 / runs.n),)
    return Estimate(point, n, runs.n, noise, log=log, within=within, loads=loads, device=device, config=config)
