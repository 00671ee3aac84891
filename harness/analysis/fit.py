"""Whether a run fits its device: status ok and peak memory + headroom <= usable memory.

The one rule the batch search judges its tries by (harness.batch_search), harness.tune checks its winner with, and
harness.analysis.fastest applies to every candidate it names. No torch import.

  usable   = the workload's memory budget if set, else the device's total memory (RecordView.usable_memory_bytes)
  peak     = the most inclusive peak memory the record has (RecordView.peak_memory(widest=True): NVML device used,
             else the allocator's peak reserved; CPU: the worker's peak RSS)
  headroom = given, else GPU_HEADROOM_GIB on a GPU and CPU_HEADROOM_GIB on a CPU
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.record.view import RecordView

GPU_HEADROOM_GIB = 5.0
CPU_HEADROOM_GIB = 0.0
GIB = 2**30


@dataclass(frozen=True)
class Fit:
    """One run judged: its B, status, tokens/s, peak and usable memory, the headroom, and whether (why not) it fits."""

    batch_size: int | None
    status: str
    tokens_per_s: float | None
    peak_bytes: int | None
    memory_source: str  # the peak's metric name (harness.record.view_memory.MEMORY_METRICS), '-' when unknown
    usable_bytes: int | None
    headroom_bytes: int
    why: str | None  # None when it fits
    record: RecordView

    @property
    def fits(self) -> bool:
        return self.why is None


def headroom_bytes(view: RecordView, headroom_gib: float | None = None) -> int:
    if headroom_gib is not None:
        return int(headroom_gib * GIB)
    return int((GPU_HEADROOM_GIB if view.is_cuda else CPU_HEADROOM_GIB) * GIB)


def judge(record: RecordView | dict, headroom_gib: float | None = None) -> Fit:
    """One run against the rule above (headroom_gib None: the device's default headroom)."""
    view = RecordView.of(record)
    peak, metric = view.peak_memory(widest=True)
    usable = view.usable_memory_bytes
    headroom = headroom_bytes(view, headroom_gib)
    why = None
    if not view.ok:
        why = f"status {view.status}" + (f": {view.reason}" if view.reason else "")
    elif peak is None or usable is None:
        why = "peak or usable memory unknown"
    elif peak + headroom > usable:
        why = f"peak {peak / GIB:.2f} GiB + headroom {headroom / GIB:.2f} GiB > usable {usable / GIB:.2f} GiB"
    return Fit(view.workload.batch_size, view.status, view.tokens_per_s, peak,
               metric if peak is not None else "-", usable, headroom, why, view)
