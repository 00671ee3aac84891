"""How much runs of one configuration differ on each device, and how much invocations do: the spreads every
interval of harness.analysis.stats rests on, estimated once per dataset, per device and metric (tokens/s, and each
memory metric: peak RSS is not a constant).

A device's cells are its comparable configurations (workload and flags) run by each env, with their runs (and its
calibration runs: records of `python -m harness.calibrate`, plan CALIBRATION_PLAN, an A/A measurement of the machine
used only here, never a cell of a table). From them, fit() makes a noise_model.DeviceSpread:

  within   a configuration's spread: its cells' runs about their invocations' means, pooled across its envs (one
           configuration is taken to be alike in noise whichever build runs it). Are the configurations alike?
           Bartlett's test (ALIKE_LEVEL): alike, one spread pooled over them all (sum of squares / sum of df), and
           one of them clearly noisier than the rest (GUARD_LEVEL, one-sided F) keeps its own spread while still
           counting in the pool; not alike, each keeps its own, with its own df (with few runs a noisy
           configuration can pass for a quiet one, so no split into groups is safe). A configuration without two
           runs of one invocation borrows the pool only where 2+ configurations showed it, alike.
  between  invocations of one configuration (two harness processes, two GPU calls) differ by an offset on top:
           its variance from the configurations (and calibration sets) with runs of several invocations, by the
           one-way random-effects method of moments, kept as its parts (the mean square between invocations less
           the run-to-run variance inside it) so an interval counts each estimate once, with its df. Measured from
           MIN_BETWEEN_DF degrees of freedom (5 invocations of one configuration); None below: a delta between
           two invocations then says it is not measured.
  modes    (peak memory) a configuration whose runs in one cell peak at two levels (noise_model.modes): its deltas are
           "two modes", never beyond noise.

Every sum is math.fsum: the same records in any order, under any names, give the same spreads to the bit.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from harness.analysis import cell_values, noise_model
from harness.analysis.student import chi2_tail, incomplete_beta
from harness.record.view import RecordView

CALIBRATION_PLAN = "calibrate"  # the plan name harness.calibrate writes its records under
ALIKE_LEVEL = 0.05  # configurations whose spreads differ at this level (Bartlett's test) are not pooled as one
# A configuration of the pool whose own spread is larger than the rest's at this level (one-sided F) keeps its own:
# with few runs a noisy configuration can pass for a quiet one, and the pool's spread would then be too small for it.
GUARD_LEVEL = 0.3
# An offset between invocations counts as measured from this many degrees of freedom (5 invocations of one
# configuration, or 3 each of two): with fewer, t for it is so wide (63.7 at 1 df) that every delta it enters says
# nothing, so it is said to be not measured instead, and what would measure it.
MIN_BETWEEN_DF = 4
NEGLIGIBLE_SD = 1e-4  # a relative spread below 0.01%: too small to matter to any verdict (the floor is 1%)


@dataclass
class DeviceNoise:
    """The spreads of one device: tokens/s, and peak memory per metric."""

    device: str
    tokens: noise_model.DeviceSpread | None = None
    memory: dict = field(default_factory=dict)  # memory metric -> noise_model.DeviceSpread
    calibration_runs: int = 0

    def memory_noise(self, metric: str) -> noise_model.DeviceSpread | None:
        return self.memory.get(metric)


def run_tokens_per_s(r: RecordView) -> float | None:
    """One run's tokens/s by the one rule (cell_values.rate), from the median its view keeps."""
    return cell_values.rate(r.timed_median, r.tokens_per_step)


def run_memory(r: RecordView) -> tuple[str, float | None]:
    """(metric, one run's peak) by RecordView's rule."""
    value, metric = r.peak_memory()
    return metric, value


def fit(configs: dict, calibration_runs: int = 0, find_modes: bool = False) -> noise_model.DeviceSpread | None:
    """One device's spreads for one metric from its configurations ({configuration: [CellRuns of its cells]}); None
    where no configuration has 2 runs of one invocation (nor, in older records, runs of several). find_modes (a
    per-run counter: peak memory): the configurations a cell of which peaked at two levels (noise_model.modes)."""
    fitted = _fit(configs, calibration_runs)
    if fitted is None or not find_modes:
        return fitted
    # a configuration's cells in any order: the lowest pair of levels found, so no order of cells picks another
    found = {c: m for c, m in ((c, min(filter(None, map(noise_model.modes, cells)), default=None)) for c, cells in configs.items())
             if m is not None}
    return dataclasses.replace(fitted, modes=found) if found else fitted


def _fit(configs: dict, calibration_runs: int) -> noise_model.DeviceSpread | None:
    own = {c: _spread(cells) for c, cells in configs.items()}
    own = {c: s for c, s in own.items() if s is not None}
    if not own:
        return _as_repeats(configs, calibration_runs)
    if len(own) >= 2 and _bartlett([_told(s) for s in own.values()]) < ALIKE_LEVEL:
        # not alike in noise: each configuration keeps its own spread (no pool: with few runs a noisy one can pass
        # for a quiet one, and no split of them into groups is then safe)
        members, apart, alike = frozenset(), dict(own), False
        pooled = None
    else:
        members, alike = frozenset(own), True
        pooled = _pool(list(own.values()))
        # One clearly noisier than the rest keeps its own, and still counts in the pool: taking it out would leave
        # the pool's spread too small for the others (it is chosen for being larger, not for being different).
        apart = {c: own[c] for c in members if len(members) > 1
                 and _larger(_told(own[c]), _pool([_told(own[o]) for o in members if o != c])) < GUARD_LEVEL}
    runs = sum(cell.n for c in own for cell in configs[c] if cell.df_within >= 1)
    between = _between(configs, pooled, apart)
    return noise_model.DeviceSpread(pooled, members, apart, alike, runs, between, calibration_runs)


def _told(spread: noise_model.Spread) -> noise_model.Spread:
    """A spread as the alike tests see it: below NEGLIGIBLE_SD, as NEGLIGIBLE_SD (a GPU's peak memory, the same to
    the byte in one configuration and a few bytes apart in another, is alike in noise for every verdict)."""
    return spread if spread.var >= NEGLIGIBLE_SD ** 2 else noise_model.Spread(NEGLIGIBLE_SD ** 2, spread.df)


def _spread(cells: list[noise_model.CellRuns]) -> noise_model.Spread | None:
    """A configuration's own spread: its cells' squared deviations about their invocations' means, pooled."""
    df = sum(c.df_within for c in cells)
    return noise_model.Spread(math.fsum(c.ss_within for c in cells) / df, df) if df else None


def _pool(spreads: list[noise_model.Spread]) -> noise_model.Spread:
    df = sum(s.df for s in spreads)
    return noise_model.Spread(math.fsum(s.var * s.df for s in spreads) / df, df)


def _bartlett(spreads: list[noise_model.Spread]) -> float:
    """The p-value of Bartlett's test that these variances are equal (chi-square, k - 1 df)."""
    pooled = _pool(spreads)
    if all(s.var == pooled.var for s in spreads):
        return 1.0
    if any(s.var == 0.0 for s in spreads):
        return 0.0  # identical runs beside varying ones
    k = len(spreads)
    m = pooled.df * math.log(pooled.var) - math.fsum(s.df * math.log(s.var) for s in spreads)
    c = 1 + (math.fsum(1 / s.df for s in spreads) - 1 / pooled.df) / (3 * (k - 1))
    return chi2_tail(m / c, k - 1)


def _larger(one: noise_model.Spread, rest: noise_model.Spread) -> float:
    """The one-sided p-value of the F test that one configuration's variance is no larger than the rest's."""
    if one.var <= rest.var:
        return 1.0
    if rest.var == 0.0:
        return 0.0
    f = one.var / rest.var
    return 1.0 - incomplete_beta(one.df / 2, rest.df / 2, one.df * f / (one.df * f + rest.df))


def _as_repeats(configs: dict, calibration_runs: int) -> noise_model.DeviceSpread | None:
    """A device whose configurations have no two runs of one invocation, but runs of one configuration from several
    (older records: one run per folder): those runs taken as repeats, so their scatter (the run-to-run spread and
    the invocations' offsets together) is the spread; the offset alone is then not measured (between None)."""
    merged = {c: [noise_model.CellRuns(cell.logs, (None,) * cell.n, cell.values) for cell in cells] for c, cells in configs.items()}
    merged = {c: cells for c, cells in merged.items() if any(cell.n >= 2 for cell in cells)}
    fitted = _fit(merged, calibration_runs) if merged else None
    return None if fitted is None else dataclasses.replace(fitted, between=None)


def _between(configs: dict, pooled: noise_model.Spread | None, apart: dict) -> noise_model.Between | None:
    """The variance of an invocation's offset, from the configurations with runs of 2+ invocations (one-way random
    effects, method of moments): sum (k - 1) * (mean square between its invocations - its run-to-run variance) /
    sum (k - 1) * n0 (n0: the runs an invocation counts for). As parts: the pooled mean square (k - 1 df a cell),
    less each configuration's run-to-run spread. None where it would rest on under MIN_BETWEEN_DF degrees of
    freedom (invocations beyond the first, over the configurations that several invocations ran)."""
    squares, weight, minus, df, n_configs = [], [], {}, 0, 0
    per_config = []  # each configuration's variance of an invocation's mean (its mean square / n0)
    for c, cells in configs.items():
        spread = apart.get(c, pooled)
        c_squares, c_weight, c_df = [], [], 0
        for cell in cells:
            groups = list(cell.by_invocation.values())
            k = len(groups)
            if k < 2 or spread is None:
                continue
            mean = cell.mean
            c_squares.append(math.fsum(len(xs) * (math.fsum(xs) / len(xs) - mean) ** 2 for xs in groups))
            c_weight.append(cell.n - math.fsum(len(xs) ** 2 for xs in groups) / cell.n)  # (k - 1) * n0
            minus.setdefault(spread, []).append(k - 1)
            c_df += k - 1
        if c_df:
            n_configs += 1
            squares += c_squares
            weight += c_weight
            df += c_df
            per_config.append(noise_model.Spread(math.fsum(c_squares) / math.fsum(c_weight), c_df))
    if df < MIN_BETWEEN_DF:
        return None
    w = math.fsum(weight)
    mean_square = noise_model.Spread(math.fsum(squares) / w, df)
    parts = [(mean_square, 1.0)] + [(s, -math.fsum(ks) / w) for s, ks in minus.items()]
    # whether a configuration with no run-to-run spread of its own may be judged by it: only where 2+ configurations
    # show how invocations differ, alike (one quiet configuration says nothing of a noisy one's invocations)
    lendable = n_configs >= 2 and _bartlett([_told(s) for s in per_config]) >= ALIKE_LEVEL
    return noise_model.Between(tuple(parts), n_configs, w / df, lendable)


def estimate(cells: list[tuple[tuple, list[tuple[RecordView, object]]]], device: str,
             calibration_runs: int = 0) -> DeviceNoise:
    """The spreads of one device from its cells (each: its configuration, and the (run, invocation) pairs of one
    comparable cell)."""
    tokens: dict[tuple, list[noise_model.CellRuns]] = {}
    by_metric: dict[str, dict[tuple, list[noise_model.CellRuns]]] = {}
    for config, runs in cells:
        tokens.setdefault(config, []).append(
            noise_model.CellRuns.of([run_tokens_per_s(r) for r, _i in runs], [i for _r, i in runs]))
        values: dict[str, tuple[list, list]] = {}
        for r, inv in runs:
            metric, value = run_memory(r)
            vs, invs = values.setdefault(metric, ([], []))
            vs.append(value)
            invs.append(inv)
        for metric, (vs, invs) in values.items():
            by_metric.setdefault(metric, {}).setdefault(config, []).append(noise_model.CellRuns.of(vs, invs))
    memory = {m: n for m, n in ((m, fit(cs, calibration_runs, find_modes=True)) for m, cs in by_metric.items())
              if n is not None}
    return DeviceNoise(device, fit(tokens, calibration_runs), memory, calibration_runs)


def by_device(groups: list, calibration: list[tuple[RecordView, object]]) -> dict[str, DeviceNoise]:
    """device label -> its DeviceNoise, from the dataset's measured groups and calibration runs ((record, invocation)
    pairs); each group gets its device's (group.noise) before any of its estimates is computed."""
    cells: dict[str, list] = {}
    for g in groups:
        cells.setdefault(g.gpu, []).append((g.set_key, list(zip(g.records, g.invocations, strict=True))))
    calibration_cells: dict[tuple, list[tuple[RecordView, object]]] = {}
    for r, inv in calibration:
        calibration_cells.setdefault((r.device_label, r.set_key, r.env, r.torch_version), []).append((r, inv))
    counts: dict[str, int] = {}
    for (device, config, _env, _torch), runs in calibration_cells.items():
        cells.setdefault(device, []).append((config, runs))
        counts[device] = counts.get(device, 0) + len(runs)
    out = {device: estimate(cs, device, counts.get(device, 0)) for device, cs in cells.items()}
    for g in groups:
        g.noise = out.get(g.gpu)
    return out
