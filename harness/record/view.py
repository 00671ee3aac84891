"""A read-only view of one record: the accessors every table needs, each rule written once.

Readers (harness.compare, harness.report, the findings, the fastest-found table, sweeps, scripts) ask a
RecordView instead of walking the dict: timed steps, tokens per step, the device label, the device a run
was meant for, its peak memory with the metric named, status, env, rung, workload and flags hashes.
The record it wraps was read through harness.record.io (migrated to the current version, validated).
RecordView joins its parts, one concern each: view_base (the record, its fields and sections, values made once),
view_environment (where it ran), view_numbers (steps and summary), view_memory, view_evidence (record.explain); here
are the run's identity, what was measured, and the values the record index keeps. No torch import here.
"""

from __future__ import annotations

from harness.record.model import ADDED_FIELD_DEFAULTS, NOT_RECORDED
from harness.record.sections import Sweep
from harness.record.view_base import as_dict, once
from harness.record.view_evidence import EvidenceView
from harness.record.view_memory import MemoryView
from harness.record.view_numbers import NumbersView

# What the record index (harness.store.index) keeps of each record's view beside the record: the values compare
# derives for every run, made by this class when the record is indexed and handed back with the record (its `known`),
# so a warm compare of 100,000 records derives none of them again. Each is read through _once under its name; the
# index's code identity covers all of harness/record/ (this file and the view's parts), so a change to a rule here
# rebuilds every index.
# Their names are the attributes the view keeps them under: a method's value is named with its call (a value named
# "peak_memory" in the view's __dict__ would hide the method peak_memory).
INDEXED = ("timed_ms", "step_losses", "tokens_per_step", "summary_numbers", "peak_memory()", "peak_memory(widest)",
           "contended", "contention_reason", "mfu:mfu_datasheet", "mfu:mfu_measured", "kernels_reason", "lm_head_kernel",
           "warmup_steps", "timed_median")
SAME_AS_STEPS_LOSS = "steps.loss"  # indexed()'s step_losses where they are the record's own list


class RecordView(MemoryView, NumbersView, EvidenceView):
    """Read-only accessors over one record dict (the dict itself is not copied; nothing here changes it)."""

    __slots__ = ()

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
        steps = as_dict(self._r.get("steps"))
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

    @classmethod
    def of(cls, record: RecordView | dict) -> RecordView:
        """A view of a record dict, or the view itself (for callers that take either)."""
        return record if isinstance(record, RecordView) else cls(record)

    # Identity and outcome (the fields as stored: view_base)
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
        return Sweep.of(self._r["sweep"]) if as_dict(self._r.get("sweep")) else None

    @property
    def sweep_point(self) -> str:
        """'field=value' of the sweep point a run is, '' for a plan rung."""
        s = self.sweep
        return f"{s.field}={s.value}" if s else ""

    # What was measured (the workload and flags sections as their types: view_base)
    workload_hash = property(lambda self: self._r.get("workload_hash"))

    def workload_value(self, key: str):
        """One workload field; a field added after the record was written reads as the value every earlier record
        ran with (model.ADDED_FIELD_DEFAULTS: lm_head_loss "plain")."""
        workload = self.workload
        return getattr(workload, key) if workload.recorded(key) else ADDED_FIELD_DEFAULTS.get(key)

    flags = property(lambda self: as_dict(as_dict(self._r.get("flags")).get("requested")))
    flags_hash = property(lambda self: as_dict(self._r.get("flags")).get("hash"))

    @property
    def set_key(self) -> tuple[str, str]:
        """What must be equal for two runs to be comparable: (workload hash, flags hash). The one rule of every table."""
        return (self.workload_hash, self.flags_hash)

    @once
    def contention_reason(self) -> str | None:
        """Why a contended run was called so (harness.provenance.contention's words), None for a clean one."""
        return self.contention.reason if self.contended else None

    @once
    def contended(self) -> bool:
        """Measured under contention (older records do not say, and are not flagged)."""
        return bool(self.contention.contended)

    @property
    def rerun_command(self) -> str | None:
        """The one command that reruns this run (record.rerun.command)."""
        return as_dict(self._r.get("rerun")).get("command")

    @property
    def workload_code(self) -> str:
        """The identity of the code that defined the measurement (harness.provenance.workload_code), or "unknown"."""
        return self._r.get("workload_code") or "unknown"
