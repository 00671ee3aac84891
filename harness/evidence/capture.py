"""capture(): record["explain"], the one call the worker makes after the timed steps and their readout."""

from __future__ import annotations

from harness.evidence import guarded, libraries, memory, mfu, profiling, unavailable
from harness.evidence.power import PowerSampler


def capture(trainer, config, summary: dict, timed_ms: list[float], sampler: PowerSampler | None,
            calibration: dict | None, run_dtype: str) -> dict:
    """record["explain"]. Order: libraries and memory first (memory before profiling changes the peaks),
    power from the samples already taken, then the profiled steps, then MFU."""
    device = trainer.device
    timed_s = sum(timed_ms) / 1000.0 if timed_ms else None
    tokens = config.tokens_per_step * len(timed_ms) if timed_ms else None
    explain = {
        "libraries": guarded(libraries.loaded_libraries, device.type),
        "memory_split": guarded(memory.memory_split, device),
        "power": guarded(sampler.summary, timed_s, tokens) if sampler else unavailable("not sampled"),
    }
    explain["kernels"] = guarded(profiling.profile_kernels, trainer, config.profile_steps, run_dtype)
    explain["mfu"] = guarded(mfu.model_flops_utilisation, trainer.model, summary.get("tokens_per_s"), device, run_dtype, calibration)
    return {k: explain[k] for k in ("kernels", "libraries", "memory_split", "power", "mfu")}
