"""What tells one device from another, as a record says it: the device label every table groups by.

compare's cells, sweeps and reports all group runs by device_label (RecordView.device_label reads it through
DeviceIdentity), so the rule that keeps two CPUs of one name but another ISA or thread count apart is written here
once. No torch import here.
"""

from __future__ import annotations

from typing import NamedTuple

from harness.record.sections import Environment
from harness.record.view_base import as_int

# What decides CPU speed per precision, in a device label: the widest vector ISA, and whether bf16/fp16 have
# native instructions (bf16 on a CPU without them is converted in software: tens of times slower).
VECTOR_ISA = (("avx512f", "AVX512"), ("avx2", "AVX2"), ("avx", "AVX"), ("sve2", "SVE2"), ("sve", "SVE"), ("asimd", "NEON"))
NATIVE_LOW_PRECISION = ("avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16", "bf16", "svebf16")


def isa_tag(isa) -> str | None:
    """A short name for a CPU's recorded ISA flags (environment.cpu.isa): "AVX512+avx512_bf16",
    "AVX2, no native bf16"; None without flags (an older record, not Linux)."""
    if not isinstance(isa, dict) or not isa:
        return None
    base = next((name for flag, name in VECTOR_ISA if isa.get(flag)), "scalar")
    extras = [n for n in NATIVE_LOW_PRECISION if isa.get(n)]
    return "+".join([base, *extras]) if extras else f"{base}, no native bf16"


class DeviceIdentity(NamedTuple):
    """What tells one device from another, as a record says it: a GPU's name, or a CPU's model with its ISA tag and
    torch thread count; None for what the record does not say (an older record has no ISA flags)."""

    kind: str  # "gpu", "cpu" or "unknown"
    name: str | None = None  # the GPU's name or the CPU's model
    isa: str | None = None  # isa_tag of a CPU's ISA flags
    threads: int | None = None  # the torch threads the worker set (environment.threads.torch)
    # What torch reported using (environment.torch.num_threads): said beside a record without `threads` (an older
    # one), never part of the label: relabelling the shipped records would move their Monte Carlo intervals (issue 49)
    torch_threads: int | None = None

    @classmethod
    def of(cls, environment: Environment | dict | None) -> DeviceIdentity:
        env = environment if isinstance(environment, Environment) else Environment.of(environment)
        gpu, cpu = env.gpu, env.cpu
        if gpu.name:
            return cls("gpu", str(gpu.name))
        if not cpu:
            return cls("cpu", "unknown model") if env.device == "cpu" else cls("unknown")
        return cls("cpu", cpu.model or "unknown model", isa_tag(cpu.isa), as_int(env.threads.torch), as_int(env.torch.num_threads))

    @property
    def label(self) -> str:
        """The device label: the GPU's name, else `cpu: <model> [<ISA tag>; <n> threads]` (what the record has of
        those), else 'unknown device'."""
        if self.kind == "gpu":
            return self.name
        if self.kind == "unknown":
            return "unknown device"
        details = [d for d in (self.isa, f"{self.threads} threads" if self.threads else None) if d]
        return f"cpu: {self.name}" + (f" [{'; '.join(details)}]" if details else "")


def device_label(environment: Environment | dict | None) -> str:
    """Where a record ran, from its `environment` (DeviceIdentity.label): the GPU's name, else `cpu: <model>`, else
    'unknown device'; on a CPU, what tells two CPUs with that name apart: the ISA tag and the torch thread count, where
    the record has them. The one rule: compare's cells, sweeps and reports all group by this label, so runs on two
    CPUs that differ in ISA or threads are never pooled as repeats, and a record that does not say its ISA (an older
    one) is never pooled with one that does: not recorded is not the same. The recorded machine id
    (environment.machine) is not part of it: VMs made from one image share /etc/machine-id (two hosts of this
    workplace with different CPU ISA had the same id), so it does not tell machines apart."""
    return DeviceIdentity.of(environment).label
