"""Every difference between torch versions that this project touches, in one place (over ~400 lines on purpose: the
rule is one module for every quirk, so it grows with the versions supported).

Supported: torch 2.1.2 through the nightly. Each function feature-detects rather than compares
version numbers where it can. Sources: ../shared/notes/torch-builds-and-apis.md section 3.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.util
import sys

import torch

TORCH_VERSION = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])

# --- float32 matmul precision: old allow_tf32/set_float32_matmul_precision vs fp32_precision (2.9+) ---
# 2.9+ keeps both: a legacy global and per-backend values. A write through fp32_precision alone leaves the legacy
# global at its default, and from then on every read of it raises ("mix of the legacy and new APIs", pytorch#179445).
# torch's own code still reads it (Inductor's max-autotune, its cache keys; CCE): on an H200 with torch 2.11 that
# failed the compile-max-autotune and lm-head-cce runs (2026-11-27). So 2.9+ writes through the legacy per-backend
# setters (cuda.matmul.allow_tf32, cudnn.allow_tf32), which set both views alike, and reads the per-backend values.
NEW_FP32_API = hasattr(torch.backends, "fp32_precision")
_OLD_TO_NEW = {"highest": "ieee", "high": "tf32"}
_NEW_TO_OLD = {v: k for k, v in _OLD_TO_NEW.items()}


def set_matmul_precision(precision: str) -> None:
    """precision: highest (ieee fp32) | high (tf32) | medium (bf16 internally; old API only)."""
    if NEW_FP32_API:
        if precision not in _OLD_TO_NEW:
            raise Unsupported(f"float32 matmul precision {precision!r} has no fp32_precision equivalent in torch {torch.__version__}")
        torch.backends.cuda.matmul.allow_tf32 = precision == "high"  # sets fp32_precision too (above)
    else:
        torch.set_float32_matmul_precision(precision)


def get_matmul_precision() -> str:
    if NEW_FP32_API:
        value = torch.backends.cuda.matmul.fp32_precision
        return _NEW_TO_OLD.get(value, value)
    return torch.get_float32_matmul_precision()


def set_cudnn_tf32(allow: bool) -> None:
    torch.backends.cudnn.allow_tf32 = allow  # 2.9+: sets cudnn.{conv,rnn}.fp32_precision too (above)


def get_cudnn_tf32() -> bool:
    if NEW_FP32_API:
        return torch.backends.cudnn.conv.fp32_precision == "tf32"
    return bool(torch.backends.cudnn.allow_tf32)


def get_cpu_fp32_precision() -> dict | None:
    """The CPU (oneDNN/mkldnn) float32 precision settings, where this torch has them separately (2.9+:
    torch.backends.fp32_precision and torch.backends.mkldnn.{matmul,conv,rnn}.fp32_precision; "bf16" or
    "tf32" there makes CPU fp32 math lower precision). None before that: oneDNN then follows
    float32_matmul_precision, already read back as matmul_precision."""
    if not NEW_FP32_API:
        return None
    mkldnn = torch.backends.mkldnn
    found = {"generic": torch.backends.fp32_precision}
    for op in ("matmul", "conv", "rnn"):
        value = getattr(getattr(mkldnn, op, None), "fp32_precision", None)
        if value is not None:
            found[f"mkldnn.{op}"] = value
    return found


# --- SDPA backends: global enable flags; cuDNN attention exists only in newer versions ---
SDPA_FLAG_NAMES = {"flash": "flash_sdp", "efficient": "mem_efficient_sdp", "math": "math_sdp", "cudnn": "cudnn_sdp"}


def sdpa_backend_exists(backend: str) -> bool:
    return hasattr(torch.backends.cuda, f"enable_{SDPA_FLAG_NAMES[backend]}")


def set_sdpa_backends(enabled: dict[str, bool]) -> None:
    for backend, on in enabled.items():
        if sdpa_backend_exists(backend):
            getattr(torch.backends.cuda, f"enable_{SDPA_FLAG_NAMES[backend]}")(on)
        elif on:
            raise Unsupported(f"SDPA backend {backend!r} does not exist in torch {torch.__version__}")


def get_sdpa_backends() -> dict[str, bool]:
    """Enabled state per backend; a backend this torch lacks reads as disabled."""
    return {
        backend: bool(getattr(torch.backends.cuda, f"{flag}_enabled")()) if sdpa_backend_exists(backend) else False
        for backend, flag in SDPA_FLAG_NAMES.items()
    }


# --- Inductor's config switches (torch._inductor.config), set before anything is compiled ---
# Loaded in every worker: torch.optim's step imports torch._dynamo, which loads this config anyway.
INDUCTOR_OPTION_SINCE = {"comprehensive_padding": "2.4"}  # absent in 2.1.2 and 2.3.1 (PR #120758)


def _inductor_config():
    from torch._inductor import config

    return config


def get_inductor_option(name: str) -> bool | None:
    """The option's value; None where this torch's Inductor has no such option."""
    value = getattr(_inductor_config(), name, None)
    return None if value is None else bool(value)


def set_inductor_option(name: str, value: bool) -> None:
    config = _inductor_config()
    if not hasattr(config, name):
        since = INDUCTOR_OPTION_SINCE.get(name)
        raise Unsupported(f"Inductor has no config.{name} in torch {torch.__version__}"
                          + (f" (it arrived in {since})" if since else ""))
    setattr(config, name, value)


# --- what a device / version can run at all: None when fine, else the reason ---
class Unsupported(RuntimeError):
    """This knob cannot run on this device or torch version; recorded as status `unsupported`."""


class ToolMissing(RuntimeError):
    """A tool the run needs is not installed on this machine (a C++ compiler for torch.compile on CPU): an
    `error` with one line saying what to install, not a traceback from deep inside the compiler."""


def fused_adamw_unsupported(device_type: str) -> str | None:
    if device_type == "cpu" and TORCH_VERSION < (2, 4):
        return f"fused AdamW is CUDA-only in torch {torch.__version__} (CPU support arrived in 2.4)"
    return None


def autocast_unsupported(device_type: str, dtype: torch.dtype) -> str | None:
    if device_type == "cpu" and dtype == torch.float16 and TORCH_VERSION < (2, 4):
        return f"CPU autocast supports only bfloat16 in torch {torch.__version__}"
    if device_type == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        return "this GPU has no bfloat16 support"
    return None


def compile_unsupported() -> str | None:
    py = sys.version_info[:2]
    if py >= (3, 12) and TORCH_VERSION < (2, 4):
        return f"torch.compile does not support Python {py[0]}.{py[1]} in torch {torch.__version__} (arrived in 2.4)"
    if py >= (3, 13) and TORCH_VERSION < (2, 6):
        return f"torch.compile does not support Python 3.13 in torch {torch.__version__} (arrived in 2.6)"
    return None


# --- fused lm_head + cross-entropy (workload field lm_head_loss): optional libraries, pinned only in the env
# specs whose torch and triton they fit (envs/<name>/env.yaml extra_pins); absent elsewhere, and then unsupported.
LM_HEAD_LOSS_LIBRARIES = {  # lm_head_loss -> (module, PyPI package)
    "liger": ("liger_kernel", "liger-kernel"),
    "cce": ("cut_cross_entropy", "cut-cross-entropy"),
    "cce-torch-compile": ("cut_cross_entropy", "cut-cross-entropy"),
}


def lm_head_loss_unsupported(kind: str, device_type: str) -> str | None:
    """Why this device / env cannot run lm_head_loss=kind, or None. The device is checked before the library is
    imported (Liger-Kernel's import alone takes seconds)."""
    if kind == "plain":
        return None
    module, package = LM_HEAD_LOSS_LIBRARIES[kind]
    if importlib.util.find_spec(module) is None:
        return (f"lm_head_loss={kind} needs {package}, which is not installed in this env (torch {torch.__version__}); "
                "the env specs it fits pin it (envs/<name>/env.yaml extra_pins)")
    if kind == "liger" and device_type != "cuda":
        return f"Liger-Kernel's fused linear cross-entropy is Triton code, and Triton has no {device_type} backend"
    if kind == "cce" and device_type != "cuda":
        return (f"CCE's fused kernel (impl cce) is Triton code, and Triton has no {device_type} backend "
                "(lm_head_loss=cce-torch-compile runs CCE's torch.compile implementation there)")
    if kind == "cce-torch-compile" and compile_unsupported():
        return f"lm_head_loss=cce-torch-compile is compiled by torch.compile: {compile_unsupported()}"
    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 -- an incompatible torch/triton shows up as any import error
        return f"{package} cannot be imported with torch {torch.__version__}: {type(exc).__name__}: {exc}".splitlines()[0]
    return None


# --- Hugging Face transformers (workload field model=transformers): pinned per env in envs/<name>/env.yaml
# extra_pins, as the newest release that imports, trains and compiles with that torch (docs/quickstart.md). GPT-2 has an
# sdpa attention from 4.42.0; 4.43-4.55 call torch.compiler.is_compiling (torch 2.3+) in code Dynamo traces, so with
# torch 2.1/2.2 they train eagerly but fail under torch.compile; 4.56+ do not import with torch 2.1.
TRANSFORMERS_SDPA_SINCE = (4, 42)


def _transformers_version() -> tuple[int, int] | None:
    try:
        from importlib.metadata import version
        return tuple(int(x) for x in version("transformers").split(".")[:2])
    except Exception:  # noqa: BLE001 -- not installed, or a version string that is not numbers
        return None


def transformers_unsupported(attention: str, compiled: bool) -> str | None:
    """Why Hugging Face's GPT-2 cannot run here with this attention and compile setting, or None."""
    if importlib.util.find_spec("transformers") is None:
        return (f"model=transformers needs the transformers package, which is not installed in this env (torch "
                f"{torch.__version__}); the env specs pin it (envs/<name>/env.yaml extra_pins)")
    have = _transformers_version()
    shown = ".".join(map(str, have)) if have else "unknown"
    if attention == "sdpa" and have is not None and have < TRANSFORMERS_SDPA_SINCE:
        return f"transformers {shown} has no sdpa attention for GPT-2 (from 4.42)"
    if compiled and TORCH_VERSION < (2, 3) and have is not None and have >= (4, 43):
        return (f"transformers {shown} under torch.compile needs torch 2.3+ (it calls torch.compiler.is_compiling); "
                f"with torch {torch.__version__} transformers 4.42 compiles")
    try:
        importlib.import_module("transformers.models.gpt2.modeling_gpt2")
    except Exception as exc:  # noqa: BLE001 -- an incompatible torch shows up as any import error
        return f"transformers {shown} cannot be imported with torch {torch.__version__}: {type(exc).__name__}: {exc}".splitlines()[0]
    return None


def transformers_gpt2(n_layer: int, n_head: int, n_embd: int, n_positions: int, vocab_size: int, eager: bool):
    """GPT2LMHeadModel with this shape, dropout 0 and no KV cache; attention eager or sdpa. The implementation is
    set on the config before the model is built (config._attn_implementation: read by every release from 4.42)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd, n_positions=n_positions, vocab_size=vocab_size,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    config._attn_implementation = "eager" if eager else "sdpa"
    return GPT2LMHeadModel(config)


def autocast_dtype(device_type: str) -> torch.dtype | None:
    """The dtype autocast computes in on this device type, None where autocast is off (2.4+ has one device-generic API)."""
    if hasattr(torch, "get_autocast_dtype"):
        return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None
    if device_type == "cuda":
        return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None
    return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else None


def linear_cross_entropy(kind: str):
    """(hidden [N, C], weight [V, C], targets [N]) -> mean cross-entropy of hidden @ weight.T, from the library.

    Kept out of the model's torch.compile graph (torch.compiler.disable, in torch 2.1 onwards): the libraries
    launch their own Triton kernels, and CCE's torch.compile implementation compiles itself."""
    if kind == "liger":
        from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy

        def loss(hidden, weight, targets):
            return liger_fused_linear_cross_entropy(hidden, weight, targets)  # handles autocast itself (amp_custom_fwd)
    elif kind in ("cce", "cce-torch-compile"):
        from cut_cross_entropy import linear_cross_entropy as cce

        impl = "cce" if kind == "cce" else "torch_compile"

        def loss(hidden, weight, targets):
            dtype = autocast_dtype(hidden.device.type)  # CCE's kernels do not see autocast: use the dtype the
            if dtype is not None:                         # plain path's lm_head GEMM runs in under it
                hidden, weight = hidden.to(dtype), weight.to(dtype)
            return cce(hidden, weight, targets, impl=impl)
    else:
        raise ValueError(f"lm_head_loss={kind!r} has no fused implementation")
    return torch.compiler.disable(loss)


def grad_scaler(device_type: str, enabled: bool):
    if hasattr(torch.amp, "GradScaler"):  # 2.3+: device-generic; torch.cuda.amp.GradScaler is deprecated
        return torch.amp.GradScaler(device_type, enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled and device_type == "cuda")


def grad_scaler_cuda_only(device_type: str) -> str | None:
    """Why fp16 (which needs a GradScaler) cannot run on this device, or None: before 2.3 there is only
    torch.cuda.amp.GradScaler, and grad_scaler() above would silently disable it on CPU."""
    if device_type == "cpu" and not hasattr(torch.amp, "GradScaler"):
        return f"GradScaler is CUDA-only in torch {torch.__version__}"
    return None


OutOfMemoryError = torch.cuda.OutOfMemoryError  # exists, and is raised on CUDA OOM, in 2.1 onwards


# --- profiler ---
def profiler_activities(device_type: str) -> list:
    from torch.profiler import ProfilerActivity  # CPU and CUDA under these names in 2.1 .. 2.13

    return [ProfilerActivity.CPU, ProfilerActivity.CUDA] if device_type == "cuda" else [ProfilerActivity.CPU]


def device_kernel_events(events) -> list[tuple[str, float]]:
    """(name, duration us) of every kernel, memcpy and memset the GPU ran, from profile.events().

    Both 2.1 and 2.13 list device activities as events with device_type CUDA, timed by time_range.
    Left out: the GPU-side copies of record_function ranges (gpu_user_annotation, e.g.
    "Optimizer.step#AdamW.step"), which span kernels and would count them twice. 2.4+ flags them with
    is_user_annotation, and there the flag alone decides: Inductor records every Triton launch as a CPU-side
    event named like its kernel (_RecordFunctionFast(kernel_name) in triton_heuristics.py), so dropping device
    names also seen on the CPU drops every Triton kernel (the torch 2.11 H100/H200 records show none). 2.1 has
    no flag: there a name that is also a CPU-side event is dropped (its Triton kernels are named triton__0d1d..,
    unlike their CPU-side events)."""
    from torch.autograd import DeviceType

    flagged = any(hasattr(e, "is_user_annotation") for e in events)
    cpu_names = set() if flagged else {e.name for e in events if e.device_type == DeviceType.CPU}
    return [
        (e.name, float(e.time_range.elapsed_us()))
        for e in events
        if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False) and e.name not in cpu_names
    ]


def cpu_op_events(events) -> list:
    """CPU-side op events (synchronous, not memory bookkeeping), from profile.events()."""
    from torch.autograd import DeviceType

    return [e for e in events if e.device_type == DeviceType.CPU and not e.is_async and not e.name.startswith("[")]


def self_cpu_time_us(event) -> float:
    return float(getattr(event, "self_cpu_time_total", 0.0) or 0.0)


def op_kernels(event) -> list[tuple[str, float]]:
    """(name, duration us) of the device kernels an op launched (FunctionEvent.kernels in 2.1 .. 2.13)."""
    return [(k.name, float(k.duration)) for k in getattr(event, "kernels", None) or []]


def op_input_shapes(event) -> list:
    return list(getattr(event, "input_shapes", None) or [])


def op_input_strides(event) -> list | None:
    """Input strides as the profiler recorded them (record_shapes=True): FunctionEvent.structured_input_strides
    in newer torch (2.15 has it); None where this torch's profiler does not give them (2.1.2)."""
    strides = getattr(event, "structured_input_strides", None)
    return [list(s) if isinstance(s, (list, tuple)) else s for s in strides] if strides else None


def op_input_dtypes(event) -> list | None:
    """Input dtypes ('float', 'c10::BFloat16', ...) where the profiler records them (FunctionEvent.input_dtypes)."""
    dtypes = getattr(event, "input_dtypes", None)
    return list(dtypes) if dtypes else None


def nvml_device_index(device) -> int:
    """NVML's index for a torch CUDA device: differs from torch's under CUDA_VISIBLE_DEVICES."""
    fn = getattr(torch.cuda, "_get_nvml_device_index", None)  # private; present 2.1 .. 2.13
    if fn is not None:
        with contextlib.suppress(Exception):  # private API: any failure falls back to torch's index
            return int(fn(device))
    return device.index if getattr(device, "index", None) is not None else torch.cuda.current_device()


# --- CPU: the kernel path and the C++ compiler torch.compile needs ---
def cpu_capability() -> str | None:
    """The CPU kernel path ATen dispatches to ("AVX512", "AVX2", "DEFAULT", ...; ATEN_CPU_CAPABILITY can lower
    it): torch.backends.cpu.get_cpu_capability(), present in 2.1.2 and later; None where absent."""
    fn = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    try:
        return str(fn()) if fn else None
    except Exception:  # noqa: BLE001 -- a fact for the record, never a reason to fail the run
        return None


def cpp_compiler_missing() -> str | None:
    """None when Inductor finds its C++ compiler (torch.compile on CPU builds every kernel with it), else one
    line saying what to install. The search moved: codecache.cpp_compiler() (2.1 .. 2.4), then
    cpp_builder.get_cpp_compiler(); both try config.cpp.cxx (CXX, else g++)."""
    from torch._inductor import config

    try:
        from torch._inductor.cpp_builder import get_cpp_compiler as find
    except ImportError:
        from torch._inductor.codecache import cpp_compiler as find
    try:
        find()
        return None
    except Exception:  # noqa: BLE001 -- InvalidCxxCompiler, or whatever a torch version raises instead
        names = config.cpp.cxx if isinstance(config.cpp.cxx, (list, tuple)) else [config.cpp.cxx]
        tried = ", ".join(str(n) for n in names if n) or "g++"
        return (f"torch.compile on CPU needs a C++ compiler and none was found (tried {tried}): install one "
                f"(e.g. apt-get install g++) or point CXX at it; or run with --set compile=off")


# --- library versions as torch reports them ---
def cuda_compiled_version() -> int | None:
    fn = getattr(torch._C, "_cuda_getCompiledVersion", None)
    return fn() if fn and torch.version.cuda else None


def driver_version() -> int | None:
    fn = getattr(torch._C, "_cuda_getDriverVersion", None)
    try:
        return fn() if fn and torch.cuda.is_available() else None
    except RuntimeError:
        return None


def cudnn_version() -> int | None:
    try:
        return torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except RuntimeError:
        return None


def nccl_version() -> str | None:
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 -- CPU builds have no NCCL
        return None
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


def build_version_fields() -> dict:
    """The build facts in torch.version (a file generated when torch is built): git commit, HIP version (ROCm
    builds), debug build. Read with getattr, so a build whose generated file lacks one records None / False
    rather than failing the environment capture."""
    return {"git": getattr(torch.version, "git_version", None), "hip": getattr(torch.version, "hip", None),
            "debug": bool(getattr(torch.version, "debug", False))}


def l2_cache_bytes(props) -> int | None:
    return getattr(props, "L2_cache_size", None)  # 2.5+


def library_version(path: str, symbol: str) -> int | None:
    """Call a `size_t fooGetVersion(void)` in an already-mapped shared library (cublasLtGetVersion...)."""
    try:
        fn = getattr(ctypes.CDLL(path), symbol)
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_size_t
    return int(fn())
