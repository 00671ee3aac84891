"""RecordView's part that reads the numbers a run measured: its steps (all of them, the timed ones by the
worker's own rule, their median, the losses), tokens per step, and its summary's numeric fields. No torch import
here.
"""

from __future__ import annotations

import statistics
from datetime import datetime

from gpt.config import timed_part
from harness.record.sections import Summary
from harness.record.view_base import ViewBase, as_dict, as_int, once


class NumbersView(ViewBase):
    """The numbers of a run's steps and summary (read through RecordView)."""

    __slots__ = ()

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
        return list(as_dict(self._r.get("steps")).get("ms") or [])

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
        tps = as_int(self.summary.tokens_per_step)  # guarded: a wrong-typed field reads as absent, never a crash
        if tps:
            return tps
        w = self.workload
        batch, seq_len, accum = as_int(w.batch_size), as_int(w.seq_len), as_int(w.grad_accum)
        if batch and seq_len:
            return batch * seq_len * (accum or 1)
        return None
