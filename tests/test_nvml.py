"""One NVML device mapping for the environment, device-used memory, the memory split and the power sampler,
and the runner's (torch-free) view of the GPU a dead worker was meant to use. A fake pynvml stands in for
the driver; device names and capabilities are the real ones of the H100 records."""

from __future__ import annotations

import sys
import types
from dataclasses import replace

import pytest

from harness import nvml


class FakeNVML(types.ModuleType):
    """Four GPUs; records which NVML index every call asked for."""

    NVML_CLOCK_SM = 1

    def __init__(self):
        super().__init__("pynvml")
        self.asked: list[int] = []

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, index):
        self.asked.append(index)
        return ("gpu", index)

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return ("gpu", {"GPU-aaaa": 2}[uuid])

    def nvmlDeviceGetIndex(self, handle):
        return handle[1]

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return (9, 0)

    def nvmlDeviceGetMemoryInfo(self, handle):
        return types.SimpleNamespace(used=(10 + handle[1]) * 2**30, total=80 * 2**30)

    def nvmlSystemGetDriverVersion(self):
        return "580.159.04"

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 700_000

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):
        return 1980

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return []


@pytest.fixture
def fake(monkeypatch):
    module = FakeNVML()
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


@pytest.mark.parametrize("visible, ordinal, index", [
    (None, 0, 0), ("3,1", 0, 3), ("3,1", 1, 1), ("3", 1, None), ("GPU-aaaa", 0, 2), ("MIG-1234", 0, None), ("", 0, None),
])
def test_visible_index_follows_cuda_visible_devices(fake, monkeypatch, visible, ordinal, index):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert nvml.visible_index(ordinal) == index


def test_environment_memory_and_power_read_the_same_gpu(fake, monkeypatch):
    """Under CUDA_VISIBLE_DEVICES=3, torch's cuda:0 is NVML's device 3: every reading must ask for 3
    (envinfo used to ask NVML for torch.cuda.current_device(), i.e. 0, while explain asked for 3)."""
    import torch

    from gpt import torch_compat
    from harness import envinfo
    from harness.evidence import memory, power

    monkeypatch.setattr(torch_compat, "nvml_device_index", lambda device: 3)
    device = torch.device("cuda", 0)
    assert envinfo.device_used_bytes(device) == 13 * 2**30
    sampler = power.PowerSampler(device, interval_s=0.01)
    monkeypatch.setattr(power.PowerSampler, "_sample", lambda self: None)
    sampler.start()
    sampler.stop()
    assert sampler.max_sm_clock_mhz == 1980
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda d: 1)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda d: 2)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda d: 2)
    assert memory.memory_split(device)["process_used_bytes"] == 13 * 2**30
    assert set(fake.asked) == {3}


def test_the_runner_names_the_gpu_a_dead_worker_was_meant_for(fake, monkeypatch):
    from harness import envinfo
    from harness import launcher as runmod
    from harness.record.view import device_label
    from harness.worker_spec import WorkerSpec

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    spec = WorkerSpec(run_id="r", env="local", plan="p", rung="r", workload={"device": "auto"}, flags={})
    env = runmod.intended_environment(spec)
    assert env["device"] == "cuda" and env["gpu"]["name"] == "NVIDIA H100 80GB HBM3" and env["gpu"]["capability"] == "9.0"
    assert fake.asked == [1]
    # the same label as the worker's own records of that machine: its machine id, like theirs (harness.envinfo)
    assert device_label(env) == device_label({"gpu": {"name": "NVIDIA H100 80GB HBM3"}, "machine": envinfo.machine_id()})
    cpu = runmod.intended_environment(replace(spec, workload={"device": "cpu"}))
    assert cpu["device"] == "cpu" and device_label(cpu).startswith("cpu: ")
