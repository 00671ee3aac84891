"""Kernel time per step of one group of runs, by what the kernels do (attention, GEMMs and the lm_head's among
them, fused lm_head loss, Inductor-generated, optimizer, the rest), from its explain.kernels profile: what
harness.analysis.fastest's "What explains it" tables compare. No torch import.
"""

from __future__ import annotations

from harness.analysis.group import Group
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


def kernel_split(g: Group) -> dict | None:
    """Per profiled step (us) from explain.kernels: attention, GEMMs (and the lm_head's among them), the fused
    lm_head loss kernels, Inductor-generated, optimizer, the rest; step_ms is the timed median. None without a profile."""
    k = g.kernels
    if not k:
        return None
    cats = {c: v.per_step_us or 0.0 for c, v in g.kernel_categories.items()}
    out = {
        "step_ms": g.ms_per_step,
        "busy": k.busy_us_per_step or sum(cats.values()),
        "attention": cats.get("attention", 0.0),
        "gemm": cats.get("gemm", 0.0),
        "lm_head_gemm": sum((v.per_step_us or 0.0) for v in g.vocab_gemms),
        "lm_head_loss": cats.get("lm-head-loss", 0.0),
        "triton": cats.get("triton", 0.0) + cats.get(CPU_INDUCTOR, 0.0),
        "optimizer": cats.get("optimizer-fused", 0.0) + cats.get("optimizer-foreach", 0.0),
    }
    counted = ("attention", "gemm", "lm-head-loss", "triton", CPU_INDUCTOR, "optimizer-fused", "optimizer-foreach")
    out["rest"] = sum(v for c, v in cats.items() if c not in counted)
    # on a GPU one stream runs one kernel at a time, so the rest of the step is idle or went uncaptured; CPU op self
    # times come from several threads and do not add up to wall time
    cuda = k.device == "cuda"
    out["uncaptured"] = out["step_ms"] * 1000.0 - out["busy"] if cuda and out["step_ms"] is not None else None
    out["device"] = k.device
    return out
