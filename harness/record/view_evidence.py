"""RecordView's part that reads the evidence of why a run was as fast as it was (record.explain, docs/explain.md):
the kernel profile and its lm_head GEMMs, the MFUs, the libraries the worker mapped, the memory split. Where the record
index keeps explain unread, the objects a table reads of every run are read alone. No torch import here.
"""

from __future__ import annotations

from harness.record.parts import Evidence, Gemm, Kernels, KernelTime, MemorySplit, Mfu
from harness.record.view_base import ViewBase, as_dict, once

CPU_INDUCTOR = "inductor-cpp"  # what a CPU profile's Inductor-generated kernels are called here


class EvidenceView(ViewBase):
    """The evidence section's values (read through RecordView)."""

    __slots__ = ()

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
    def inductor_kernels_missed(self) -> bool:
        """A compiled GPU run whose kernel profile has no Inductor-generated (Triton) kernel: a profile taken before
        the capture fix (gpt/torch_compat.py device_kernel_events, torch 2.4+ dropped every Triton kernel). Its
        Inductor time is in the step but in no kernel row, so its shares, and any comparison of its kernels with a
        complete profile's, leave that time out (a compiled model on a GPU always runs Triton kernels)."""
        k = self.kernels
        return bool(k) and k.device == "cuda" and self.workload.compile not in (None, "off") and \
            not (k.by_category or {}).get("triton")

    @property
    def lm_head_gemm(self) -> Gemm:
        return self.kernels.lm_head_gemm

    @once
    def lm_head_kernel(self) -> str | None:
        """The lm_head forward GEMM's kernel name from the kernel capture; None where there is none."""
        if self.kernels_reason != "available":  # no profile, no name
            return None
        # the one GEMM read, not the whole profile typed (the index asks it of every record): what Kernels.of makes of it
        name = Gemm.of(as_dict(self._explain_object("kernels")).get("lm_head_gemm")).name
        return str(name) if name else None

    @once
    def vocab_gemms(self) -> tuple[Gemm, ...]:
        """The lm_head GEMMs of the kernel profile (explain.kernels.vocab_gemms), () without one."""
        if self.kernels_reason != "available":
            return ()
        # that list read, not the whole profile typed (a cell looks through its profiled runs for one that has it)
        raw = as_dict(self._explain_object("kernels")).get("vocab_gemms")
        return tuple(Gemm.of(v) for v in raw) if isinstance(raw, list) else ()

    def mfu(self, key: str) -> float | None:
        """explain.mfu's mfu_datasheet or mfu_measured (read for every run of a cell: explain's mfu object alone, not
        its kernel profile)."""
        return self._once(f"mfu:{key}", self._mfu, key)

    def _mfu(self, key: str) -> float | None:
        value = getattr(self._explain_part("mfu", Mfu), key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    @property
    def n_params(self) -> int | None:
        """N of the MFU's 6N FLOPs per token (explain.mfu.n_params: nanoGPT's non-embedding count, the tied token
        embedding once), None where not recorded."""
        n = self._explain_part("mfu", Mfu).n_params
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None

    @property
    def measured_peak(self) -> tuple[float | None, str | None]:
        """(FLOP/s, dtype) of the device's matmul peak measured before the run in the run's precision
        (explain.mfu.measured_peak: what mfu_measured divides by); (None, None) where it was not measured."""
        peak = as_dict(self._explain_part("mfu", Mfu).measured_peak)
        flops, dtype = peak.get("flops"), peak.get("dtype")
        if not isinstance(flops, (int, float)) or isinstance(flops, bool) or not flops > 0:
            return None, None
        return float(flops), dtype if isinstance(dtype, str) else None

    @property
    def measured_peak_reason(self) -> str:
        """Why measured_peak is absent: explain.mfu's measured_peak_reason (or its reason), else 'not recorded'."""
        mfu = self._explain_part("mfu", Mfu)
        return str(mfu.measured_peak_reason or mfu.reason or "not recorded")

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
        return peek(name) if peek is not None else as_dict(explain).get(name)

    @property
    def mapped_libraries(self) -> dict:
        """library -> version of the libraries the worker process mapped (explain.libraries.mapped)."""
        mapped = as_dict(self.explain.libraries.mapped)
        return {lib: info["version"] for lib, info in mapped.items()
                if isinstance(info, dict) and info.get("version") is not None}

    @property
    def memory_split(self) -> MemorySplit:
        return self.explain.memory_split
