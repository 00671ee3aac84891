"""Kernel time per step of one group of runs, by what the kernels do (attention, GEMMs and the lm_head's among
them, fused lm_head loss, Inductor-generated, optimizer, the rest), from its explain.kernels profile: what
harness.analysis.fastest's "What explains it" tables compare; and where one run's step time goes, class by class,
with its GEMMs' FLOP rate against the device's measured matmul peak (StepTime). No torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.analysis.group import Group
from harness.record.parts import Gemm, KernelTime
from harness.record.view import RecordView
from harness.record.view_evidence import CPU_INDUCTOR

SPLIT = (  # (key, label) of the kernel-time split
    ("step_ms", "step time (median of the timed steps)"),
    ("busy", "all captured kernels (summed per profiled step)"),
    ("uncaptured", "step time not in captured kernels (idle gaps, uncaptured kernels)"),
    ("attention", "attention kernels"),
    ("gemm", "GEMMs, all"),
    ("lm_head_gemm", "lm_head GEMMs (part of the GEMMs above)"),
    ("lm_head_loss", "fused lm_head loss kernels (Liger/CCE)"),
    ("triton", "Inductor-generated kernels"),
    ("optimizer", "optimizer kernels"),
    ("rest", "everything else"),
)
CLASSES = ("attention", "gemm", "lm_head_loss", "triton", "optimizer", "rest")  # together: all kernel time
# the profile's categories each class holds ("rest": every other one)
CATEGORIES = {"attention": ("attention",), "gemm": ("gemm",), "lm_head_loss": ("lm-head-loss",),
              "triton": ("triton", CPU_INDUCTOR), "optimizer": ("optimizer-fused", "optimizer-foreach")}


def by_class(categories: dict[str, KernelTime], vocab_gemms: tuple[Gemm, ...]) -> dict[str, float]:
    """us per profiled step of each of CLASSES (adding up to all kernel time), and lm_head_gemm: the GEMMs whose
    M, N or K is the vocab (explain.kernels.vocab_gemms), part of "gemm"."""
    cats = {c: v.per_step_us or 0.0 for c, v in categories.items()}
    out = {key: sum(cats.get(c, 0.0) for c in held) for key, held in CATEGORIES.items()}
    counted = {c for held in CATEGORIES.values() for c in held}
    out["rest"] = sum(v for c, v in cats.items() if c not in counted)
    out["lm_head_gemm"] = sum((v.per_step_us or 0.0) for v in vocab_gemms)
    return out


@dataclass(frozen=True)
class StepTime:
    """Where one run's step goes: its kernel profile's classes (us per profiled step), the rest of its own median
    timed step (idle, or in kernels the profiler did not capture), and its GEMMs' FLOP rate against the matmul peak
    measured on its device before it ran."""

    run: RecordView  # the run whose profile and step these are
    step_us: float | None  # its median timed step
    classes: dict[str, float]  # by_class
    gemm_flops: float | None  # per step, an estimate: 6 N tokens, less the lm_head's where the fused loss ran it
    lm_head_fused: bool  # the lm_head's matmuls ran inside the fused loss kernels: no lm_head GEMM in the profile
    peak_flops: float | None  # explain.mfu.measured_peak
    peak_dtype: str | None

    @property
    def device(self) -> str | None:
        return self.run.kernels.device

    @property
    def busy_us(self) -> float:
        return sum(self.classes[c] for c in CLASSES)

    @property
    def idle_us(self) -> float | None:
        """The step less all captured kernel time: the rows add up to the step (a GPU stream runs one kernel at a
        time; CPU op self times from several threads do not add up to wall time, and this means nothing there)."""
        return None if self.step_us is None else self.step_us - self.busy_us

    @property
    def gemm_flops_per_s(self) -> float | None:
        gemm_us = self.classes["gemm"]
        return self.gemm_flops / (gemm_us * 1e-6) if self.gemm_flops and gemm_us > 0 else None

    @property
    def of_peak(self) -> float | None:
        rate = self.gemm_flops_per_s
        return rate / self.peak_flops if rate is not None and self.peak_flops else None


def gemm_flops(run: RecordView, lm_head_fused: bool) -> float | None:
    """The GEMMs' FLOPs per step: the matmul part of nanoGPT's flops_per_token, 6 N (explain.mfu.n_params) times the
    tokens per step; where the fused loss ran the lm_head's matmuls, its 6 V C (the tied embedding in N) left out."""
    n, tokens = run.n_params, run.tokens_per_step
    if not n or not tokens:
        return None
    if lm_head_fused:
        vocab, width = run.workload.vocab_size, run.workload.n_embd
        if not isinstance(vocab, int) or not isinstance(width, int):
            return None
        n -= vocab * width
    return 6.0 * n * tokens


def step_time(g: Group) -> StepTime | None:
    """Where the step goes for g's newest profiled run (Group.profiled_run); None without a profile."""
    run = g.profiled_run
    if run is None:
        return None
    classes = by_class(run.kernel_categories, run.vocab_gemms)
    fused = not run.vocab_gemms and classes["lm_head_loss"] > 0
    step = run.timed_median
    peak, dtype = run.measured_peak
    return StepTime(run, step * 1000.0 if step is not None else None, classes, gemm_flops(run, fused), fused, peak, dtype)


def kernel_split(g: Group) -> dict | None:
    """step_time's figures as the "What explains it" tables compare them: us per profiled step of each class (and the
    lm_head's GEMMs), busy (the profile's own summed kernel time per step), uncaptured (the step less busy, GPU
    only), step_ms (the run's median timed step), device and run. None without a profile."""
    st = step_time(g)
    if st is None:
        return None
    k = st.run.kernels
    out = {"step_ms": st.run.timed_median, **st.classes}
    out["busy"] = k.busy_us_per_step or st.busy_us
    # on a GPU one stream runs one kernel at a time, so the rest of the step is idle or went uncaptured; CPU op self
    # times come from several threads and do not add up to wall time
    out["uncaptured"] = st.step_us - out["busy"] if k.device == "cuda" and st.step_us is not None else None
    out["device"] = k.device
    out["run"] = st.run
    return out
