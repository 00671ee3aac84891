"""RecordView's part that reads the memory a run used, each metric named (device used, peak reserved, peak alloc,
peak RSS), the comparable one picked by one rule, and the memory a run may use. No torch import here.
"""

from __future__ import annotations

from harness.record.view_environment import EnvironmentView

# Peak-memory metrics, most inclusive first: (summary field, metric name).
MEMORY_METRICS = (("device_used_bytes", "device used"), ("peak_reserved_bytes", "peak reserved"),
                  ("peak_allocated_bytes", "peak alloc"), ("peak_rss_bytes", "peak RSS"))
_MEMORY_FIELD = {name: key for key, name in MEMORY_METRICS}


class MemoryView(EnvironmentView):
    """The memory a run used and may use (read through RecordView): a CUDA run's is the device's (EnvironmentView)."""

    __slots__ = ()

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
