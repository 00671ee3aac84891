"""Is a delta beyond noise? One rule, used by every table of harness.compare and harness.report.

Throughput (tokens/s) of a group of repeats is tokens_per_step / median step time, the median taken
over the timed steps of all repeats pooled. Its noise is estimated by a two-level bootstrap: resample
the repeats with replacement, then the timed steps within each chosen repeat, and take the pooled
median again (N_BOOT times, fixed seed, so the output is reproducible). A delta between two groups is
computed on every pair of replicates; its 95% interval is the 2.5th..97.5th percentile of those.

  beyond noise  the 95% interval excludes 0 AND |delta| >= the noise floor (1% by default)
  within noise  otherwise: shown as such, never as a win or a loss

With one repeat per side only step-to-step noise is sampled; the floor guards against run-to-run
drift (clocks, thermals, autotuning) that a single run cannot show. A side with one timed sample
(the user's reference logs: only "Step 49" is known) has no noise estimate and says so.

Memory is a counter read once per run, not a sample: a memory delta is beyond noise when it exceeds
the floor and the ranges over repeats of the two sides do not overlap; with one run on a side there
is no noise estimate (peak RSS, for one, moves between identical runs). Its bounds are that range
(min..max over the repeats), not a confidence interval, and Delta.bounds says which one a delta has.

numpy only (no scipy), no torch.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
N_BOOT = 2000
MIN_BOOT, MAX_BOOT = 100, 100_000  # --boot: fewer make a noisy interval; more take minutes per table for nothing
NOISE_FLOOR = 0.01  # relative (1%); for differences of effects, 1 percentage point
MIN_SAMPLES = 5  # fewer timed samples than this on a side: no noise estimate

BEYOND = "beyond noise"
WITHIN = "within noise"
SINGLE = "single sample, no noise estimate"
FEW = "too few samples, no noise estimate"
ONE_RUN = "one run on a side, no noise estimate"
NA = "n/a"


def rule_text(noise_floor: float = NOISE_FLOOR, n_boot: int = N_BOOT) -> str:
    """The significance rule in one paragraph (footer of every output, and the docs)."""
    return (
        f"Significance: tokens/s = tokens per step / median timed step (warm-up excluded; repeats pooled). "
        f"Noise: {n_boot} bootstrap resamples of repeats, then of steps within each repeat (seeded); "
        f"a delta is 'beyond noise' when its {CONFIDENCE:.0%} interval excludes 0 and |delta| >= "
        f"{noise_floor:.0%} (the floor; 1 pp for differences of effects), else 'within noise'. "
        f"Fewer than {MIN_SAMPLES} timed samples on a side: no noise estimate ('{SINGLE}' for one). "
        f"Memory is a per-run counter, so its delta carries the range over repeats, '(range low..high)', not an "
        f"interval: beyond noise when |delta| >= {noise_floor:.0%} and the ranges over repeats (2+ a side) do not "
        f"overlap; one run on a side: no noise estimate."
    )


@dataclass(frozen=True)
class Delta:
    """A relative change (0.12 = +12%) or a difference of effects, with its interval and verdict."""

    value: float | None
    low: float | None = None
    high: float | None = None
    verdict: str = NA
    bounds: str = "ci"  # what low..high are: "ci" (95% bootstrap interval) or "range" (min..max over repeats)

    @property
    def beyond(self) -> bool:
        return self.verdict == BEYOND

    def to_dict(self) -> dict:
        low, high = ("range_low", "range_high") if self.bounds == "range" else ("ci_low", "ci_high")
        return {"value": self.value, low: self.low, high: self.high, "verdict": self.verdict}


@dataclass
class Estimate:
    """A point value with its bootstrap replicates (None when there is no noise estimate)."""

    point: float | None
    boot: np.ndarray | None
    n: int  # timed samples behind it
    repeats: int


def seed_for(key: str) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)


def bootstrap_medians(samples: list[np.ndarray], n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Pooled median of each two-level resample: repeats with replacement, then steps within each repeat."""
    reps = len(samples)
    pick = rng.integers(reps, size=(n_boot, reps))
    lengths = {len(s) for s in samples}
    if len(lengths) == 1:
        n = lengths.pop()
        matrix = np.stack(samples)
        out = np.empty(n_boot)
        chunk = max(1, 4_000_000 // max(1, reps * n))
        for start in range(0, n_boot, chunk):
            stop = min(n_boot, start + chunk)
            steps = rng.integers(n, size=(stop - start, reps, n))
            values = matrix[pick[start:stop, :, None], steps]
            out[start:stop] = np.median(values.reshape(stop - start, -1), axis=1)
        return out
    out = np.empty(n_boot)
    for b in range(n_boot):
        pooled = [samples[i][rng.integers(len(samples[i]), size=len(samples[i]))] for i in pick[b]]
        out[b] = np.median(np.concatenate(pooled))
    return out


def throughput(samples_ms: list, tokens_per_step: float | None, key: str = "", n_boot: int = N_BOOT) -> Estimate:
    """tokens/s from per-repeat lists of timed step times (ms), with bootstrap replicates."""
    samples = [np.asarray(s, dtype=float) for s in samples_ms if len(s)]
    n = sum(len(s) for s in samples)
    if not n or not tokens_per_step:
        return Estimate(None, None, n, len(samples))
    point = tokens_per_step / (float(np.median(np.concatenate(samples))) / 1000.0)
    if n < MIN_SAMPLES:
        return Estimate(point, None, n, len(samples))
    medians = bootstrap_medians(samples, n_boot, np.random.default_rng(seed_for(key)))
    return Estimate(point, tokens_per_step / (medians / 1000.0), n, len(samples))


def _verdict(value: float, low: float, high: float, floor: float) -> str:
    return BEYOND if (low > 0 or high < 0) and abs(value) >= floor else WITHIN


def _no_estimate(*estimates: Estimate) -> str | None:
    if any(e.n <= 1 for e in estimates):
        return SINGLE
    if any(e.boot is None for e in estimates):
        return FEW
    return None


def ratio(a: Estimate, b: Estimate, floor: float = NOISE_FLOOR) -> tuple[Delta, np.ndarray | None]:
    """b relative to a (b/a - 1), and its replicates (for differences of effects)."""
    if a.point is None or b.point is None or a.point == 0:
        return Delta(None), None
    value = b.point / a.point - 1.0
    missing = _no_estimate(a, b)
    if missing:
        return Delta(value, verdict=missing), None
    boot = b.boot / a.boot - 1.0
    return interval(value, boot, floor), boot


def interval(value: float, boot: np.ndarray, floor: float = NOISE_FLOOR) -> Delta:
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, high = (float(x) for x in np.percentile(boot, [tail, 100 - tail]))
    return Delta(value, low, high, _verdict(value, low, high, floor))


def combine(parts: list[tuple[float, tuple[Delta, np.ndarray | None]]], floor: float = NOISE_FLOOR) -> Delta:
    """A weighted sum of effects (e.g. a 2x2 factor: 0.5*(e22 - e12) + 0.5*(e21 - e11)), in absolute units."""
    if any(d.value is None for _, (d, _b) in parts):
        return Delta(None)
    value = sum(w * d.value for w, (d, _b) in parts)
    verdicts = [d.verdict for _, (d, _b) in parts]
    if any(b is None for _, (_d, b) in parts):
        return Delta(value, verdict=SINGLE if SINGLE in verdicts else FEW)
    boot = sum(w * b for w, (_d, b) in parts)
    return interval(value, boot, floor)


def counter(a_values: list, b_values: list, floor: float = NOISE_FLOOR) -> Delta:
    """Memory-like counters, one value per run: median ratio, range-overlap rule (needs 2+ runs a side)."""
    a = [float(v) for v in a_values if v is not None]
    b = [float(v) for v in b_values if v is not None]
    if not a or not b or min(a) <= 0:
        return Delta(None)
    value = float(np.median(b) / np.median(a) - 1.0)
    if len(a) < 2 or len(b) < 2:
        return Delta(value, verdict=ONE_RUN, bounds="range")
    low, high = min(b) / max(a) - 1.0, max(b) / min(a) - 1.0
    return Delta(value, low, high, _verdict(value, low, high, floor), bounds="range")


def geomean(parts: list[tuple[Delta, np.ndarray | None]], floor: float = NOISE_FLOOR) -> Delta:
    """The geometric mean of several ratios (each a Delta b/a - 1 with its replicates): exp(mean(log(1 + d))) - 1.
    Its interval comes from the replicates combined replicate by replicate (every side bootstrapped on its own);
    a part without replicates leaves the mean without a noise estimate."""
    values = [d.value for d, _b in parts]
    if not parts or any(v is None or v <= -1 for v in values):
        return Delta(None)
    value = float(np.exp(np.mean(np.log1p(values))) - 1.0)
    boots = [b for _d, b in parts]
    if any(b is None for b in boots):
        verdicts = [d.verdict for d, _b in parts]
        return Delta(value, verdict=SINGLE if SINGLE in verdicts else FEW)
    boot = np.exp(np.mean(np.log1p(np.stack(boots)), axis=0)) - 1.0
    return interval(value, boot, floor)
