"""The objects nested in a record's sections (environment.gpu, explain.kernels and its rows, ...) as types, and Part,
what every section and object of a record is read as (harness.record.sections has the sections themselves; the
docstring there says how a Part is read and written). Standard library only; no torch import.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields, replace
from functools import cache
from typing import Any, ClassVar

from harness.record.model import NOT_RECORDED

RECORDED = "recorded"


@dataclass(frozen=True)
class Part:
    """An object of a record: its fields, the keys the model does not name (`extra`: a newer harness's additions,
    kept so that nothing is lost), and `state`: RECORDED (an object was there), NOT_RECORDED, or None (null/missing).
    NESTED names the fields that are Parts themselves: field -> a Part type, (type,) for a list of them, or
    {str: type} for a map of them by name. `keys`: the keys the object read had (None for one made in code), so that
    what was read is written back key for key: a field the JSON lacked stays absent, an explicit null stays null."""

    state: str | None = field(default=RECORDED, compare=False)
    extra: dict = field(default_factory=dict, compare=False)
    keys: frozenset | None = field(default=None, compare=False, repr=False)
    NESTED: ClassVar[dict] = {}

    @classmethod
    def names(cls) -> list[str]:
        """The object's own fields, in the order they are written."""
        return list(_own_fields(cls))

    @classmethod
    def of(cls, value: Any):
        """The Part from its JSON: an object, None (not measured) or "not recorded"; anything else reads as None."""
        nested = {name: _read(kind, value.get(name) if isinstance(value, dict) else None)
                  for name, kind in cls.NESTED.items()}
        if not isinstance(value, dict):
            return cls(state=NOT_RECORDED if value == NOT_RECORDED else None, **nested)
        own = _own_fields(cls)
        return _made(cls, {**_defaults(cls), **{k: value[k] for k in own if k in value and k not in nested}, **nested,
                           "extra": {k: v for k, v in value.items() if k not in own}, "keys": frozenset(value)})

    @classmethod
    def named(cls, value: dict):
        """The Part of an object a harness module built for a record, refusing a key the model does not name at any
        depth: what a worker writes is the model's, never a free object (ValueError names the keys)."""
        part = cls.of(value)
        unnamed = [f"{type(p).__name__}.{key}" for p in part.parts() for key in p.extra]
        if unnamed:
            raise ValueError(f"{cls.__name__}: not in the record model (harness/record/): {', '.join(unnamed)}")
        return part

    def but(self, **changes):
        """A copy with these fields set (written back even where set to None, as a dict's key would be)."""
        return replace(self, **changes, keys=None if self.keys is None else self.keys | set(changes))

    def parts(self):
        """This Part and every Part nested in it (objects, the rows of a list, the values of a map)."""
        yield self
        for name, kind in self.NESTED.items():
            value = getattr(self, name)
            inner = [value] if isinstance(kind, type) else list(value or ()) if isinstance(kind, tuple) else \
                list((value or {}).values())
            for part in inner:
                yield from part.parts()

    @classmethod
    def absent(cls):
        """One that was not there (a nested Part's default)."""
        return cls(state=None)

    def to_dict(self) -> dict:
        """Every field by name (None where not recorded), nested Parts as their JSON, then the unnamed keys."""
        own = {name: _write(self.NESTED.get(name), getattr(self, name)) for name in self.names()}
        return {**own, **self.extra}

    def to_json(self) -> dict | str | None:
        """What the record holds: the object (the keys it was read with, and any field set since; every field for one
        made in code), or None / "not recorded" as it was read."""
        if self.state != RECORDED:
            return self.state
        return {name: value for name, value in self.to_dict().items()
                if self.keys is None or name in self.keys or value is not None}

    def __bool__(self) -> bool:
        return self.state == RECORDED


@cache  # a class's fields never change; read for every object of every record
def _own_fields(cls) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls) if f.name not in ("state", "extra", "keys"))


@cache
def _defaults(cls) -> dict:
    """Each field's plain default (the fields with a default factory are `extra` and the nested parts, which of()
    always gives)."""
    return {f.name: f.default for f in fields(cls) if f.default is not MISSING}


def _made(cls, values: dict):
    """cls(**values) with every field in values, less the frozen dataclass __init__'s one object.__setattr__ per field:
    a compare of 100,000 records makes some 200,000 parts (tests/test_record_schema.py holds the two equal)."""
    part = object.__new__(cls)
    part.__dict__.update(values)
    return part


def _read(kind, value):
    if isinstance(kind, tuple):
        return tuple(kind[0].of(v) for v in value) if isinstance(value, list) else None
    if isinstance(kind, dict):
        (row,) = kind.values()
        return {k: row.of(v) for k, v in value.items()} if isinstance(value, dict) else None
    return kind.of(value)


def _write(kind, value):
    if kind is None or value is None:
        return value
    if isinstance(kind, tuple):
        return [v.to_json() for v in value]
    if isinstance(kind, dict):
        return {k: v.to_json() for k, v in value.items()}
    return value.to_json()


# environment's objects (harness.provenance.envinfo.capture)
@dataclass(frozen=True)
class Gpu(Part):
    name: str | None = None
    capability: str | float | None = None  # "9.0" as recorded (RecordView.gpu_capability reads it as a number)
    memory_bytes: int | None = None
    sm_count: int | None = None
    count_visible: int | None = None
    l2_cache_bytes: int | None = None
    source: str | None = None  # "nvml (runner)" where the runner, not the worker, read it (a failure record)


@dataclass(frozen=True)
class Cpu(Part):
    model: str | None = None
    count: int | None = None
    usable: int | None = None
    isa: dict | str | None = None  # flag -> present (a map of /proc/cpuinfo's flags), or "not recorded"
    torch_capability: str | None = None  # the kernel path torch picked (AVX512, AVX2), or "not recorded"


@dataclass(frozen=True)
class Torch(Part):
    version: str | None = None
    git: str | None = None
    cuda: str | None = None
    cuda_compiled: str | None = None
    hip: str | None = None
    debug: bool | None = None
    cudnn: str | int | None = None
    nccl: str | None = None
    num_threads: int | None = None


@dataclass(frozen=True)
class Threads(Part):
    torch: int | None = None
    interop: int | None = None
    torch_default: int | None = None
    chosen: str | None = None


@dataclass(frozen=True)
class Machine(Part):
    id: str | None = None  # hashed /etc/machine-id (recorded; not part of the device label)
    source: str | None = None


@dataclass(frozen=True)
class Nvml(Part):
    driver: str | None = None
    memory_total_bytes: int | None = None
    power_limit_w: float | None = None
    gpu_id: str | None = None  # hashed NVML UUID of the GPU (harness.provenance.nvml.gpu_id): which physical GPU it was


@dataclass(frozen=True)
class Driver(Part):
    cuda_driver_api: Any = None
    nvml: Nvml = field(default_factory=Nvml.absent)
    NESTED: ClassVar[dict] = {"nvml": Nvml}


@dataclass(frozen=True)
class Container(Part):
    image: str | None = None  # HARNESS_IMAGE: envs/<name> or a cluster's image
    digest: str | None = None
    base: str | None = None
    revision: str | None = None


@dataclass(frozen=True)
class MadeBy(Part):
    """environment.harness: the code that made the record (harness.provenance.envinfo.code_identity)."""

    source_sha256: str | None = None  # over gpt/ and harness/
    source_files: int | None = None
    commit: str | None = None
    dirty: bool | None = None
    commit_note: str | None = None


# explain's objects (harness.evidence; docs/explain.md)
@dataclass(frozen=True)
class Evidence(Part):
    """What every piece of explain's evidence says first: whether it was gathered, and if not, why."""

    available: bool | None = None
    reason: str | None = None


@dataclass(frozen=True)
class KernelTime(Part):
    """A kernel category's time (explain.kernels.by_category[category])."""

    total_us: float | None = None
    calls: int | None = None
    per_step_us: float | None = None
    share: float | None = None  # of the summed kernel time


@dataclass(frozen=True)
class KernelRow(Part):
    """One kernel (on a CPU: one op) of explain.kernels.top."""

    name: str | None = None
    category: str | None = None
    precision: str | None = None
    calls: int | None = None
    total_us: float | None = None
    per_step_us: float | None = None
    share: float | None = None


@dataclass(frozen=True)
class Gemm(Part):
    """An lm_head GEMM (explain.kernels.lm_head_gemm, vocab_gemms): role, its kernel, shape and padding."""

    role: str | None = None  # forward, backward-input, backward-weight (lm_head_gemm is the forward one, without it)
    name: str | None = None
    precision: str | None = None
    total_us: float | None = None
    per_step_us: float | None = None
    share: float | None = None
    shape: list | None = None
    op: str | None = None
    calls: int | None = None
    kernels: list | None = None
    strides: list | None = None
    dtypes: list | None = None
    padded_to: int | None = None
    padding: int | None = None
    row_stride: int | None = None
    stride_padding: int | None = None


@dataclass(frozen=True)
class LmHeadRole(Part):
    """What makes a GEMM of the inventory one of the lm_head's (harness.evidence.kernels.vocab_gemm_role)."""

    role: str | None = None
    shape: list | None = None
    padded_to: int | None = None
    padding: int | None = None
    row_stride: int | None = None
    stride_padding: int | None = None


@dataclass(frozen=True)
class GemmSignature(Part):
    """One distinct GEMM of the profiled steps (explain.kernels.gemms): op, operands, calls, time, kernels."""

    op: str | None = None
    shapes: list | None = None
    strides: list | None = None
    dtypes: list | None = None
    mnk: list | None = None
    calls: int | None = None
    name: str | None = None
    precision: str | None = None
    total_us: float | None = None
    per_step_us: float | None = None
    kernels: list | None = None
    lm_head: LmHeadRole = field(default_factory=LmHeadRole.absent)
    NESTED: ClassVar[dict] = {"lm_head": LmHeadRole}


@dataclass(frozen=True)
class Kernels(Evidence):
    """explain.kernels: the kernel profile of a few steps after the timed ones (harness.evidence.profiling)."""

    device: str | None = None
    profiled_steps: int | None = None
    step_time_us: float | None = None
    busy_us_per_step: float | None = None
    share_basis: str | None = None
    what: str | None = None
    distinct_kernels: int | None = None
    top: tuple[KernelRow, ...] | None = None
    by_category: dict[str, KernelTime] | None = None
    lm_head_gemm: Gemm = field(default_factory=Gemm.absent)
    vocab_gemms: tuple[Gemm, ...] | None = None
    gemms: tuple[GemmSignature, ...] | None = None
    attention_kernels: list | None = None
    sdpa_backend: str | None = None
    NESTED: ClassVar[dict] = {"top": (KernelRow,), "by_category": {str: KernelTime}, "lm_head_gemm": Gemm, "vocab_gemms": (Gemm,),
              "gemms": (GemmSignature,)}


@dataclass(frozen=True)
class Libraries(Evidence):
    mapped: dict | None = None  # library -> {path, version, version_raw}
    torch_reports: dict | None = None
    disagreements: list | None = None
    source: str | None = None


@dataclass(frozen=True)
class MemorySplit(Evidence):
    CUBLAS_WORKSPACE_CONFIG: str | None = None
    PYTORCH_CUDA_ALLOC_CONF: str | None = None
    PYTORCH_ALLOC_CONF: str | None = None
    tensors_bytes: int | None = None
    allocator_cache_bytes: int | None = None
    outside_allocator_bytes: int | None = None
    process_used_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    reserved_bytes_at_read: int | None = None
    method: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Power(Evidence):
    samples: int | None = None
    samples_total: int | None = None
    interval_s: float | None = None
    window: str | None = None
    window_s: float | None = None
    mean_w: float | None = None
    peak_w: float | None = None
    joules: float | None = None
    joules_method: str | None = None
    joules_per_token: float | None = None
    sm_clock_mhz_mean: float | None = None
    sm_clock_mhz_min: float | None = None
    sm_clock_mhz_max: float | None = None
    clock_deficit: float | None = None
    throttled_rule: str | None = None
    throttle_reasons: list | None = None
    throttle_reason_share: dict | None = None  # reason -> share of the samples
    throttled: bool | None = None


@dataclass(frozen=True)
class Mfu(Evidence):
    formula: str | None = None
    n_params: int | None = None
    n_params_definition: str | None = None
    flops_exact: bool | None = None  # False for a user's model: N and the FLOPs are an estimate (older records: None)
    flops_per_token: float | None = None
    tokens_per_s: float | None = None
    achieved_flops: float | None = None
    dtype: str | None = None
    device_name: str | None = None
    datasheet: dict | None = None  # peak_flops, dtype, gpu, source
    datasheet_reason: str | None = None
    mfu_datasheet: float | None = None
    measured_peak: dict | None = None  # flops, dtype, method, n
    measured_peak_reason: str | None = None
    mfu_measured: float | None = None


