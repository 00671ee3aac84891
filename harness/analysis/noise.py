"""How much runs of one configuration differ on each device: the run-to-run spread that every interval of
harness.analysis.stats rests on, estimated once per dataset.

For each device label, tokens/s: the spread pooled over every comparable cell of that device with 2+ runs, and over
its calibration runs (records of `python -m harness.calibrate`, plan CALIBRATION_PLAN: an A/A measurement of the
machine, used only here, never a cell of a table). Memory the same, per memory metric (peak RSS is not a constant).
A cell of one run borrows its device's spread; a device with no estimate leaves a one-run cell without one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.analysis import stats
from harness.record.view import RecordView

CALIBRATION_PLAN = "calibrate"  # the plan name harness.calibrate writes its records under


@dataclass
class DeviceNoise:
    """The run-to-run spreads of one device: tokens/s, and peak memory per metric."""

    device: str
    tokens: stats.Noise | None = None
    memory: dict = field(default_factory=dict)  # memory metric -> stats.Noise
    calibration_runs: int = 0

    def memory_noise(self, metric: str) -> stats.Noise | None:
        return self.memory.get(metric)


def run_tokens_per_s(r: RecordView) -> float | None:
    """One run's tokens/s by the one rule (stats.run_throughput), from the median its view keeps."""
    return stats.rate(r.timed_median, r.tokens_per_step)


def run_memory(r: RecordView) -> tuple[str, float | None]:
    """(metric, one run's peak) by RecordView's rule."""
    value, metric = r.peak_memory()
    return metric, value


def estimate(cells: list[list[RecordView]], device: str, calibration_runs: int = 0) -> DeviceNoise:
    """The spreads of one device from its cells (each: the runs of one comparable configuration)."""
    tokens = [[run_tokens_per_s(r) for r in runs] for runs in cells]
    by_metric: dict[str, list[list]] = {}
    for runs in cells:
        values: dict[str, list] = {}
        for r in runs:
            metric, value = run_memory(r)
            values.setdefault(metric, []).append(value)
        for metric, vs in values.items():
            by_metric.setdefault(metric, []).append(vs)
    memory = {m: n for m, n in ((m, stats.pooled_noise(vs)) for m, vs in by_metric.items()) if n is not None}
    return DeviceNoise(device, stats.pooled_noise(tokens), memory, calibration_runs)


def by_device(groups: list, calibration: list[RecordView]) -> dict[str, DeviceNoise]:
    """device label -> its DeviceNoise, from the dataset's measured groups and calibration records; each group gets
    its device's (group.noise) before any of its estimates is computed."""
    cells: dict[str, list[list[RecordView]]] = {}
    for g in groups:
        cells.setdefault(g.gpu, []).append(list(g.records))
    calibration_cells: dict[tuple, list[RecordView]] = {}
    for r in calibration:
        calibration_cells.setdefault((r.device_label, *r.set_key, r.env, r.torch_version), []).append(r)
    counts: dict[str, int] = {}
    for key, runs in calibration_cells.items():
        cells.setdefault(key[0], []).append(runs)
        counts[key[0]] = counts.get(key[0], 0) + len(runs)
    out = {device: estimate(cs, device, counts.get(device, 0)) for device, cs in cells.items()}
    for g in groups:
        g.noise = out.get(g.gpu)
    return out
