"""explain.power: NVML power, SM clock, clock-event ("throttle") reasons and energy over the timed steps.

PowerSampler reads the GPU (through harness/provenance/nvml.py) in a background thread while the timed steps run;
summarize_power() keeps the samples of the timed window and decides whether the clocks were throttled.
No torch import (the device is only asked for its type).
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import TYPE_CHECKING

from harness.evidence import NOT_ON_CPU, unavailable
from harness.provenance import nvml

if TYPE_CHECKING:
    import torch

# NVML clocks-event ("throttle") reason bits (nvml.h nvmlClocksEventReason*, formerly ClocksThrottleReason*).
THROTTLE_BITS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# Reasons that mean the clock was held below what the workload asked for (idle, app clocks, sync boost and
# display do not).
THROTTLING = {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
SLOWDOWN = THROTTLING - {"sw_power_cap"}  # these mean throttled on their own
CLOCK_DEFICIT = 0.02  # a power cap counts as throttling once the mean SM clock is this far below the maximum


def throttle_reason_names(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit]


class PowerSampler:
    """NVML samples (power, SM clock, clock-event reasons, energy counter) in a background thread, ~10 Hz.

    start() before the timed loop and stop() right after its one synchronize; summary() then keeps the
    samples of the last window_s seconds (the GPU time of the timed steps: they end when the sync returns),
    so compilation and warm-up steps do not count. Does nothing, with a reason, on CPU or without NVML."""

    def __init__(self, device: torch.device, interval_s: float = 0.1):
        self.device = device
        self.interval_s = interval_s
        self.samples: list[dict] = []
        self.reason: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._gpu: nvml.Device | None = None
        self.max_sm_clock_mhz: int | None = None

    def start(self) -> PowerSampler:
        if self.device.type != "cuda":
            self.reason = f"{NOT_ON_CPU}: NVML reads NVIDIA GPUs only"
            return self
        try:
            self._gpu = nvml.Device(nvml.torch_device_index(self.device))
        except ImportError:
            self.reason = "nvidia-ml-py (pynvml) is not installed"
            return self
        except Exception as exc:  # noqa: BLE001 -- best effort: a missing fact must not break the run
            self.reason = f"NVML unavailable: {type(exc).__name__}: {exc}"
            return self
        self.max_sm_clock_mhz = self._read(self._gpu.max_sm_clock_mhz)
        self._sample()
        self._thread = threading.Thread(target=self._run, name="power-sampler", daemon=True)
        self._thread.start()
        return self

    @staticmethod
    def _read(reading):
        try:
            return reading()
        except Exception:  # noqa: BLE001 -- a field this GPU/driver does not support stays None
            return None

    def _sample(self) -> None:
        gpu = self._gpu
        power_mw = self._read(gpu.power_mw)
        self.samples.append({
            "t": time.monotonic(),
            "power_w": power_mw / 1000.0 if power_mw is not None else None,
            "sm_clock_mhz": self._read(gpu.sm_clock_mhz),
            "reasons": self._read(gpu.clock_event_reasons),
            "energy_mj": self._read(gpu.energy_mj),
        })

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._sample()  # the window's end: right after the loop's synchronize

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def summary(self, window_s: float | None = None, tokens: int | None = None) -> dict:
        if self.reason:
            return unavailable(self.reason)
        return summarize_power(self.samples, self.interval_s, window_s, tokens, self.max_sm_clock_mhz)


def _energy(chosen: list[dict], powers: list, duration_s: float) -> tuple[float | None, str | None]:
    """(joules over the window, how): NVML's energy counter where both ends have it, else mean power x time."""
    first, last = chosen[0], chosen[-1]
    if first["energy_mj"] is not None and last["energy_mj"] is not None and last["t"] > first["t"]:
        rate_w = (last["energy_mj"] - first["energy_mj"]) / 1000.0 / (last["t"] - first["t"])
        return rate_w * duration_s, "nvml-energy-counter"
    if powers:
        return statistics.fmean(powers) * duration_s, "mean-power-x-time"
    return None, None


def _reason_share(masks: list) -> dict:
    """Throttle reason -> the fraction of the samples that had it."""
    counts: dict = {}
    for mask in masks:
        for name in throttle_reason_names(mask):
            counts[name] = counts.get(name, 0) + 1
    return {k: v / len(masks) for k, v in counts.items()}


def summarize_power(samples: list[dict], interval_s: float, window_s: float | None, tokens: int | None,
                    max_sm_clock_mhz: int | None = None) -> dict:
    """Power/clock summary of the samples in the last window_s seconds (all samples when window_s is None).

    throttled: the clocks really fell. A power-cap reason alone is not enough (on an H100 it is raised while
    the SM clock stays at 1965-1975 of 1980 MHz): the mean SM clock must be at least CLOCK_DEFICIT below the
    device's maximum; a thermal or hardware slowdown reason counts on its own."""
    if not samples:
        return unavailable("no NVML samples were taken")
    end = samples[-1]["t"]
    chosen = [s for s in samples if window_s is None or s["t"] >= end - window_s]
    window = "timed steps" if window_s is not None else "whole sampling"
    if len(chosen) < 2:  # the timed steps were shorter than the sampling interval
        chosen = samples[-2:]
        window = "last samples (timed steps shorter than the sampling interval)"
    powers = [s["power_w"] for s in chosen if s["power_w"] is not None]
    clocks = [s["sm_clock_mhz"] for s in chosen if s["sm_clock_mhz"] is not None]
    masks = [s["reasons"] for s in chosen if s["reasons"] is not None]
    duration_s = window_s if window_s is not None else chosen[-1]["t"] - chosen[0]["t"]
    joules, method = _energy(chosen, powers, duration_s)
    reason_share = _reason_share(masks)
    mean_clock = statistics.fmean(clocks) if clocks else None
    deficit = 1 - mean_clock / max_sm_clock_mhz if (mean_clock is not None and max_sm_clock_mhz) else None
    clocks_fell = deficit is not None and deficit >= CLOCK_DEFICIT
    capped = any(k in THROTTLING for k in reason_share)
    throttled = any(k in SLOWDOWN for k in reason_share) or (capped and clocks_fell)
    if capped and not throttled and deficit is None:
        throttled = None  # a power cap was raised, and without the maximum clock it cannot be told whether clocks fell
    return {
        "available": bool(powers),
        "reason": None if powers else "NVML returned no power readings",
        "samples": len(chosen),
        "samples_total": len(samples),
        "interval_s": interval_s,
        "window": window,
        "window_s": duration_s,
        "mean_w": statistics.fmean(powers) if powers else None,
        "peak_w": max(powers) if powers else None,
        "joules": joules,
        "joules_method": method,
        "joules_per_token": joules / tokens if joules is not None and tokens else None,
        "sm_clock_mhz_mean": mean_clock,
        "sm_clock_mhz_min": min(clocks) if clocks else None,
        "sm_clock_mhz_max": max_sm_clock_mhz,  # the device's maximum (NVML), what the deficit is measured against
        "clock_deficit": deficit,  # 1 - mean / max
        "throttled_rule": (f"a thermal/hardware slowdown reason, or a throttle reason with the mean SM clock "
                           f"{CLOCK_DEFICIT:.0%}+ below the maximum"),
        "throttle_reasons": sorted(reason_share),
        "throttle_reason_share": reason_share,  # fraction of samples with each reason
        "throttled": throttled,
    }
