"""NVML (nvidia-ml-py), set up in one place: which device, and the facts the harness reads from it.

The NVML index of a device differs from torch's CUDA ordinal under CUDA_VISIBLE_DEVICES (NVML sees every
GPU). The worker maps a torch device with gpt.torch_compat.nvml_device_index (torch's own mapping); the
runner, which imports no torch, maps CUDA ordinal 0 with visible_index(). Every caller then goes through
handle(index), so the environment, device-used memory (the batch search's "fits"), the memory split and
the power sampler all read the same GPU. No torch import here.
"""

from __future__ import annotations

import os


def module():
    """pynvml, initialised (nvmlInit is cheap and idempotent). Raises when nvidia-ml-py or the driver is absent."""
    import pynvml  # nvidia-ml-py

    pynvml.nvmlInit()
    return pynvml


def handle(index: int):
    return module().nvmlDeviceGetHandleByIndex(index)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def visible_index(ordinal: int = 0) -> int | None:
    """The NVML index of CUDA device `ordinal` as CUDA_VISIBLE_DEVICES exposes it, without torch: integer
    entries are NVML indices, GPU-<uuid> entries are looked up by UUID. None when it cannot be told (MIG
    instances, an entry NVML does not know, no NVML)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return ordinal
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if ordinal >= len(entries):
        return None
    entry = entries[ordinal]
    if entry.isdigit():
        return int(entry)
    if entry.startswith("GPU-"):
        try:
            nvml = module()
            return int(nvml.nvmlDeviceGetIndex(nvml.nvmlDeviceGetHandleByUUID(entry)))
        except Exception:  # noqa: BLE001 -- NVML absent or the UUID unknown: cannot tell
            return None
    return None


def driver_facts(index: int) -> dict | None:
    """Driver version, total memory and power limit of the device; None without NVML."""
    try:
        nvml = module()
        h = nvml.nvmlDeviceGetHandleByIndex(index)
        return {
            "driver": _text(nvml.nvmlSystemGetDriverVersion()),
            "memory_total_bytes": int(nvml.nvmlDeviceGetMemoryInfo(h).total),
            "power_limit_w": nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
        }
    except Exception:  # noqa: BLE001 -- best effort: a missing fact must not break the run
        return None


def gpu_identity(index: int) -> dict | None:
    """Name, compute capability and memory of the device, as the runner can tell them without torch (the
    same keys as the worker's environment.gpu, where NVML has them); None without NVML."""
    try:
        nvml = module()
        h = nvml.nvmlDeviceGetHandleByIndex(index)
        major, minor = nvml.nvmlDeviceGetCudaComputeCapability(h)
        return {"name": _text(nvml.nvmlDeviceGetName(h)), "capability": f"{major}.{minor}",
                "memory_bytes": int(nvml.nvmlDeviceGetMemoryInfo(h).total), "source": "nvml (runner)"}
    except Exception:  # noqa: BLE001 -- no NVML, no driver, or no such device
        return None


def device_used_bytes(index: int) -> int | None:
    """Device-level used memory (all processes, CUDA contexts included)."""
    try:
        return int(module().nvmlDeviceGetMemoryInfo(handle(index)).used)
    except Exception:  # noqa: BLE001 -- best effort: a missing fact must not break the run
        return None


def max_sm_clock_mhz(index: int) -> int | None:
    try:
        nvml = module()
        return int(nvml.nvmlDeviceGetMaxClockInfo(handle(index), nvml.NVML_CLOCK_SM))
    except Exception:  # noqa: BLE001 -- not every GPU/driver reports it
        return None
