"""Frozen global performance flags: applied once before the model is built, read back after every step.

The hash is over the requested values, which use one vocabulary for every torch version (e.g.
sdpa="auto" rather than a version-specific list of backends), so the same intent hashes the same
under 2.1.2 and the nightly, and different intents can never be compared by accident. What each
torch actually reports is stored beside it (applied / after).

Inductor options (inductor_*: default | on | off) are the compiler's own config switches, set on
torch._inductor.config before anything is compiled. "default" leaves torch's own default (which differs
between versions; applied/after say what it was) and is left out of the hash, so records made before an
option existed hash the same as records that leave it at its default.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields

from harness.record.model import FLAG_LEFT_AT_DEFAULT, flags_hash

MATMUL_PRECISIONS = ("highest", "high", "medium")
SDPA_CHOICES = ("auto", "flash", "efficient", "cudnn", "math")
INDUCTOR_CHOICES = (FLAG_LEFT_AT_DEFAULT, "on", "off")
# FrozenFlags field -> torch._inductor.config attribute (gpt/torch_compat.py sets and reads them)
INDUCTOR_OPTIONS = {
    "inductor_shape_padding": "shape_padding",  # pad_mm: pads GEMM shapes (vocab 50257 -> 50264 in bf16)
    "inductor_comprehensive_padding": "comprehensive_padding",  # pads row strides of generated buffers (2.4+)
    "inductor_coordinate_descent_tuning": "coordinate_descent_tuning",  # tunes Triton block sizes (llm.c's --compile sets it)
    "inductor_aggressive_fusion": "aggressive_fusion",  # fuses nodes even where they share no reads
}
TF32_ENV_OVERRIDES = ("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "NVIDIA_TF32_OVERRIDE")


class FlagError(ValueError):
    pass


@dataclass(frozen=True)
class FrozenFlags:
    matmul_precision: str = "highest"  # highest = IEEE fp32 GEMMs, high = TF32, medium = bf16 internally
    cudnn_allow_tf32: bool = False
    cudnn_benchmark: bool = False
    cudnn_deterministic: bool = False
    sdpa: str = "auto"  # auto = every backend this torch has stays enabled; else only that one
    deterministic_algorithms: bool = False
    inductor_shape_padding: str = "default"
    inductor_comprehensive_padding: str = "default"
    inductor_coordinate_descent_tuning: str = "default"
    inductor_aggressive_fusion: str = "default"

    def __post_init__(self):
        for name in INDUCTOR_OPTIONS:
            if getattr(self, name) not in INDUCTOR_CHOICES:
                raise FlagError(f"{name}={getattr(self, name)!r}: expected one of {', '.join(INDUCTOR_CHOICES)}")
        if self.matmul_precision not in MATMUL_PRECISIONS:
            raise FlagError(f"matmul_precision={self.matmul_precision!r}: expected one of {', '.join(MATMUL_PRECISIONS)}")
        if self.sdpa not in SDPA_CHOICES:
            raise FlagError(f"sdpa={self.sdpa!r}: expected one of {', '.join(SDPA_CHOICES)}")
        for f in fields(self):
            if f.type == "bool" and not isinstance(getattr(self, f.name), bool):
                raise FlagError(f"{f.name}={getattr(self, f.name)!r}: expected true or false")

    @classmethod
    def from_dict(cls, values: dict) -> FrozenFlags:
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise FlagError(f"unknown flag(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}")
        # YAML 1.1 reads an unquoted on/off as a boolean: take it as the word that was written
        values = {k: ({True: "on", False: "off"}[v] if k in INDUCTOR_OPTIONS and isinstance(v, bool) else v)
                  for k, v in values.items()}
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def hash(self) -> str:
        return flags_hash(self.to_dict())  # harness.record.model's one rule: Inductor options at "default" left out


def parse_assignments(items: list[str] | None) -> dict:
    """--flag NAME=VALUE items -> typed flag overrides (true/false for switches), checked against FrozenFlags."""
    kinds = {f.name: f.type for f in fields(FrozenFlags)}
    values = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        name, text = name.strip(), text.strip()
        if not sep or not name:
            raise FlagError(f"--flag {item!r}: expected NAME=VALUE")
        if name not in kinds:
            raise FlagError(f"--flag {item!r}: unknown flag; known: {', '.join(sorted(kinds))}")
        if kinds[name] == "bool":
            if text.lower() not in ("true", "false"):
                raise FlagError(f"--flag {item!r}: expected true or false")
            values[name] = text.lower() == "true"
        else:
            values[name] = text
    FrozenFlags.from_dict({**FrozenFlags().to_dict(), **values})  # names and values checked now
    return values


def flags_for(workload: dict, overrides: dict | None = None) -> FrozenFlags:
    """The flags a workload implies (as the seeds set them), then explicit overrides from the plan.

    fp32 means IEEE fp32 GEMMs (TF32 off everywhere); every other precision keeps TF32 on, as the
    seeds' ladder did once set_float32_matmul_precision('high') was added. A pinned SDPA backend in
    the workload enables only that backend.
    """
    ieee = workload.get("precision") == "fp32"
    values = {
        "matmul_precision": "highest" if ieee else "high",
        "cudnn_allow_tf32": not ieee,
        "sdpa": workload.get("sdpa_backend", "auto") if workload.get("attention") == "sdpa" else "auto",
    }
    values.update(overrides or {})
    return FrozenFlags.from_dict(values)


def own_flags(workload: dict, requested: dict) -> dict:
    """The flags a run asked for beyond those its workload implies (flags_for): a knob's own, such as Inductor's
    coordinate descent or the compiler's padding off. A flag an older record does not name was at its default."""
    implied = flags_for(workload).to_dict()
    return {k: v for k, v in requested.items() if k in implied and implied[k] != v}


# --- the torch side: only the worker calls these ---


def apply(flags: FrozenFlags) -> dict:
    """Set every flag, then return what torch reports. Raises Unsupported where a flag cannot be set."""
    import torch

    from gpt import torch_compat

    torch_compat.set_matmul_precision(flags.matmul_precision)
    torch_compat.set_cudnn_tf32(flags.cudnn_allow_tf32)
    torch.backends.cudnn.benchmark = flags.cudnn_benchmark
    torch.backends.cudnn.deterministic = flags.cudnn_deterministic
    if flags.sdpa == "auto":
        torch_compat.set_sdpa_backends({b: True for b in torch_compat.SDPA_FLAG_NAMES if torch_compat.sdpa_backend_exists(b)})
    else:
        torch_compat.set_sdpa_backends({b: b == flags.sdpa for b in torch_compat.SDPA_FLAG_NAMES})
    torch.use_deterministic_algorithms(flags.deterministic_algorithms)
    for name, option in INDUCTOR_OPTIONS.items():
        if getattr(flags, name) != "default":  # before anything compiles; "default" leaves torch's own
            torch_compat.set_inductor_option(option, getattr(flags, name) == "on")
    applied = read_back()
    mismatch = _mismatch(flags, applied)
    if mismatch:
        raise torch_compat.Unsupported(f"flags did not take effect: {mismatch}")
    return applied


def read_back() -> dict:
    import torch

    from gpt import torch_compat

    return {
        "matmul_precision": torch_compat.get_matmul_precision(),
        "cudnn_allow_tf32": torch_compat.get_cudnn_tf32(),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "sdpa_backends_enabled": torch_compat.get_sdpa_backends(),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "fp32_precision_api": "fp32_precision" if torch_compat.NEW_FP32_API else "allow_tf32",
        # True/False as Inductor's config says; None where this torch's Inductor has no such option
        **{name: torch_compat.get_inductor_option(option) for name, option in INDUCTOR_OPTIONS.items()},
        "cpu_fp32_precision": torch_compat.get_cpu_fp32_precision(),
        # Read once by the CUDA libraries at startup: TF32 on (or off) whatever the Python flags say.
        "tf32_env_overrides": {k: os.environ[k] for k in TF32_ENV_OVERRIDES if k in os.environ},
    }


def _mismatch(flags: FrozenFlags, applied: dict) -> str:
    wanted = flags.to_dict()
    problems = [
        f"{name}: wanted {wanted[name]!r}, torch reports {applied[name]!r}"
        for name in ("matmul_precision", "cudnn_allow_tf32", "cudnn_benchmark", "cudnn_deterministic", "deterministic_algorithms")
        if wanted[name] != applied[name]
    ]
    for name in INDUCTOR_OPTIONS:
        wanted_value = {"on": True, "off": False}.get(wanted[name])
        if wanted_value is not None and applied[name] != wanted_value:
            problems.append(f"{name}: wanted {wanted[name]!r}, Inductor's config reports {applied[name]!r}")
    if flags.sdpa != "auto":
        enabled = [b for b, on in applied["sdpa_backends_enabled"].items() if on]
        if enabled != [flags.sdpa]:
            problems.append(f"sdpa: wanted only {flags.sdpa!r}, torch reports {enabled}")
    return "; ".join(problems)


def changed(applied: dict, after: dict, prefix: str = "") -> str:
    """Describe any flag that differs between the two read-backs ('' when none); a nested setting is named
    by its path (cpu_fp32_precision.mkldnn.matmul: 'none' -> 'bf16')."""
    out = []
    for k in sorted(set(applied) | set(after)):
        old, new = applied.get(k), after.get(k)
        if old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            out.append(changed(old, new, f"{prefix}{k}."))
        else:
            out.append(f"{prefix}{k}: {old!r} -> {new!r}")
    return "; ".join(out)
