"""The record's sections as types: one frozen dataclass per section a worker writes, and one per object nested in a
section (environment.gpu, explain.kernels and its rows, ...): the model the schema is checked against
(tests/test_record_schema.py), and what RecordView hands out instead of a sub-dict.

Dataclasses, not pydantic: the record package runs where only the results are, under a bare Python (harness.envs
verify-matrix reads records without the project's dependencies), so it takes nothing beyond the standard library;
validation stays with the JSON schema (harness.record.io), which the tests hold equal to these fields.

Everything is read from its JSON here and in harness.record.parts (the objects nested in a section), with `of`,
and written back with `to_json` (what the record holds) or `to_dict` (every field named). `of` never fails on the
shape of an older record: a key the record lacks reads None; an object that is null, missing or "not recorded"
(schema v2's word for what the harness that made the record did not record) reads as a Part whose fields are all
None and which is false (`state` says which of the three it was). `named` is `of` for what a worker writes: it
refuses a key the model does not name. Maps keyed by a name the record chooses (flags.requested,
environment.packages.packages, explain.libraries.mapped, environment.env_vars, cpu.isa) stay dicts: their keys are
data, not fields. Nothing is read by key (no `get`, no `[key]`). No torch import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.record.model import ADDED_FIELD_DEFAULTS
from harness.record.parts import (
    RECORDED,
    Container,
    Cpu,
    Driver,
    Gpu,
    Kernels,
    Libraries,
    Machine,
    MadeBy,
    MemorySplit,
    Mfu,
    Part,
    Power,
    Threads,
    Torch,
)


@dataclass(frozen=True)
class Section(Part):
    """A section of a record (a key at its top level)."""

    @property
    def recorded(self) -> bool:
        return self.state == RECORDED

    def __bool__(self) -> bool:
        """Whether the section holds anything (an empty object, or one of nulls, does not)."""
        return any(v is not None and (not isinstance(v, Part) or v.state is not None)
                   for v in (getattr(self, name) for name in self.names())) or bool(self.extra)


@dataclass(frozen=True)
class Flags(Section):
    requested: dict | None = None
    applied: dict | None = None
    after: dict | None = None
    changes: list | str | None = None  # a list (each change seen after a step), None: not measured, or NOT_RECORDED
    hash: str | None = None


@dataclass(frozen=True)
class Steps(Section):
    ms: list | None = None
    loss: list | None = None
    grad_norm: list | None = None


@dataclass(frozen=True)
class Summary(Section):
    step_ms_median: float | None = None
    step_ms_q1: float | None = None
    step_ms_q3: float | None = None
    step_ms_iqr: float | None = None
    step_ms_mean: float | None = None
    first_step_ms: float | None = None
    timed_steps: int | None = None
    tokens_per_step: int | None = None
    tokens_per_s: float | None = None
    final_loss: float | None = None
    mean_loss: float | None = None
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    device_used_bytes: int | None = None
    peak_rss_bytes: int | None = None
    mfu: float | None = None


@dataclass(frozen=True)
class Sweep(Section):
    name: str | None = None
    field: str | None = None
    value: Any = None


@dataclass(frozen=True)
class Contention(Section):
    """harness.provenance.contention.window: how busy the machine was over the timed steps."""

    window: str | None = None
    wall_s: float | None = None
    threads: int | None = None
    usable_cpus: int | None = None
    loadavg_start: list | None = None
    loadavg_end: list | None = None
    own_cpu_s: float | None = None
    others_cpu_s: float | None = None
    others_busy_cpus: float | None = None
    steal_s: float | None = None
    steal_share: float | None = None
    loadavg_1min_max: float | None = None
    gpu_other_processes: list | None = None
    gpu_note: str | None = None  # this process not among NVML's pids (another pid namespace): one taken to be it
    cpu: str | None = None  # "not measured: /proc/stat unreadable"
    contended: bool | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Environment(Section):
    """harness.provenance.envinfo.capture, in the worker process (a failure record: what the runner knew)."""

    env_name: str | None = None
    captured_by: str | None = None  # in a failure record: who wrote this section (the runner, not the worker)
    device: str | None = None
    python: dict | None = None
    os: dict | None = None
    cpu: Cpu = field(default_factory=Cpu.absent)
    machine: Machine = field(default_factory=Machine.absent)
    host_ram_bytes: int | None = None
    torch: Torch = field(default_factory=Torch.absent)
    triton: str | None = None
    driver: Driver = field(default_factory=Driver.absent)
    gpu: Gpu = field(default_factory=Gpu.absent)
    container: Container = field(default_factory=Container.absent)
    harness: MadeBy = field(default_factory=MadeBy.absent)
    packages: dict | None = None  # sha256 and the `pip freeze` lines
    env_vars: dict | None = None
    threads: Threads = field(default_factory=Threads.absent)
    torch_source: dict | None = None  # a torch installed from a wheel folder: folder, file, sha256, its dependencies'
    NESTED: ClassVar[dict] = {"cpu": Cpu, "machine": Machine, "torch": Torch, "driver": Driver, "gpu": Gpu, "container": Container,
              "harness": MadeBy, "threads": Threads}


@dataclass(frozen=True)
class Explain(Section):
    """harness.evidence: why a number is what it is (docs/explain.md); each part has available and reason."""

    kernels: Kernels = field(default_factory=Kernels.absent)
    libraries: Libraries = field(default_factory=Libraries.absent)
    memory_split: MemorySplit = field(default_factory=MemorySplit.absent)
    power: Power = field(default_factory=Power.absent)
    mfu: Mfu = field(default_factory=Mfu.absent)
    NESTED: ClassVar[dict] = {"kernels": Kernels, "libraries": Libraries, "memory_split": MemorySplit, "power": Power, "mfu": Mfu}


@dataclass(frozen=True)
class Rerun(Section):
    command: str | None = None


@dataclass(frozen=True)
class Reference(Section):
    """A transcribed log line (kind reference, results/reference/transcribe.py): where it is, what it says, and what
    the log does not give (assumed, unknown)."""

    source: str | None = None
    line: int | None = None
    text: str | None = None
    gpu_class: str | None = None
    torch: str | None = None
    torch_note: str | None = None
    batch_size: int | None = None
    seq_len: int | None = None
    compiled: bool | None = None
    step: int | None = None
    memory_mib_nvidia_smi: float | None = None
    watts: float | None = None
    tokens_per_s_logged: float | None = None
    dt_ms_logged: float | None = None
    first_step_ms_logged: float | None = None
    first_step_ms_meaning: str | None = None
    assumed: Any = None
    unknown: Any = None
    also_in: str | None = None
    notes: Any = None


@dataclass(frozen=True)
class Peer(Section):
    """A peer program's reported numbers (kind peer, results/transcribe_peers.py)."""

    name: str | None = None
    program: str | None = None
    source: str | None = None
    line: int | None = None
    text: str | None = None
    reported: Any = None
    readme: Any = None
    known: Any = None
    unknown: Any = None


class Workload:
    """record.workload, read-only: gpt.config.WorkloadConfig's fields as attributes (None where the record lacks one;
    for a field added since it was written, the value every earlier run ran with: model.ADDED_FIELD_DEFAULTS;
    tests/test_record_schema.py holds FIELDS equal to WorkloadConfig's). Not a dict: `to_dict()` is what the record
    holds, key for key, for the rules that hash or compare a workload as stored (workload_hash, knob_fields, run
    lengths), where a field the record lacks must stay absent."""

    FIELDS = ("preset", "n_layer", "n_head", "n_embd", "vocab_size", "seq_len", "batch_size", "grad_accum", "precision",
              "attention", "sdpa_backend", "lm_head_loss", "model", "compile", "optimizer", "grad_clip", "lr",
              "weight_decay", "steps", "warmup_steps", "seed", "data", "device", "memory_budget_gib", "profile_steps")
    __slots__ = ("_values",)

    def __init__(self, values: Any):
        object.__setattr__(self, "_values", values if isinstance(values, dict) else {})

    def __getattr__(self, name: str):
        if name in Workload.FIELDS:  # a field added after the record was written: what every earlier run ran with
            return self._values.get(name, ADDED_FIELD_DEFAULTS.get(name))
        raise AttributeError(name)

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError("a record's workload is read-only")

    def __repr__(self) -> str:
        return f"Workload({self._values!r})"

    def to_dict(self) -> dict:
        """The workload as the record holds it (a copy)."""
        return dict(self._values)

    def recorded(self, name: str) -> bool:
        """Whether the record has the field (a field added after it was written does not)."""
        return name in self._values

    @property
    def samples_per_step(self) -> int | None:
        """Sequences per optimizer step: B x grad_accum (1 where the record has no positive accumulation), None where
        it has no positive whole B. What a loss is compared at and a step's time scales with: B=96x2 trains on the
        sequences B=192 does, in the same order (gpt/data.py's batches are sequential)."""
        b, accum = self.batch_size, self.grad_accum
        if not isinstance(b, int) or isinstance(b, bool) or b < 1:
            return None
        return b * (accum if isinstance(accum, int) and not isinstance(accum, bool) and accum > 0 else 1)

    @property
    def tokens_per_step(self) -> int | None:
        """B x T x grad_accum (samples_per_step x T), where the record has B and T."""
        samples = self.samples_per_step
        return samples * self.seq_len if samples and self.seq_len else None


# The record's sections that are objects, by their key: what the schema's properties are checked against.
SECTIONS: dict[str, type[Section]] = {"flags": Flags, "steps": Steps, "summary": Summary, "sweep": Sweep,
                                      "contention": Contention, "environment": Environment, "explain": Explain,
                                      "reference": Reference, "peer": Peer,
                                      "rerun": Rerun}
