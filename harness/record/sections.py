"""The record's sections as types: one frozen dataclass per section a worker writes (the model the schema is checked
against, tests/test_record_schema.py), and what RecordView hands out instead of a sub-dict.

Dataclasses, not pydantic: the record package runs where only the results are, under a bare Python (harness.envs
verify-matrix reads records without the project's dependencies), so it takes nothing beyond the standard library;
validation stays with the JSON schema (harness.record.io), which the tests hold equal to these fields.

A section is read from its JSON with `of` (a field the record lacks, or a section that reads "not recorded", is None;
`recorded` says which), written back with `to_dict`. `get(key, default)` reads a field by name, as the dict did, so
readers move to attributes one at a time. Nested values (environment.gpu, explain.kernels, ...) stay as recorded.
No torch import.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from harness.record.model import NOT_RECORDED


@dataclass(frozen=True)
class Section:
    """A section of a record: its fields, whether it was recorded, and the keys the model does not name (a newer
    harness's additions, kept so that nothing is lost)."""

    recorded: bool = field(default=True, compare=False)
    extra: dict = field(default_factory=dict, compare=False)

    @classmethod
    def names(cls) -> list[str]:
        """The section's own fields, in the order they are written."""
        return [f.name for f in fields(cls) if f.name not in ("recorded", "extra")]

    @classmethod
    def of(cls, value: Any):
        """The section from its JSON: a dict, None (not measured) or "not recorded"."""
        if not isinstance(value, dict):
            return cls(recorded=value != NOT_RECORDED and value is not None)
        own = cls.names()
        return cls(**{k: value[k] for k in own if k in value}, extra={k: v for k, v in value.items() if k not in own})

    def to_dict(self) -> dict:
        return {**{name: getattr(self, name) for name in self.names()}, **self.extra}

    def get(self, key: str, default=None):
        """A field by name (None read as absent, as a reader of the dict had it); an unnamed key from `extra`."""
        value = getattr(self, key) if key in self.names() else self.extra.get(key)
        return default if value is None else value

    def __bool__(self) -> bool:
        return any(getattr(self, name) is not None for name in self.names()) or bool(self.extra)


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
    """harness.contention.window: how busy the machine was over the timed steps."""

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
    contended: bool | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Environment(Section):
    """harness.envinfo.capture, in the worker process (a failure record: what the runner knew)."""

    env_name: str | None = None
    device: str | None = None
    python: dict | None = None
    os: dict | None = None
    cpu: dict | None = None
    machine: dict | str | None = None
    host_ram_bytes: int | None = None
    torch: dict | None = None
    triton: str | None = None
    driver: dict | None = None
    gpu: dict | None = None
    container: dict | None = None
    harness: dict | None = None
    packages: dict | None = None
    env_vars: dict | None = None
    threads: dict | str | None = None
    torch_source: dict | None = None  # a torch installed from a wheel folder: folder, file, sha256, its dependencies'


@dataclass(frozen=True)
class Explain(Section):
    """harness.evidence: why a number is what it is (docs/explain.md); each part has available and reason."""

    kernels: dict | None = None
    libraries: dict | None = None
    memory_split: dict | None = None
    power: dict | None = None
    mfu: dict | None = None


@dataclass(frozen=True)
class Rerun(Section):
    command: str | None = None


class Workload(Mapping):
    """record.workload, read-only: gpt.config.WorkloadConfig's fields as attributes (None where the record lacks one,
    tests/test_record_schema.py holds FIELDS equal to WorkloadConfig's), and a Mapping of what the record holds, so
    readers that take it as a dict (workload_hash, knob comparisons, `.get`) read it unchanged."""

    FIELDS = ("preset", "n_layer", "n_head", "n_embd", "vocab_size", "seq_len", "batch_size", "grad_accum", "precision",
              "attention", "sdpa_backend", "lm_head_loss", "compile", "optimizer", "grad_clip", "lr", "weight_decay",
              "steps", "warmup_steps", "seed", "data", "device", "memory_budget_gib", "profile_steps")
    __slots__ = ("_values",)

    def __init__(self, values: Any):
        object.__setattr__(self, "_values", values if isinstance(values, dict) else {})

    def __getattr__(self, name: str):
        if name in Workload.FIELDS:
            return self._values.get(name)
        raise AttributeError(name)

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError("a record's workload is read-only")

    def __getitem__(self, key: str):
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Workload({self._values!r})"

    @property
    def tokens_per_step(self) -> int | None:
        """B x T x grad_accum, where the record has B and T."""
        if self.batch_size and self.seq_len:
            return self.batch_size * self.seq_len * (self.grad_accum or 1)
        return None


# The record's sections that are objects, by their key: what the schema's properties are checked against.
SECTIONS: dict[str, type[Section]] = {"flags": Flags, "steps": Steps, "summary": Summary, "sweep": Sweep,
                                      "contention": Contention, "environment": Environment, "explain": Explain,
                                      "rerun": Rerun}
