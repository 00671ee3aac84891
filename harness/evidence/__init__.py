"""Evidence for why a measurement is what it is: record["explain"] (docs/explain.md documents every field).

One collector per file; each writes one part of record["explain"]:

  calibration   the GEMM peak measured on the device before the model exists (read by mfu), and the
                dtype the run's GEMMs compute in
  profiling     explain.kernels: torch.profiler over a few steps *after* the timed ones: per-kernel time,
                categories, every GEMM with its shapes, the lm_head GEMMs, the attention kernels, the SDPA backend
  libraries     explain.libraries: the libcublas / libcublasLt / libcudnn / libnccl files this process
                mapped (/proc/self/maps), with versions
  memory        explain.memory_split: tensors vs allocator cache vs outside the allocator
  power         explain.power: NVML sampled in a background thread during the timed steps
  mfu           explain.mfu (and summary.mfu): nanoGPT FLOPs/token against a datasheet peak and the measured one
  capture       capture(): the one call the worker makes after the timed steps, in the order that keeps
                the readings honest

Every part is a dict with "available" and "reason" (unavailable() below); a failure in one part never
loses the others or the measurement (guarded() below). Torch-version differences go through
gpt/torch_compat.py, NVML through harness/provenance/nvml.py. Two torch-free rule tables live here too, read by the
collectors and by compare/report: kernels.py (kernel names -> category and precision) and gpu_peaks.py
(datasheet peaks). This file imports no torch.
"""

from __future__ import annotations

NOT_ON_CPU = "not available on cpu"


def unavailable(reason: str, **fields) -> dict:
    return {"available": False, "reason": reason, **fields}


def guarded(fn, *args, **kwargs) -> dict:
    """fn(*args) or, if it raises, an unavailable part whose reason is the error."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 -- evidence is best effort: the measurement itself must survive
        return unavailable(f"error: {type(exc).__name__}: {exc}".splitlines()[0][:500])
