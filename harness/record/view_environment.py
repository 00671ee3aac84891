"""RecordView's part that says where a run ran: the environment section's values a table reads (versions, the
container image, the CPU's ISA and kernels, the GPU's capability, the torch threads) and the device a run was on or
meant for (harness.record.device: the one label every table groups by). No torch import here.
"""

from __future__ import annotations

from harness.record.device import DeviceIdentity
from harness.record.view_base import ViewBase, as_dict, as_int, as_text, once


class EnvironmentView(ViewBase):
    """Where a run ran (read through RecordView)."""

    __slots__ = ()

    # Read for every run (its env label) and the same for every run of an environment: made once per environment
    @once(section="environment")
    def container_image(self) -> str | None:
        """The image the run was made in (HARNESS_IMAGE: envs/<name> or a cluster's image); None outside one."""
        return self.environment.container.image or None

    @once(section="environment")
    def torch_version(self) -> str | None:
        return as_text(self.environment.torch.version)

    @property
    def torch_threads(self) -> int | None:
        """The torch thread count the worker set (environment.threads.torch)."""
        return as_int(self.environment.threads.torch)

    @property
    def is_cuda(self) -> bool:
        return self.environment.device == "cuda" or bool(self.environment.gpu)

    @property
    def gpu_capability(self) -> float | None:
        """The GPU's compute capability (9.0 for an H100), None on a CPU or where not recorded."""
        try:
            return float(self.environment.gpu.capability)
        except (TypeError, ValueError):
            return None

    @property
    def cpu_isa(self) -> dict:
        """environment.cpu.isa: the ISA flags that decide CPU speed per precision ({} on older records)."""
        return as_dict(self.environment.cpu.isa)

    @property
    def cpu_kernels(self) -> str | None:
        """The CPU kernel path torch picked (environment.cpu.torch_capability: AVX512, AVX2)."""
        return as_text(self.environment.cpu.torch_capability)

    @property
    def versions(self) -> dict:
        """The library and driver versions a report's environment table names."""
        env = self.environment
        return {"torch": env.torch.version, "cuda": env.torch.cuda, "cudnn": env.torch.cudnn, "triton": env.triton,
                "driver": env.driver.nvml.driver, "python": as_dict(env.python).get("version"), "cpu": env.cpu.model}

    @property
    def packages(self) -> dict:
        """environment.packages: what `pip freeze` said (and its hash)."""
        return as_dict(self.environment.packages)

    @once(section="environment")
    def device_identity(self) -> DeviceIdentity:
        return DeviceIdentity.of(self.environment)

    @once(section="environment")
    def device_label(self) -> str:
        return self.device_identity.label

    @property
    def intended_device(self) -> str | None:
        """The device label of the GPU or CPU a run was on (or, for a worker that died early, meant for), when the
        record says which: environment.gpu.name or environment.cpu.model. None when it does not (an early failure
        record that has only env_name, or only `device`)."""
        env = self.environment
        if env.gpu.name or env.cpu.model:
            return self.device_label
        return None
