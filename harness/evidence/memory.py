"""explain.memory_split: peak device memory as tensors + allocator cache + memory outside the allocator.

The allocator's peaks come from torch; what the process uses on the device from NVML (harness/provenance/nvml.py).
Read right after the timed steps, before profiling can move the peaks.
"""

from __future__ import annotations

import os

import torch

from harness.evidence import NOT_ON_CPU, unavailable
from harness.provenance import nvml

ALLOC_ENV = ("CUBLAS_WORKSPACE_CONFIG", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


def _nvml_used_bytes(device: torch.device) -> tuple[int, str, str | None]:
    """(bytes, method, note): this process's usage if NVML lists it, else the whole device's."""
    gpu = nvml.Device(nvml.torch_device_index(device))
    processes = gpu.compute_processes()
    for pid, used in processes:
        if pid == os.getpid() and used is not None:
            return used, "nvml-process", None
    others = len([pid for pid, _ in processes if pid != os.getpid()])
    note = ("NVML does not list this process (container PID namespace, or no permission): device-level used "
            f"memory instead; it includes {others} other listed process(es) and driver-reserved memory")
    return int(gpu.memory().used), "nvml-device-minus-reserved", note


def memory_split(device: torch.device) -> dict:
    """Peak tensors, allocator cache on top of them, and device memory outside the allocator (CUDA context,
    loaded kernel images, memory libraries allocate themselves). Read right after the timed steps."""
    env = {name: os.environ.get(name) for name in ALLOC_ENV}
    if device.type != "cuda":
        return unavailable(f"{NOT_ON_CPU}: no device allocator (host memory is summary.peak_rss_bytes)", **env)
    tensors = torch.cuda.max_memory_allocated(device)
    peak_reserved = torch.cuda.max_memory_reserved(device)
    reserved_now = torch.cuda.memory_reserved(device)
    try:
        used, method, note = _nvml_used_bytes(device)
    except Exception as exc:  # noqa: BLE001 -- no nvidia-ml-py, or NVML cannot start: the allocator half still stands
        return {"available": False, "reason": f"NVML unavailable ({type(exc).__name__}: {exc}); only the allocator split is known",
                "tensors_bytes": tensors, "allocator_cache_bytes": peak_reserved - tensors, "outside_allocator_bytes": None,
                "process_used_bytes": None, "method": None, **env}
    return {
        "available": True,
        "reason": None,
        "tensors_bytes": tensors,  # max_memory_allocated
        "allocator_cache_bytes": peak_reserved - tensors,  # max_memory_reserved - max_memory_allocated
        "outside_allocator_bytes": used - reserved_now,  # NVML used now - reserved now (same instant)
        "process_used_bytes": used,
        "peak_reserved_bytes": peak_reserved,
        "reserved_bytes_at_read": reserved_now,
        "method": method,
        "note": note,
        **env,
    }
