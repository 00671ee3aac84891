"""NVML (nvidia-ml-py), set up in one place: which device, and every fact the harness reads from it.

Every NVML call of the harness goes through this file: the environment's driver facts, device-used memory
(the batch search's "fits"), the runner's view of the GPU, the contention window's other GPU processes,
the memory split and the power sampler (harness/evidence). module() imports and initialises pynvml;
Device(index) takes the handle once and names each reading.

The NVML index of a device differs from torch's CUDA ordinal under CUDA_VISIBLE_DEVICES (NVML sees every
GPU). The worker maps a torch device with torch_device_index() (torch's own mapping, through
gpt/torch_compat.py); the runner, which imports no torch, maps CUDA ordinal 0 with visible_index(). So all
of them read the same GPU. No torch import at module level.
"""

from __future__ import annotations

import os

from harness.provenance.hardware_id import hashed_id

GPU_ID_APP = b"gpt-harness gpu id v1"  # as envinfo's machine id: an HMAC of the raw UUID, which is never recorded


def module():
    """pynvml, initialised (nvmlInit is cheap and idempotent). Raises when nvidia-ml-py or the driver is absent."""
    import pynvml  # nvidia-ml-py

    pynvml.nvmlInit()
    return pynvml


class Device:
    """One GPU by NVML index. Every reading raises where NVML does (callers decide what a missing one means)."""

    def __init__(self, index: int):
        self.lib = module()
        self.handle = self.lib.nvmlDeviceGetHandleByIndex(index)

    def name(self) -> str:
        return _text(self.lib.nvmlDeviceGetName(self.handle))

    def capability(self) -> str:
        major, minor = self.lib.nvmlDeviceGetCudaComputeCapability(self.handle)
        return f"{major}.{minor}"

    def memory(self):
        """nvmlMemory_t: .used and .total bytes, device-wide (all processes, CUDA contexts included)."""
        return self.lib.nvmlDeviceGetMemoryInfo(self.handle)

    def uuid(self) -> str:
        return _text(self.lib.nvmlDeviceGetUUID(self.handle))

    def power_limit_w(self) -> float:
        return self.lib.nvmlDeviceGetEnforcedPowerLimit(self.handle) / 1000.0

    def compute_processes(self) -> list[tuple[int, int | None]]:
        """(pid, used memory bytes, None where the driver hides it) of every compute process on the GPU."""
        return [(int(p.pid), int(p.usedGpuMemory) if isinstance(getattr(p, "usedGpuMemory", None), int) else None)
                for p in self.lib.nvmlDeviceGetComputeRunningProcesses(self.handle)]

    def power_mw(self) -> int:
        return self.lib.nvmlDeviceGetPowerUsage(self.handle)

    def sm_clock_mhz(self) -> int:
        return self.lib.nvmlDeviceGetClockInfo(self.handle, self.lib.NVML_CLOCK_SM)

    def max_sm_clock_mhz(self) -> int:
        return int(self.lib.nvmlDeviceGetMaxClockInfo(self.handle, self.lib.NVML_CLOCK_SM))

    def clock_event_reasons(self) -> int:
        """The clocks-event ("throttle") reason bit mask. NVML 12 renamed ClocksThrottleReasons to
        ClocksEventReasons; the newer name where the binding has it."""
        fn = getattr(self.lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            self.lib.nvmlDeviceGetCurrentClocksThrottleReasons
        return fn(self.handle)

    def energy_mj(self) -> int:
        """The energy counter since the driver loaded, in millijoules."""
        return self.lib.nvmlDeviceGetTotalEnergyConsumption(self.handle)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def torch_device_index(device) -> int:
    """The NVML index of a torch CUDA device (torch's own mapping, gpt/torch_compat.py; torch is imported
    only here, so the runner can use this module without it)."""
    from gpt import torch_compat

    return torch_compat.nvml_device_index(device)


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
    """Driver version, total memory, power limit and the GPU's id (gpu_id) of the device; None without NVML."""
    try:
        gpu = Device(index)
        return {
            "driver": _text(gpu.lib.nvmlSystemGetDriverVersion()),
            "memory_total_bytes": int(gpu.memory().total),
            "power_limit_w": gpu.power_limit_w(),
            "gpu_id": _gpu_id_of(gpu),
        }
    except Exception:  # noqa: BLE001 -- best effort: a missing fact must not break the run
        return None


def gpu_id(uuid: str) -> str:
    """A stable, non-identifying id of one physical GPU (harness.provenance.hardware_id: its NVML UUID hashed with GPU_ID_APP).
    Two GPUs of one model (two lent H200s, say) read apart where a machine id cannot tell them (a container's is the
    image's, or none)."""
    return hashed_id(uuid, GPU_ID_APP)


def _gpu_id_of(gpu: Device) -> str | None:
    try:
        return gpu_id(gpu.uuid())
    except Exception:  # noqa: BLE001 -- a driver or MIG slice without a UUID: the other facts still count
        return None


def gpu_identity(index: int) -> dict | None:
    """Name, compute capability and memory of the device, as the runner can tell them without torch (the
    same keys as the worker's environment.gpu, where NVML has them); None without NVML."""
    try:
        gpu = Device(index)
        return {"name": gpu.name(), "capability": gpu.capability(), "memory_bytes": int(gpu.memory().total),
                "source": "nvml (runner)"}
    except Exception:  # noqa: BLE001 -- no NVML, no driver, or no such device
        return None


def device_used_bytes(index: int) -> int | None:
    """Device-level used memory (all processes, CUDA contexts included)."""
    try:
        return int(Device(index).memory().used)
    except Exception:  # noqa: BLE001 -- best effort: a missing fact must not break the run
        return None


def max_sm_clock_mhz(index: int) -> int | None:
    try:
        return Device(index).max_sm_clock_mhz()
    except Exception:  # noqa: BLE001 -- not every GPU/driver reports it
        return None


def compute_processes(index: int | None) -> dict:
    """pid -> used memory (bytes, None where the driver hides it) of every compute process NVML lists on the
    GPU; {} without NVML, or with a driver that does not list processes."""
    if index is None:
        return {}
    try:
        return dict(Device(index).compute_processes())
    except Exception:  # noqa: BLE001 -- nothing known
        return {}
