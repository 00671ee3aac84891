"""Known-truth simulation of the noise rule (harness.analysis.stats, harness.analysis.noise): synthetic per-run values
with a set effect and spread, judged by the very functions harness.compare uses (noise.fit per device label,
cell_values.memory's estimate of a cell from per-run values, stats.ratio per rung, stats.geomean over rungs for the
verdict), and counted: how often a build is called different from itself (false positives, at a stated 1%), and how
often a real change is found (power).

A dataset is one device (or two device labels) with RUNGS rungs run by two envs; each env's runs are one invocation
(one harness process), whose offset (sd `offset`) moves all its runs alike. Settings:

  spread      run-to-run sd of log values: 1%, 2%, 5%, 10%, 25%
  runs        runs a side: 1, 2, 3, 5
  calibration none, or harness.calibrate's: 5 invocations of 3 runs of one rung (so the offset is measured)
  labels      shared (both envs on one device label: one spread) or separate (one label each)
  mixed       half the rungs quiet (2%) and half noisy (25%) on the same device
  offset      0 or 3% between invocations

  python scripts/noise_simulation.py                 # every setting, 2,000 datasets each (about 10 minutes)
  python scripts/noise_simulation.py --datasets 200  # quicker, coarser
  python scripts/noise_simulation.py --json out.json # the table as data too

Deterministic: a fixed seed per setting (numpy's default_rng).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import argtypes
from harness.analysis import cell_values, noise, noise_model, stats

RUNGS = 6
QUIET, NOISY = 0.02, 0.25
CALIBRATION = (5, 3)  # invocations, runs each: an offset between invocations counts as measured from 5


@dataclass(frozen=True)
class Setting:
    spread: float
    runs: int
    calibration: bool
    shared: bool
    mixed: bool = False
    offset: float = 0.0
    effect: float = 0.0  # the true change of env b on every rung (log)


@dataclass
class Outcome:
    setting: dict
    rung_deltas: int
    rung_beyond: int
    quiet_deltas: int
    quiet_beyond: int
    noisy_deltas: int
    noisy_beyond: int
    verdicts: int
    verdict_beyond: int
    unknown_between: int  # deltas that said the offset between invocations is not measured

    @property
    def rung_rate(self) -> float:
        return self.rung_beyond / self.rung_deltas if self.rung_deltas else 0.0

    @property
    def verdict_rate(self) -> float:
        return self.verdict_beyond / self.verdicts if self.verdicts else 0.0


def spreads(s: Setting) -> list[float]:
    return [QUIET if i % 2 == 0 else NOISY for i in range(RUNGS)] if s.mixed else [s.spread] * RUNGS


def one_dataset(s: Setting, rng: np.random.Generator) -> tuple[list, list[bool], stats.Delta]:
    """(per-rung deltas, which rungs are quiet, the verdict's geometric mean)."""
    sds = spreads(s)
    sides = {}
    for env, shift in (("a", 0.0), ("b", s.effect)):
        offset = rng.normal(0.0, s.offset) if s.offset else 0.0
        sides[env] = [list(np.exp(10.0 + shift + offset + rng.normal(0.0, sd, s.runs))) for sd in sds]
    cal_cells = []  # the calibration's rung is rung 0
    if s.calibration:
        values, invs = [], []
        for k in range(CALIBRATION[0]):
            offset = rng.normal(0.0, s.offset) if s.offset else 0.0
            values += list(np.exp(10.0 + offset + rng.normal(0.0, sds[0], CALIBRATION[1])))
            invs += [f"cal{k}"] * CALIBRATION[1]
        cal_cells.append(noise_model.CellRuns.of(values, invs))
    cells = {env: [noise_model.CellRuns.of(v, [env] * len(v)) for v in vs] for env, vs in sides.items()}
    def configs(*envs):
        out = {rung: [cells[env][rung] for env in envs] for rung in range(RUNGS)}
        out[0] = out[0] + cal_cells if "a" in envs else out[0]
        return out

    if s.shared:
        dev = noise.fit(configs("a", "b"))
        devices = {"a": dev, "b": dev}
    else:  # each env on its own label; the calibration on the first one's
        devices = {"a": noise.fit(configs("a")), "b": noise.fit(configs("b"))}
    est = {env: [cell_values.memory(v, devices[env], [env] * len(v), config=rung) for rung, v in enumerate(vs)]
           for env, vs in sides.items()}
    parts = [stats.ratio(a, b) for a, b in zip(est["a"], est["b"], strict=True)]
    return [d for d, _f in parts], [sd == QUIET for sd in sds], stats.geomean(parts)


def run(s: Setting, datasets: int, seed: int) -> Outcome:
    rng = np.random.default_rng(seed)
    out = Outcome(asdict(s), 0, 0, 0, 0, 0, 0, 0, 0, 0)
    for _ in range(datasets):
        deltas, quiet, verdict = one_dataset(s, rng)
        for d, q in zip(deltas, quiet, strict=True):
            out.rung_deltas += 1
            out.rung_beyond += d.beyond
            out.unknown_between += d.between_unknown
            if s.mixed:
                if q:
                    out.quiet_deltas += 1
                    out.quiet_beyond += d.beyond
                else:
                    out.noisy_deltas += 1
                    out.noisy_beyond += d.beyond
        out.verdicts += 1
        out.verdict_beyond += verdict.beyond
    return out


def settings() -> list[Setting]:
    out = []
    for spread, runs, calibration, shared in itertools.product((0.01, 0.02, 0.05, 0.10, 0.25), (1, 2, 3, 5),
                                                               (False, True), (True, False)):
        out.append(Setting(spread, runs, calibration, shared))
    for runs, calibration, shared in itertools.product((1, 2, 3, 5), (False, True), (True, False)):
        out.append(Setting(0.0, runs, calibration, shared, mixed=True))
    for spread, runs, shared in itertools.product((0.01, 0.05, 0.25), (1, 2, 3, 5), (True, False)):
        out.append(Setting(spread, runs, True, shared, offset=0.03))
    return out


def power_settings() -> list[Setting]:
    """A 5% change at 2% spread and 5 runs a side: alone, and on a device shared with noisy cells."""
    return [Setting(0.02, 5, False, True, effect=math.log(1.05)),
            Setting(0.0, 5, False, True, mixed=True, effect=math.log(1.05))]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", type=argtypes.whole(1, 1_000_000, "number of datasets"), default=2000,
                   help="datasets per setting (default 2000)")
    p.add_argument("--json", type=argtypes.path_arg, help="also write the outcomes here")
    args = p.parse_args(argv)
    rows = []
    print(f"{'spread':>7} {'runs':>4} {'calib':>5} {'labels':>8} {'offset':>6} {'effect':>6}  "
          f"{'rung beyond':>16} {'verdict beyond':>15} {'quiet':>13} {'noisy':>13} {'unmeasured':>10}")
    for i, s in enumerate(settings() + power_settings()):
        o = run(s, args.datasets, seed=1000 + i)
        rows.append({**asdict(o), "rung_rate": o.rung_rate, "verdict_rate": o.verdict_rate})
        spread = "mixed" if s.mixed else f"{s.spread:.0%}"
        quiet = f"{o.quiet_beyond}/{o.quiet_deltas}" if s.mixed else "-"
        noisy = f"{o.noisy_beyond}/{o.noisy_deltas}" if s.mixed else "-"
        print(f"{spread:>7} {s.runs:>4} {'yes' if s.calibration else 'no':>5} {'shared' if s.shared else 'separate':>8} "
              f"{s.offset:>6.0%} {math.expm1(s.effect):>6.0%}  {o.rung_beyond:>5}/{o.rung_deltas:<5} {o.rung_rate:>5.2%} "
              f"{o.verdict_beyond:>4}/{o.verdicts:<4} {o.verdict_rate:>5.1%} {quiet:>13} {noisy:>13} "
              f"{o.unknown_between:>10}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
