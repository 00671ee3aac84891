"""One NVML device mapping for the environment, device-used memory, the memory split and the power sampler,
and the runner's (torch-free) view of the GPU a dead worker was meant to use. A fake pynvml stands in for
the driver; device names and capabilities are the real ones of the H100 records."""

from __future__ import annotations

import sys
import types
from dataclasses import replace

import pytest
from shipped import RESULTS

from harness.provenance import nvml


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

    def nvmlDeviceGetUUID(self, handle):
        return f"GPU-0b8d2c1e-0000-4000-8000-00000000000{handle[1]}"


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
    from harness.evidence import memory, power
    from harness.provenance import envinfo

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
    from harness.provenance import envinfo
    from harness.record.device import device_label
    from harness.runner import launcher as runmod
    from harness.runner.worker_spec import WorkerSpec

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    spec = WorkerSpec(run_id="r", env="local", plan="p", rung="r", workload={"device": "auto"}, flags={})
    env = runmod.intended_environment(spec)
    assert env["device"] == "cuda" and env["gpu"]["name"] == "NVIDIA H100 80GB HBM3" and env["gpu"]["capability"] == "9.0"
    assert fake.asked == [1]
    # the same label as the worker's own records of that machine: its machine id, like theirs (harness.provenance.envinfo)
    assert device_label(env) == device_label({"gpu": {"name": "NVIDIA H100 80GB HBM3"}, "machine": envinfo.machine_id()})
    cpu = runmod.intended_environment(replace(spec, workload={"device": "cpu"}))
    assert cpu["device"] == "cpu" and device_label(cpu).startswith("cpu: ")


def test_the_environment_names_the_physical_gpu_by_a_hashed_uuid(fake, monkeypatch):
    """Two lent H200s of one model and driver read alike in every other fact (2026-11-26: a best rung 4.2% slower on
    one of them, and the records could not say whether it was another GPU): driver_facts records a hashed id of the
    GPU's UUID, stable, different per GPU, never the UUID itself; a driver without UUIDs keeps the other facts."""
    facts = {i: nvml.driver_facts(i) for i in (0, 1)}
    assert facts[0]["driver"] == "580.159.04" and facts[0]["power_limit_w"] == 700.0
    ids = {i: f["gpu_id"] for i, f in facts.items()}
    assert ids[0] != ids[1] and all(len(v) == 12 and int(v, 16) >= 0 for v in ids.values())
    assert nvml.driver_facts(0)["gpu_id"] == ids[0]  # stable
    assert "0b8d2c1e" not in repr(facts)  # the raw UUID is not recorded
    monkeypatch.delattr(FakeNVML, "nvmlDeviceGetUUID")
    assert nvml.driver_facts(0) == {**facts[0], "gpu_id": None}


def test_the_record_schema_and_its_typed_part_know_the_gpu_id():
    import copy
    import json

    from harness.record.migrate import migrate
    from harness.record.model import RecordError
    from harness.record.validator import validate
    from harness.record.view import RecordView

    calls = RESULTS / "gpu-h200-20261126-call1"
    record = migrate(json.loads(min((calls / "beyond").glob("*.json")).read_text()))  # version 2 on disk
    record["environment"]["driver"]["nvml"]["gpu_id"] = "5f0e9c1a2b3c"
    assert RecordView(validate(copy.deepcopy(record))).environment.driver.nvml.gpu_id == "5f0e9c1a2b3c"
    record["environment"]["driver"]["nvml"]["gpu_id"] = 5
    with pytest.raises(RecordError):
        validate(record)
