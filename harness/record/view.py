"""A read-only view of one record: the accessors every table needs, each rule written once.

Readers (harness.compare, harness.report, the findings, the fastest-found table, sweeps, scripts) ask a
RecordView instead of walking the dict: timed steps, tokens per step, the device label, the device a run
was meant for, its peak memory with the metric named, status, env, rung, workload and flags hashes.
The record it wraps was read through harness.record.io (migrated to the current version, validated).
No torch import here.
"""

from __future__ import annotations

import statistics
from datetime import datetime
from types import MappingProxyType
from typing import NamedTuple

from gpt.config import timed_part
from harness.record.model import ADDED_FIELD_DEFAULTS, NOT_RECORDED
from harness.record.parts import Evidence, Gemm, Kernels, KernelTime, MemorySplit, Mfu
from harness.record.sections import (
    Contention,
    Environment,
    Explain,
    Flags,
    Peer,
    Reference,
    Steps,
    Summary,
    Sweep,
    Workload,
)

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
        return cls("cpu", cpu.model or "unknown model", isa_tag(cpu.isa), _int(env.threads.torch), _int(env.torch.num_threads))

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


# Peak-memory metrics, most inclusive first: (summary field, metric name).
MEMORY_METRICS = (("device_used_bytes", "device used"), ("peak_reserved_bytes", "peak reserved"),
                  ("peak_allocated_bytes", "peak alloc"), ("peak_rss_bytes", "peak RSS"))
_MEMORY_FIELD = {name: key for key, name in MEMORY_METRICS}


CPU_INDUCTOR = "inductor-cpp"  # what a CPU profile's Inductor-generated kernels are called here


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


# The schema types these fields, so a record read through harness.record.io has them right; a view of a dict that
# was not (a test's, a script's) still never hands a list where a caller sorts, hashes or multiplies.
def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


_UNREAD = object()  # what RecordView._once has not read yet (None is a value it may read)


class _Once:
    """A RecordView value made once per record (functools.cached_property's way) and kept in the view's __dict__
    under its name: read again, it is found there by the attribute lookup itself, at C speed, as no property or method
    call is (a report reads a few such values per run per table: millions of reads at 100,000 records). section: the
    value depends on that section alone (where the record index shares one between records, made once for all)."""

    def __init__(self, make, section: str | None = None):
        self.make, self.section, self.__doc__ = make, section, make.__doc__

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, view, owner=None):  # only where the view's __dict__ has no value of that name yet
        if view is None:
            return self
        return view._once(self.name, self.make, view, section=self.section)


def once(make=None, *, section: str | None = None):
    """@once, or @once(section=...): a method made a view's value, computed on first read (_Once)."""
    return _Once(make, section) if make is not None else lambda make: _Once(make, section)


def _typed(key: str, cls) -> _Once:
    """A record section as its type (harness.record.sections), made once."""
    return _Once(lambda view: cls.of(view._r.get(key)), section=key)

# What the record index (harness.store.index) keeps of each record's view beside the record: the values compare
# derives for every run, made by this class when the record is indexed and handed back with the record (its `known`),
# so a warm compare of 100,000 records derives none of them again. Each is read through _once under its name; the
# index's code identity covers this file, so a change to a rule here rebuilds every index.
# Their names are the attributes the view keeps them under: a method's value is named with its call (a value named
# "peak_memory" in the view's __dict__ would hide the method peak_memory).
INDEXED = ("timed_ms", "step_losses", "tokens_per_step", "summary_numbers", "peak_memory()", "peak_memory(widest)",
           "contended", "contention_reason", "mfu:mfu_datasheet", "mfu:mfu_measured", "kernels_reason", "lm_head_kernel",
           "warmup_steps", "timed_median")
SAME_AS_STEPS_LOSS = "steps.loss"  # indexed()'s step_losses where they are the record's own list


class RecordView:
    """Read-only accessors over one record dict (the dict itself is not copied; nothing here changes it)."""

    __slots__ = ("__dict__", "_r")

    def __init__(self, record: dict):
        self._r = record
        # The __dict__ holds what was read or derived once (a kernel profile has hundreds of rows), by name (_Once). A
        # record from the index brings its INDEXED values, made for it alone: every view of it shares them (each value
        # is the record's, not the view's).
        known = getattr(record, "known", None)
        if known is not None:
            self.__dict__ = known

    def indexed(self) -> dict:
        """The INDEXED values by name (what the record index keeps as JSON; known_values reads them back): each
        accessor read once, and what it keeps under its name taken."""
        self.timed_ms, self.step_losses, self.tokens_per_step, self.summary_numbers, self.contended  # noqa: B018
        self.contention_reason  # noqa: B018
        self.peak_memory(), self.peak_memory(widest=True), self.kernels_reason, self.lm_head_kernel
        self.mfu("mfu_datasheet"), self.mfu("mfu_measured"), self.warmup_steps, self.timed_median
        values = {name: self.__dict__[name] for name in INDEXED}
        # What the record holds itself is not kept twice (a quarter of the bytes of a record's core, and of its
        # decoding): the losses where they are the steps' own list, the timed steps where they are the tail of the
        # steps' times, the summary's numbers where they are its entries
        steps = _dict(self._r.get("steps"))
        if values["step_losses"] and values["step_losses"] == steps.get("loss"):
            values["step_losses"] = SAME_AS_STEPS_LOSS
        ms, timed = steps.get("ms"), values["timed_ms"]
        if timed and isinstance(ms, list) and ms[len(ms) - len(timed):] == timed:
            values["timed_ms"] = len(ms) - len(timed)  # where the tail starts
        summary, numbers = self._r.get("summary"), values["summary_numbers"]
        if isinstance(summary, dict):  # the summary's numbers where they are its own entries, in its order: the others
            left = [name for name in summary if name not in numbers]  # a list (the numbers themselves are a dict)
            if [(k, type(v), v) for k, v in summary.items() if k in numbers] == \
                    [(k, type(v), v) for k, v in numbers.items()]:
                values["summary_numbers"] = left
        return values

    @staticmethod
    def known_values(values: dict, record: dict) -> dict:
        """indexed()'s JSON back as the values the accessors return (a record's `known`: RecordView reads them), the
        losses and timed steps from `record`'s steps and the summary's numbers from its summary where indexed() left
        them there."""
        values["peak_memory()"] = tuple(values["peak_memory()"])
        values["peak_memory(widest)"] = tuple(values["peak_memory(widest)"])
        if values["step_losses"] == SAME_AS_STEPS_LOSS:
            values["step_losses"] = record["steps"]["loss"]
        if isinstance(values["timed_ms"], int):
            values["timed_ms"] = record["steps"]["ms"][values["timed_ms"]:]
        if isinstance(values["summary_numbers"], list):  # the summary less these entries (most often none: the same)
            left, summary = values["summary_numbers"], record["summary"]
            values["summary_numbers"] = {k: v for k, v in summary.items() if k not in left} if left else summary
        return values

    def _once(self, name: str, make, *args, section: str | None = None):
        """make(*args), read once per view; where it comes from one section that the record index shares between
        records (harness.store.codec.SharedSection), once for all those records (100,000 records, a few environments)."""
        kept = self.__dict__
        value = kept.get(name, _UNREAD)
        if value is _UNREAD:
            shared = getattr(self._r.get(section), "typed", None) if section else None
            if shared is None:
                value = make(*args)
            else:
                value = shared.get(name, _UNREAD)
                if value is _UNREAD:
                    value = shared[name] = make(*args)
            kept[name] = value
        return value

    @classmethod
    def of(cls, record: RecordView | dict) -> RecordView:
        """A view of a record dict, or the view itself (for callers that take either)."""
        return record if isinstance(record, RecordView) else cls(record)

    def get(self, key: str, default=None):
        """A top-level field as stored (for fields without an accessor of their own)."""
        return self._r.get(key, default)

    @property
    def raw(self) -> MappingProxyType:
        """The record, read-only."""
        return MappingProxyType(self._r)

    # Identity and outcome
    run_id = property(lambda self: self._r.get("run_id"))
    kind = property(lambda self: self._r.get("kind"))
    status = property(lambda self: self._r.get("status"))
    reason = property(lambda self: self._r.get("reason"))
    env = property(lambda self: self._r.get("env"))
    plan = property(lambda self: self._r.get("plan"))
    rung = property(lambda self: self._r.get("rung"))
    rung_index = property(lambda self: self._r.get("rung_index"))
    repeat = property(lambda self: self._r.get("repeat"))
    started_at = property(lambda self: self._r.get("started_at"))

    @property
    def invocation(self) -> str | None:
        """The harness process (harness.run, calibrate, bisect, tune) that ran it: one id shared by every run that
        process made, so runs of one invocation are told from runs of two (their offset; harness.analysis.noise).
        None in records made before runs carried one."""
        value = self._r.get("invocation")
        return value if isinstance(value, str) and value and value != NOT_RECORDED else None

    @once
    def sweep(self) -> Sweep | None:
        """The sweep point a run is (harness.record.sections.Sweep), None for a plan rung."""
        return Sweep.of(self._r["sweep"]) if _dict(self._r.get("sweep")) else None

    reference = _typed("reference", Reference)  # a transcribed log line (false if none)
    peer = _typed("peer", Peer)  # a peer program's numbers: name, program, source, line
    ok = property(lambda self: self._r.get("status") == "ok")

    @property
    def sweep_point(self) -> str:
        """'field=value' of the sweep point a run is, '' for a plan rung."""
        s = self.sweep
        return f"{s.field}={s.value}" if s else ""

    # What was measured
    # typed, read-only; .to_dict(): as stored. Made once: tables ask a cell's first run for it per row
    workload = once(lambda self: Workload(self._r.get("workload")))
    workload_hash = property(lambda self: self._r.get("workload_hash"))

    def workload_value(self, key: str):
        """One workload field; a field added after the record was written reads as the value every earlier record
        ran with (model.ADDED_FIELD_DEFAULTS: lm_head_loss "plain")."""
        workload = self.workload
        return getattr(workload, key) if workload.recorded(key) else ADDED_FIELD_DEFAULTS.get(key)

    flags = property(lambda self: _dict(_dict(self._r.get("flags")).get("requested")))
    flags_hash = property(lambda self: _dict(self._r.get("flags")).get("hash"))
    flags_section = _typed("flags", Flags)  # requested, applied, after, changes, hash
    steps = _typed("steps", Steps)

    @property
    def set_key(self) -> tuple[str, str]:
        """What must be equal for two runs to be comparable: (workload hash, flags hash). The one rule of every table."""
        return (self.workload_hash, self.flags_hash)

    # Where it ran, and the sections as their types (harness.record.sections and .parts; read by attribute)
    environment = _typed("environment", Environment)
    summary = _typed("summary", Summary)
    explain = _typed("explain", Explain)
    contention = _typed("contention", Contention)

    @once
    def contention_reason(self) -> str | None:
        """Why a contended run was called so (harness.provenance.contention's words), None for a clean one."""
        return self.contention.reason if self.contended else None

    @once
    def contended(self) -> bool:
        """Measured under contention (older records do not say, and are not flagged)."""
        return bool(self.contention.contended)

    # Read for every run (its env label) and the same for every run of an environment: made once per environment
    @once(section="environment")
    def container_image(self) -> str | None:
        """The image the run was made in (HARNESS_IMAGE: envs/<name> or a cluster's image); None outside one."""
        return self.environment.container.image or None

    @once(section="environment")
    def torch_version(self) -> str | None:
        return _text(self.environment.torch.version)

    @property
    def rerun_command(self) -> str | None:
        """The one command that reruns this run (record.rerun.command)."""
        return _dict(self._r.get("rerun")).get("command")

    @property
    def workload_code(self) -> str:
        """The identity of the code that defined the measurement (harness.provenance.workload_code), or "unknown"."""
        return self._r.get("workload_code") or "unknown"

    @property
    def torch_threads(self) -> int | None:
        """The torch thread count the worker set (environment.threads.torch)."""
        return _int(self.environment.threads.torch)

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
        return _dict(self.environment.cpu.isa)

    @property
    def cpu_kernels(self) -> str | None:
        """The CPU kernel path torch picked (environment.cpu.torch_capability: AVX512, AVX2)."""
        return _text(self.environment.cpu.torch_capability)

    @property
    def versions(self) -> dict:
        """The library and driver versions a report's environment table names."""
        env = self.environment
        return {"torch": env.torch.version, "cuda": env.torch.cuda, "cudnn": env.torch.cudnn, "triton": env.triton,
                "driver": env.driver.nvml.driver, "python": _dict(env.python).get("version"), "cpu": env.cpu.model}

    @property
    def packages(self) -> dict:
        """environment.packages: what `pip freeze` said (and its hash)."""
        return _dict(self.environment.packages)

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

    # The numbers
    @once
    def summary_numbers(self) -> dict:
        """The summary's fields that hold a number, by name (a group's medians read them for each of its runs)."""
        return {name: value for name in Summary.names()
                if isinstance(value := getattr(self.summary, name), (int, float)) and not isinstance(value, bool)}

    def summary_number(self, name: str) -> float | None:
        """One numeric summary field (tokens_per_s, step_ms_median, first_step_ms, mfu, ...); None where absent."""
        return self.summary_numbers.get(name)

    @property
    def tokens_per_s(self) -> float | None:
        """The worker's own tokens/s (summary.tokens_per_s) of an ok run; None for any other."""
        value = self.summary_number("tokens_per_s")
        return float(value) if value is not None and self.ok else None

    @property
    def first_step_ms(self) -> float | None:
        return self.summary_number("first_step_ms")

    @once  # the loss rule reads it for every run of a comparison set
    def warmup_steps(self) -> int:
        warmup = self.workload.warmup_steps
        return warmup if isinstance(warmup, int) else 0

    @once
    def step_losses(self) -> list:
        """Every step's loss as recorded (None where a step had none); [] for a record with only a summary. The same
        list on every call: read it, never change it."""
        return list(self.steps.loss or [])

    @property
    def step_ms(self) -> list:
        """Every step's time as recorded, step 0 (the compile) included; [] for a record with only a summary."""
        return list(_dict(self._r.get("steps")).get("ms") or [])

    @property
    def worker_seconds(self) -> float | None:
        """finished_at - started_at: the worker's own time (compile, steps, kernel capture, writing the record);
        None where either is missing or unreadable."""
        try:
            start, end = (datetime.fromisoformat(self._r[k]) for k in ("started_at", "finished_at"))
        except (KeyError, TypeError, ValueError):
            return None
        return (end - start).total_seconds()

    @once
    def timed_ms(self) -> list[float]:
        """The timed step times, by the worker's own rule (gpt.config.timed_part: the warm-up and step 0 excluded). A
        reference record (one logged step) has its logged step after step 0; an older record without warmup_steps says
        how many steps were timed in summary.timed_steps. The same list on every call: read it, never change it."""
        ms = self.steps.ms or []
        if self.kind == "reference":
            return [x for x in ms[1:] if x is not None]
        warmup = self.workload.warmup_steps
        if not isinstance(warmup, int):
            timed = self.summary.timed_steps
            warmup = len(ms) - timed if isinstance(timed, int) and 0 < timed <= len(ms) else 1
        return [x for x in timed_part(ms, warmup) if x is not None]

    @once
    def timed_median(self) -> float | None:
        """The median of its timed steps (the mean of the middle two for an even count), None without any: the run's
        own step time, which the noise rule and its cell's interval each read (harness.analysis.cell_values.rate)."""
        ms = self.timed_ms
        return float(statistics.median(ms)) if ms else None

    @once
    def tokens_per_step(self) -> int | None:
        """summary.tokens_per_step, else batch_size x seq_len x grad_accum from the workload."""
        tps = _int(self.summary.tokens_per_step)  # guarded: a wrong-typed field reads as absent, never a crash
        if tps:
            return tps
        w = self.workload
        batch, seq_len, accum = _int(w.batch_size), _int(w.seq_len), _int(w.grad_accum)
        if batch and seq_len:
            return batch * seq_len * (accum or 1)
        return None

    def memory(self, metric: str) -> int | None:
        """The bytes of one named metric of MEMORY_METRICS, None where the record has none."""
        value = getattr(self.summary, _MEMORY_FIELD[metric])
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    @property
    def usable_memory_bytes(self) -> int | None:
        """The memory a run may use: its workload's memory budget if set, else the device's total memory
        (CUDA: environment.gpu.memory_bytes; CPU: environment.host_ram_bytes)."""
        budget = self.workload.memory_budget_gib
        if budget:
            return int(budget * 2**30)
        if self.is_cuda:
            return self.environment.gpu.memory_bytes
        return self.environment.host_ram_bytes

    def peak_memory(self, widest: bool = False) -> tuple[int | None, str]:
        """(bytes, metric name) of the memory a run used. The comparable metric (widest=False): a reference log
        has nvidia-smi's "device used"; a CUDA run (or any run with an allocator peak) "peak alloc"; a CPU run
        "peak RSS". widest=True: the most inclusive metric the record has: on a CUDA run device used, else peak
        reserved, else peak alloc; on a CPU run peak RSS; (None, the last of those) when it has none."""
        return self._once("peak_memory(widest)" if widest else "peak_memory()", self._peak_memory, widest)

    def _peak_memory(self, widest: bool) -> tuple[int | None, str]:
        if widest:  # a CUDA run's memory is the device's: the host process's RSS never stands in for it
            names = [name for _key, name in MEMORY_METRICS if name != "peak RSS"] if self.is_cuda else ["peak RSS"]
            return next(((self.memory(name), name) for name in names if self.memory(name) is not None), (None, names[-1]))
        if self.kind == "reference":
            metric = "device used"
        elif self.environment.device == "cuda" or self.summary.peak_allocated_bytes is not None:
            metric = "peak alloc"
        else:
            metric = "peak RSS"
        return self.memory(metric), metric

    # Why: the evidence (record.explain, docs/explain.md)
    @property
    def kernels(self) -> Kernels:
        """explain.kernels when the profile is there (available), else an absent (false) Kernels: kernels_reason says
        why."""
        k = self.explain.kernels
        return k if k.available else Kernels.absent()

    @once
    def kernels_reason(self) -> str:
        """'available' (kernels is the profile), or why the record has no kernel profile."""
        k = self._explain_part("kernels", Evidence)  # whether and why, its rows left as they are (read per record)
        return "available" if k.available else (k.reason or "not profiled")

    @property
    def kernel_categories(self) -> dict[str, KernelTime]:
        """category -> its time of the kernel profile ({} without one). On a CPU, Inductor emits C++ kernels, not
        Triton: the profile's 'triton' category (harness.evidence.kernels) is named for what it holds there."""
        cpu = self.kernels.device == "cpu"
        return {(CPU_INDUCTOR if cpu and c == "triton" else c): v for c, v in (self.kernels.by_category or {}).items()}

    @property
    def lm_head_gemm(self) -> Gemm:
        return self.kernels.lm_head_gemm

    @once
    def lm_head_kernel(self) -> str | None:
        """The lm_head forward GEMM's kernel name from the kernel capture; None where there is none."""
        if self.kernels_reason != "available":  # no profile, no name
            return None
        # the one GEMM read, not the whole profile typed (the index asks it of every record): what Kernels.of makes of it
        name = Gemm.of(_dict(self._explain_object("kernels")).get("lm_head_gemm")).name
        return str(name) if name else None

    @once
    def vocab_gemms(self) -> tuple[Gemm, ...]:
        """The lm_head GEMMs of the kernel profile (explain.kernels.vocab_gemms), () without one."""
        if self.kernels_reason != "available":
            return ()
        # that list read, not the whole profile typed (a cell looks through its profiled runs for one that has it)
        raw = _dict(self._explain_object("kernels")).get("vocab_gemms")
        return tuple(Gemm.of(v) for v in raw) if isinstance(raw, list) else ()

    def mfu(self, key: str) -> float | None:
        """explain.mfu's mfu_datasheet or mfu_measured (read for every run of a cell: explain's mfu object alone, not
        its kernel profile)."""
        return self._once(f"mfu:{key}", self._mfu, key)

    def _mfu(self, key: str) -> float | None:
        value = getattr(self._explain_part("mfu", Mfu), key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def _explain_part(self, name: str, cls):
        """One object of explain as its type, read without the rest where the record index keeps explain unread (its
        kernel profile is most of a record's bytes; the median of a cell's MFU reads every run's)."""
        def read():
            return getattr(self.explain, name) if "explain" in self.__dict__ else cls.of(self._explain_object(name))
        return self._once(f"explain.{name} as {cls.__name__}", read)

    def _explain_object(self, name: str):
        """One object of explain as its JSON holds it."""
        explain = self._r.get("explain")
        peek = getattr(explain, "peek", None)  # harness.store.codec.LazySection: one key, the section left unread
        return peek(name) if peek is not None else _dict(explain).get(name)

    @property
    def mapped_libraries(self) -> dict:
        """library -> version of the libraries the worker process mapped (explain.libraries.mapped)."""
        mapped = _dict(self.explain.libraries.mapped)
        return {lib: info["version"] for lib, info in mapped.items()
                if isinstance(info, dict) and info.get("version") is not None}

    @property
    def memory_split(self) -> MemorySplit:
        return self.explain.memory_split
