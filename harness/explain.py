"""Evidence for why a measurement is what it is: record["explain"] (docs/explain.md documents every field).

  kernels       torch.profiler over a few steps *after* the timed ones: per-kernel time, categories,
                the lm_head GEMM kernel, the attention kernels, the SDPA backend
  libraries     the libcublas / libcublasLt / libcudnn / libnccl files this process mapped, with versions
  memory_split  tensors vs allocator cache vs outside the allocator (context, library-owned memory)
  power         NVML sampled in a background thread during the timed steps
  mfu           nanoGPT FLOPs/token against a datasheet peak and a peak measured on the device

Every part is a dict with "available" and "reason"; a failure in one part never loses the others or
the measurement. Torch-version differences go through gpt/torch_compat.py; kernel-name rules live in
harness/kernels.py and the datasheet table in harness/gpu_peaks.py (both torch-free).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import statistics
import threading
import time
from pathlib import Path

import torch

from gpt import torch_compat
from harness import envinfo, gpu_peaks, kernels
from harness import nvml as nvmlmod

TOP_KERNELS = 40
NOT_ON_CPU = "not available on cpu"


def unavailable(reason: str, **fields) -> dict:
    return {"available": False, "reason": reason, **fields}


def guarded(fn, *args, **kwargs) -> dict:
    """fn(*args) or, if it raises, an unavailable part whose reason is the error."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 -- evidence is best effort: the measurement itself must survive
        return unavailable(f"error: {type(exc).__name__}: {exc}".splitlines()[0][:500])


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def gemm_dtype(precision: str, matmul_precision: str | None, device_type: str) -> str:
    """The dtype the run's GEMMs compute in: autocast dtype, else what float32 matmul precision allows."""
    if precision in ("bf16", "fp16"):
        return precision
    if device_type != "cuda":
        return "fp32"  # TF32 is a GPU tensor-core mode; CPU matmuls stay fp32
    return {"high": "tf32", "medium": "bf16"}.get(matmul_precision or "", "fp32")


# --------------------------------------------------------------------------- GEMM calibration (measured peak)

TORCH_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _seconds_per_matmul(a, b, reps: int, device: torch.device) -> float:
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            torch.matmul(a, b)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0 / reps
    t0 = time.perf_counter()
    for _ in range(reps):
        torch.matmul(a, b)
    return (time.perf_counter() - t0) / reps


CALIBRATION_SIZES = {"cuda": (2048, 4096, 8192), "cpu": (256, 512, 1024)}
CALIBRATION_BURSTS = 7
CALIBRATION_MAX_S = {"cuda": 2.0, "cpu": 1.5}  # past this, no larger size is started and bursts are cut short


def calibrate_gemm_peak(device: torch.device, dtype: str, burst_s: float = 0.03) -> dict:
    """Achievable GEMM FLOP/s on this device in this dtype: square matmuls at several sizes, each size timed
    as the best of up to CALIBRATION_BURSTS bursts (~burst_s each); the peak is the best size's rate.

    Several sizes, because where the library reaches its best rate depends on device, dtype and load: on a
    busy 2-core CPU a 256^3 fp32 matmul ran at 2 GFLOP/s (thread wake-ups dominate) and a 512^3 one at 17,
    so a peak taken from the small size alone was 8x too low and MFU came out above 100% (the comparison
    tables mark such an MFU). The best of several bursts, because one short burst is easily slowed by other
    load. Short: a larger size is started only when its single timed matmul (estimated as 8x the previous
    size's) fits in CALIBRATION_MAX_S, and bursts are cut to what fits (at least 3 at the first size, 1 at a
    later one). Run after the
    global flags are applied, so fp32 vs tf32 is the run's own setting. A burst runs at boost clock:
    sustained training may clock lower (see power.sm_clock_mhz_*)."""
    torch_dtype = TORCH_DTYPES[dtype]
    kind = "cuda" if device.type == "cuda" else "cpu"
    limit = CALIBRATION_MAX_S[kind]
    start = time.perf_counter()
    sizes = []
    for n in CALIBRATION_SIZES[kind]:
        if sizes and time.perf_counter() - start + 8 * sizes[-1]["seconds_per_matmul"] > limit:
            break
        a = torch.randn(n, n, device=device, dtype=torch_dtype)
        b = torch.randn(n, n, device=device, dtype=torch_dtype)
        if not sizes:
            torch.matmul(a, b)  # warm-up: library load, handle, heuristics
            _sync(device)
        one = _seconds_per_matmul(a, b, 1, device)
        reps = max(1, min(50, int(burst_s / max(one, 1e-6))))
        # the bursts that still fit: at least 3 for the first size (a best of several), at least 1 for a later one
        fit = int((limit - (time.perf_counter() - start)) / (reps * one))
        bursts = max(1 if sizes else 3, min(CALIBRATION_BURSTS, fit))
        best = min(_seconds_per_matmul(a, b, reps, device) for _ in range(bursts))
        sizes.append({"n": n, "flops": 2.0 * n**3 / best, "seconds_per_matmul": best, "reps": reps, "bursts": bursts})
        del a, b
    if device.type == "cuda":
        torch.cuda.empty_cache()  # give the calibration blocks back before the model is built
    peak = max(sizes, key=lambda s: s["flops"])
    how = "CUDA events" if device.type == "cuda" else "perf_counter"
    return {
        "available": True, "reason": None, "dtype": dtype, "flops": peak["flops"], "n": peak["n"],
        "seconds_per_matmul": peak["seconds_per_matmul"], "sizes": sizes,
        "method": (f"torch.matmul n x n x n {dtype} on {device.type}, the best of "
                   + ", ".join(f"{s['bursts']} bursts at n={s['n']}" for s in sizes)
                   + f"; the peak is the best size's rate (n={peak['n']}), {how}"),
    }


# --------------------------------------------------------------------------- kernel inventory

def _aggregate(rows, steps: int) -> tuple[list[dict], float]:
    """rows: (name, category, precision, us) per call -> per-name entries sorted by time, and the total."""
    by_name: dict[str, dict] = {}
    for name, category, precision, us in rows:
        entry = by_name.setdefault(name, {"name": name, "category": category, "precision": precision, "calls": 0, "total_us": 0.0})
        entry["calls"] += 1
        entry["total_us"] += us
    total = sum(e["total_us"] for e in by_name.values())
    entries = sorted(by_name.values(), key=lambda e: -e["total_us"])
    for e in entries:
        e["per_step_us"] = e["total_us"] / steps
        e["share"] = e["total_us"] / total if total else None
    return entries, total


MAX_GEMMS = 60  # distinct GEMM signatures kept (GPT-2 has about 25: 4 per block x fwd/bwd, lm_head, attention)


def _gemm_inventory(ops, cuda: bool, steps: int, run_dtype: str, vocab_size: int, n_embd: int | None) -> list[dict]:
    """Every GEMM op the profiled steps ran, one entry per distinct (op, shapes, strides, dtypes), by time:
    calls, time (CUDA: the kernels it launched; CPU: its self time), the kernels, and its lm_head role if it
    is one of the lm_head GEMMs (vocab_size possibly padded by the compiler: kernels.vocab_gemm_role)."""
    by_signature: dict[str, dict] = {}
    for e in ops:
        if kernels.classify_cpu_op(e.name) != "gemm":
            continue
        shapes, strides = torch_compat.op_input_shapes(e), torch_compat.op_input_strides(e)
        dtypes = torch_compat.op_input_dtypes(e)
        key = json.dumps([e.name, shapes, strides, dtypes], default=str)
        g = by_signature.setdefault(key, {"op": e.name, "shapes": shapes, "strides": strides, "dtypes": dtypes,
                                          "mnk": kernels.gemm_mnk(e.name, shapes), "calls": 0, "kernels": {}})
        g["calls"] += 1
        launched = torch_compat.op_kernels(e) if cuda else [(e.name, torch_compat.self_cpu_time_us(e))]
        for name, us in launched:
            g["kernels"][name] = g["kernels"].get(name, 0.0) + us
    gemms = []
    for g in by_signature.values():
        by_time = sorted(g.pop("kernels").items(), key=lambda kv: -kv[1])
        total = sum(us for _, us in by_time)
        name = by_time[0][0] if by_time else None
        precision = kernels.resolve_precision(kernels.gemm_precision(name), run_dtype) if (cuda and name) else (run_dtype if name else None)
        gemms.append({**g, "name": name, "precision": precision, "total_us": total, "per_step_us": total / steps,
                      "kernels": [k for k, _ in by_time],
                      "lm_head": kernels.vocab_gemm_role(g["op"], g["shapes"], vocab_size, g["strides"], n_embd)})
    gemms.sort(key=lambda g: -g["total_us"])
    return gemms[:MAX_GEMMS]


def _vocab_gemms(gemms: list[dict], steps: int) -> list[dict]:
    """The lm_head's forward, backward-input and backward-weight GEMMs out of the inventory (a role seen
    with several signatures keeps the one with the most time; all its kernels are listed)."""
    out = []
    for role in ("forward", "backward-input", "backward-weight"):
        found = [g for g in gemms if (g["lm_head"] or {}).get("role") == role]
        if not found:
            continue
        main = found[0]  # gemms are sorted by time
        total = sum(g["total_us"] for g in found)
        out.append({
            "role": role, "name": main["name"], "precision": main["precision"], "total_us": total,
            "per_step_us": total / steps, "shape": main["lm_head"]["shape"], "op": main["op"],
            "calls": sum(g["calls"] for g in found), "kernels": list(dict.fromkeys(k for g in found for k in g["kernels"])),
            "strides": main["strides"], "dtypes": main["dtypes"],
            **{k: main["lm_head"][k] for k in ("padded_to", "padding", "row_stride", "stride_padding")},
        })
    return out


def profile_kernels(trainer, steps: int, run_dtype: str) -> dict:
    """Profile `steps` training steps (after the timed ones) and inventory what ran.

    CUDA: device kernels (plus memcpy/memset), timed by the GPU. CPU: there are no kernels, so CPU ops
    stand in for them, timed by their self CPU time: the same fields, exercised end to end."""
    if steps <= 0:
        return unavailable("profiling off (profile_steps=0)")
    from torch.profiler import profile

    device = trainer.device
    _sync(device)
    with profile(activities=torch_compat.profiler_activities(device.type), record_shapes=True) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            trainer.step()
        _sync(device)
        wall_s = time.perf_counter() - t0
    return inventory(prof.events(), device.type, steps, wall_s, run_dtype,
                     trainer.config.vocab_size, trainer.config.attention == "sdpa", trainer.config.n_embd)


def inventory(events, device_type: str, steps: int, wall_s: float, run_dtype: str, vocab_size: int, uses_sdpa: bool,
              n_embd: int | None = None) -> dict:
    """The kernels part of explain from profiler events (profile.events() of 2.1 .. 2.13)."""
    cuda = device_type == "cuda"
    ops = torch_compat.cpu_op_events(events)
    if cuda:
        rows = [(name, *kernels.classify_kernel(name), us) for name, us in torch_compat.device_kernel_events(events)]
        rows = [(name, cat, kernels.resolve_precision(prec, run_dtype), us) for name, cat, prec, us in rows]
    else:
        rows = []
        for e in ops:
            category = kernels.classify_cpu_op(e.name)
            precision = run_dtype if category in ("gemm", "attention") else None  # the run's dtype: CPU ops carry no kernel name
            rows.append((e.name, category, precision, torch_compat.self_cpu_time_us(e)))
    entries, total_us = _aggregate(rows, steps)
    if not entries or total_us <= 0:
        return unavailable("the profiler recorded no kernels" if cuda else "the profiler recorded no CPU ops")

    by_category: dict[str, dict] = {}
    for e in entries:
        c = by_category.setdefault(e["category"], {"total_us": 0.0, "calls": 0})
        c["total_us"] += e["total_us"]
        c["calls"] += e["calls"]
    for c in by_category.values():
        c["per_step_us"] = c["total_us"] / steps
        c["share"] = c["total_us"] / total_us
    by_category = dict(sorted(by_category.items(), key=lambda kv: -kv[1]["total_us"]))

    top = entries[:TOP_KERNELS] + [e for e in entries[TOP_KERNELS:] if e["category"] in ("gemm", "attention")]

    # Attention: which fused backend ran. Kernel names on CUDA; op names on CPU (and on CUDA when no kernel names one).
    attention_times: dict[str, float] = {}
    attention_names = []
    if cuda:
        for e in entries:
            if e["category"] == "attention":
                attention_names.append(e["name"])
                backend = kernels.attention_backend(e["name"])
                attention_times[backend] = attention_times.get(backend, 0.0) + e["total_us"]
    if not attention_times:
        for e in ops:
            backend = kernels.cpu_attention_backend(e.name)
            if backend:
                attention_times[backend] = attention_times.get(backend, 0.0) + max(torch_compat.self_cpu_time_us(e), 1e-9)
                if not cuda and e.name not in attention_names:
                    attention_names.append(e.name)

    gemms = _gemm_inventory(ops, cuda, steps, run_dtype, vocab_size, n_embd)
    vocab = _vocab_gemms(gemms, steps)
    forward = next((g for g in vocab if g["role"] == "forward"), None)
    lm_head = {k: v for k, v in forward.items() if k != "role"} if forward is not None else None

    return {
        "available": True,
        "reason": None,
        "device": device_type,
        "profiled_steps": steps,
        "step_time_us": wall_s * 1e6 / steps,  # wall time per profiled step (profiler overhead included)
        "busy_us_per_step": total_us / steps,  # summed kernel (CPU: op self) time per step
        "share_basis": "summed kernel time of the profiled steps" if cuda else "summed CPU-op self time of the profiled steps",
        "what": "GPU kernels, GPU-timed" if cuda else "CPU ops stand in for kernels (no kernels on cpu), self CPU time",
        "distinct_kernels": len(entries),
        "top": top,
        "by_category": by_category,
        "lm_head_gemm": lm_head,
        "vocab_gemms": vocab,
        "gemms": gemms,
        "attention_kernels": attention_names,
        "sdpa_backend": kernels.sdpa_backend(attention_times, uses_sdpa),
    }


# --------------------------------------------------------------------------- libraries actually mapped

LIBRARY_FILES = {  # key -> basename pattern; "-<hash>" covers wheels that bundle renamed copies
    "cublas": re.compile(r"^libcublas(-[0-9a-f]+)?\.so(\.\d+)*$"),
    "cublasLt": re.compile(r"^libcublasLt(-[0-9a-f]+)?\.so(\.\d+)*$"),
    "cudnn": re.compile(r"^libcudnn(-[0-9a-f]+)?\.so(\.\d+)*$"),
    "nccl": re.compile(r"^libnccl(-[0-9a-f]+)?\.so(\.\d+)*$"),
}


def parse_mapped_libraries(maps_text: str) -> dict[str, list[str]]:
    """Paths of each library in a /proc/<pid>/maps text, in order of first appearance, without duplicates."""
    found: dict[str, list[str]] = {key: [] for key in LIBRARY_FILES}
    for line in maps_text.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        path = parts[5].strip()
        path = path.removesuffix(" (deleted)")
        base = os.path.basename(path)
        for key, pattern in LIBRARY_FILES.items():
            if pattern.match(base) and path not in found[key]:
                found[key].append(path)
    return found


def decode_version(key: str, raw: int | None) -> str | None:
    """Dotted version from a library's integer version."""
    if raw is None:
        return None
    if key == "cudnn" and raw < 90000:  # cuDNN 8: major*1000 + minor*100 + patch (8902); 9+: *10000 (90100)
        return f"{raw // 1000}.{raw % 1000 // 100}.{raw % 100}"
    if key == "nccl" and raw < 10000:  # NCCL before 2.9: major*1000 + minor*100 + patch
        return f"{raw // 1000}.{raw % 1000 // 100}.{raw % 100}"
    return f"{raw // 10000}.{raw % 10000 // 100}.{raw % 100}"  # cuBLAS(Lt) 120103, NCCL 21801, cuDNN 9


def _int_out(path: str, symbol: str, *args) -> int | None:
    """Call `status fn(..., int *out)` in a mapped library; the int when status is 0."""
    try:
        fn = getattr(ctypes.CDLL(path), symbol)
    except (OSError, AttributeError):
        return None
    value = ctypes.c_int()
    status = fn(*args, ctypes.byref(value))
    return int(value.value) if status == 0 else None


def library_version_raw(key: str, path: str) -> int | None:
    if key == "cublasLt":
        return torch_compat.library_version(path, "cublasLtGetVersion")
    if key == "cudnn":
        return torch_compat.library_version(path, "cudnnGetVersion")
    if key == "nccl":
        return _int_out(path, "ncclGetVersion")
    if key == "cublas":  # cublasGetProperty(MAJOR_VERSION=0 / MINOR=1 / PATCH=2, int*): needs no handle
        parts = [_int_out(path, "cublasGetProperty", t) for t in (0, 1, 2)]
        return None if None in parts else parts[0] * 10000 + parts[1] * 100 + parts[2]
    return None


def loaded_libraries(device_type: str, maps_path: str = "/proc/self/maps") -> dict:
    """The CUDA libraries this process mapped, read after the first matmul so torch's copy is the one seen."""
    torch_reports = {
        "cuda": torch.version.cuda,
        "cudnn": decode_version("cudnn", torch_compat.cudnn_version()),
        "nccl": torch_compat.nccl_version(),
    }
    try:
        paths = parse_mapped_libraries(Path(maps_path).read_text())
    except OSError as exc:
        return unavailable(f"cannot read {maps_path}: {exc}", mapped=None, torch_reports=torch_reports)
    mapped: dict[str, dict | None] = {}
    for key, found in paths.items():
        if not found:
            mapped[key] = None
            continue
        versions = [(p, library_version_raw(key, p)) for p in found]
        mapped[key] = {"path": versions[0][0], "version": decode_version(key, versions[0][1]), "version_raw": versions[0][1]}
        if len(versions) > 1:  # two copies in one process: which one served torch is exactly the question
            mapped[key]["also_mapped"] = [{"path": p, "version": decode_version(key, v)} for p, v in versions[1:]]
    disagree = [
        f"{key}: mapped {mapped[key]['version']} but torch reports {torch_reports[key]}"
        for key in ("cudnn", "nccl")
        if mapped.get(key) and mapped[key]["version"] and torch_reports[key] and mapped[key]["version"] != torch_reports[key]
    ]
    if not any(mapped.values()):
        where = NOT_ON_CPU if device_type == "cpu" else "not available"
        return unavailable(
            f"{where}: none of libcublas, libcublasLt, libcudnn, libnccl is mapped in this process "
            f"(torch.version.cuda={torch.version.cuda})",
            mapped=mapped, torch_reports=torch_reports, source=maps_path,
        )
    return {"available": True, "reason": None, "mapped": mapped, "torch_reports": torch_reports,
            "disagreements": disagree, "source": maps_path}


# --------------------------------------------------------------------------- memory split

ALLOC_ENV = ("CUBLAS_WORKSPACE_CONFIG", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


def _nvml_used_bytes(device: torch.device) -> tuple[int, str, str | None]:
    """(bytes, method, note): this process's usage if NVML lists it, else the whole device's."""
    nvml = nvmlmod.module()
    handle = nvml.nvmlDeviceGetHandleByIndex(envinfo.nvml_index(device))
    processes = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
    for p in processes:
        if p.pid == os.getpid() and p.usedGpuMemory is not None:
            return int(p.usedGpuMemory), "nvml-process", None
    others = len([p for p in processes if p.pid != os.getpid()])
    note = ("NVML does not list this process (container PID namespace, or no permission): device-level used "
            f"memory instead; it includes {others} other listed process(es) and driver-reserved memory")
    return int(nvml.nvmlDeviceGetMemoryInfo(handle).used), "nvml-device-minus-reserved", note


def memory_split(device: torch.device) -> dict:
    """Peak tensors, allocator cache on top of them, and device memory outside the allocator (CUDA context,
    loaded kernel images, memory libraries allocate themselves). Read right after the timed steps."""
    env = {name: os.environ.get(name) for name in ALLOC_ENV}
    if device.type != "cuda":
        return unavailable(f"{NOT_ON_CPU}: no device allocator (host memory is summary.peak_rss_bytes)", **env)
    tensors = torch.cuda.max_memory_allocated(device)
    peak_reserved = torch.cuda.max_memory_reserved(device)
    reserved_now = torch.cuda.memory_reserved(device)
    try:
        used, method, note = _nvml_used_bytes(device)
    except Exception as exc:  # noqa: BLE001 -- no nvidia-ml-py, or NVML cannot start: the allocator half still stands
        return {"available": False, "reason": f"NVML unavailable ({type(exc).__name__}: {exc}); only the allocator split is known",
                "tensors_bytes": tensors, "allocator_cache_bytes": peak_reserved - tensors, "outside_allocator_bytes": None,
                "process_used_bytes": None, "method": None, **env}
    return {
        "available": True,
        "reason": None,
        "tensors_bytes": tensors,  # max_memory_allocated
        "allocator_cache_bytes": peak_reserved - tensors,  # max_memory_reserved - max_memory_allocated
        "outside_allocator_bytes": used - reserved_now,  # NVML used now - reserved now (same instant)
        "process_used_bytes": used,
        "peak_reserved_bytes": peak_reserved,
        "reserved_bytes_at_read": reserved_now,
        "method": method,
        "note": note,
        **env,
    }


# --------------------------------------------------------------------------- power and clocks

# NVML clocks-event ("throttle") reason bits (nvml.h nvmlClocksEventReason*, formerly ClocksThrottleReason*).
THROTTLE_BITS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# Reasons that mean the clock was held below what the workload asked for (idle, app clocks, sync boost and
# display do not).
THROTTLING = {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
SLOWDOWN = THROTTLING - {"sw_power_cap"}  # these mean throttled on their own
CLOCK_DEFICIT = 0.02  # a power cap counts as throttling once the mean SM clock is this far below the maximum


def throttle_reason_names(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit]


class PowerSampler:
    """NVML samples (power, SM clock, clock-event reasons, energy counter) in a background thread, ~10 Hz.

    start() before the timed loop and stop() right after its one synchronize; summary() then keeps the
    samples of the last window_s seconds (the GPU time of the timed steps: they end when the sync returns),
    so compilation and warm-up steps do not count. Does nothing, with a reason, on CPU or without NVML."""

    def __init__(self, device: torch.device, interval_s: float = 0.1):
        self.device = device
        self.interval_s = interval_s
        self.samples: list[dict] = []
        self.reason: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml = self._handle = None
        self.max_sm_clock_mhz: int | None = None

    def start(self) -> PowerSampler:
        if self.device.type != "cuda":
            self.reason = f"{NOT_ON_CPU}: NVML reads NVIDIA GPUs only"
            return self
        try:
            self._nvml = nvmlmod.module()
            index = envinfo.nvml_index(self.device)
            self._handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
            self.max_sm_clock_mhz = nvmlmod.max_sm_clock_mhz(index)
        except ImportError:
            self.reason = "nvidia-ml-py (pynvml) is not installed"
            return self
        except Exception as exc:  # noqa: BLE001 -- best effort: a missing fact must not break the run
            self.reason = f"NVML unavailable: {type(exc).__name__}: {exc}"
            return self
        self._sample()
        self._thread = threading.Thread(target=self._run, name="power-sampler", daemon=True)
        self._thread.start()
        return self

    def _read(self, fn, *args):
        try:
            return fn(self._handle, *args)
        except Exception:  # noqa: BLE001 -- a field this GPU/driver does not support stays None
            return None

    def _sample(self) -> None:
        nvml = self._nvml
        reasons_fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        power_mw = self._read(nvml.nvmlDeviceGetPowerUsage)
        self.samples.append({
            "t": time.monotonic(),
            "power_w": power_mw / 1000.0 if power_mw is not None else None,
            "sm_clock_mhz": self._read(nvml.nvmlDeviceGetClockInfo, nvml.NVML_CLOCK_SM),
            "reasons": self._read(reasons_fn),
            "energy_mj": self._read(nvml.nvmlDeviceGetTotalEnergyConsumption),
        })

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._sample()  # the window's end: right after the loop's synchronize

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def summary(self, window_s: float | None = None, tokens: int | None = None) -> dict:
        if self.reason:
            return unavailable(self.reason)
        return summarize_power(self.samples, self.interval_s, window_s, tokens, self.max_sm_clock_mhz)


def summarize_power(samples: list[dict], interval_s: float, window_s: float | None, tokens: int | None,
                    max_sm_clock_mhz: int | None = None) -> dict:
    """Power/clock summary of the samples in the last window_s seconds (all samples when window_s is None).

    throttled: the clocks really fell. A power-cap reason alone is not enough (on an H100 it is raised while
    the SM clock stays at 1965-1975 of 1980 MHz): the mean SM clock must be at least CLOCK_DEFICIT below the
    device's maximum; a thermal or hardware slowdown reason counts on its own."""
    if not samples:
        return unavailable("no NVML samples were taken")
    end = samples[-1]["t"]
    chosen = [s for s in samples if window_s is None or s["t"] >= end - window_s]
    window = "timed steps" if window_s is not None else "whole sampling"
    if len(chosen) < 2:  # the timed steps were shorter than the sampling interval
        chosen = samples[-2:]
        window = "last samples (timed steps shorter than the sampling interval)"
    powers = [s["power_w"] for s in chosen if s["power_w"] is not None]
    clocks = [s["sm_clock_mhz"] for s in chosen if s["sm_clock_mhz"] is not None]
    masks = [s["reasons"] for s in chosen if s["reasons"] is not None]
    duration_s = window_s if window_s is not None else chosen[-1]["t"] - chosen[0]["t"]
    joules, method = None, None
    first, last = chosen[0], chosen[-1]
    if first["energy_mj"] is not None and last["energy_mj"] is not None and last["t"] > first["t"]:
        rate_w = (last["energy_mj"] - first["energy_mj"]) / 1000.0 / (last["t"] - first["t"])
        joules, method = rate_w * duration_s, "nvml-energy-counter"
    elif powers:
        joules, method = statistics.fmean(powers) * duration_s, "mean-power-x-time"
    reason_share = {}
    for mask in masks:
        for name in throttle_reason_names(mask):
            reason_share[name] = reason_share.get(name, 0) + 1
    reason_share = {k: v / len(masks) for k, v in reason_share.items()}
    mean_clock = statistics.fmean(clocks) if clocks else None
    deficit = 1 - mean_clock / max_sm_clock_mhz if (mean_clock is not None and max_sm_clock_mhz) else None
    clocks_fell = deficit is not None and deficit >= CLOCK_DEFICIT
    capped = any(k in THROTTLING for k in reason_share)
    throttled = any(k in SLOWDOWN for k in reason_share) or (capped and clocks_fell)
    if capped and not throttled and deficit is None:
        throttled = None  # a power cap was raised, and without the maximum clock it cannot be told whether clocks fell
    return {
        "available": bool(powers),
        "reason": None if powers else "NVML returned no power readings",
        "samples": len(chosen),
        "samples_total": len(samples),
        "interval_s": interval_s,
        "window": window,
        "window_s": duration_s,
        "mean_w": statistics.fmean(powers) if powers else None,
        "peak_w": max(powers) if powers else None,
        "joules": joules,
        "joules_method": method,
        "joules_per_token": joules / tokens if joules is not None and tokens else None,
        "sm_clock_mhz_mean": mean_clock,
        "sm_clock_mhz_min": min(clocks) if clocks else None,
        "sm_clock_mhz_max": max_sm_clock_mhz,  # the device's maximum (NVML), what the deficit is measured against
        "clock_deficit": deficit,  # 1 - mean / max
        "throttled_rule": (f"a thermal/hardware slowdown reason, or a throttle reason with the mean SM clock "
                           f"{CLOCK_DEFICIT:.0%}+ below the maximum"),
        "throttle_reasons": sorted(reason_share),
        "throttle_reason_share": reason_share,  # fraction of samples with each reason
        "throttled": throttled,
    }


# --------------------------------------------------------------------------- MFU

MFU_FORMULA = "flops_per_token = 6*N + 12*n_layer*n_head*head_dim*seq_len (nanoGPT estimate_mfu, PaLM appendix B)"
N_DEFINITION = ("all parameters except the position embedding wpe; the token embedding is tied to lm_head and "
                "counted once (nanoGPT's non-embedding N)")


def mfu(model, tokens_per_s: float | None, device: torch.device, run_dtype: str, measured: dict | None) -> dict:
    """Model FLOPs utilisation against the datasheet peak (when the GPU is in the table) and the measured one."""
    flops_per_token = model.flops_per_token()
    achieved = flops_per_token * tokens_per_s if tokens_per_s else None
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    datasheet = gpu_peaks.datasheet_peak(device_name, run_dtype) if device_name else None
    measured_peak = None
    if measured and measured.get("available"):
        measured_peak = {k: measured.get(k) for k in ("dtype", "flops", "method", "n", "sizes")}
    if device.type == "cuda":
        datasheet_reason = None if datasheet else f"{device_name!r} is not in harness/gpu_peaks.py"
    else:
        datasheet_reason = f"{NOT_ON_CPU}: no datasheet peak for CPUs"
    result = {
        "available": achieved is not None and (datasheet is not None or measured_peak is not None),
        "reason": None,
        "formula": MFU_FORMULA,
        "n_params": model.num_params(),
        "n_params_definition": N_DEFINITION,
        "flops_per_token": flops_per_token,
        "tokens_per_s": tokens_per_s,
        "achieved_flops": achieved,
        "dtype": run_dtype,
        "device_name": device_name,
        "datasheet": datasheet,
        "datasheet_reason": datasheet_reason,
        "mfu_datasheet": achieved / datasheet["peak_flops"] if (achieved and datasheet) else None,
        "measured_peak": measured_peak,
        "measured_peak_reason": None if measured_peak else (measured or {}).get("reason", "not calibrated"),
        "mfu_measured": achieved / measured_peak["flops"] if (achieved and measured_peak) else None,
    }
    if not result["available"]:
        result["reason"] = "no throughput" if achieved is None else "neither a datasheet nor a measured peak"
    return result


def summary_mfu(mfu_part: dict | None) -> float | None:
    if not mfu_part:
        return None
    return mfu_part.get("mfu_datasheet") if mfu_part.get("mfu_datasheet") is not None else mfu_part.get("mfu_measured")


# --------------------------------------------------------------------------- everything, after the timed steps

def capture(trainer, config, summary: dict, timed_ms: list[float], sampler: PowerSampler | None,
            calibration: dict | None, run_dtype: str) -> dict:
    """record["explain"]. Order: libraries and memory first (memory before profiling changes the peaks),
    power from the samples already taken, then the profiled steps, then MFU."""
    device = trainer.device
    timed_s = sum(timed_ms) / 1000.0 if timed_ms else None
    tokens = config.tokens_per_step * len(timed_ms) if timed_ms else None
    explain = {
        "libraries": guarded(loaded_libraries, device.type),
        "memory_split": guarded(memory_split, device),
        "power": guarded(sampler.summary, timed_s, tokens) if sampler else unavailable("not sampled"),
    }
    explain["kernels"] = guarded(profile_kernels, trainer, config.profile_steps, run_dtype)
    explain["mfu"] = guarded(mfu, trainer.model, summary.get("tokens_per_s"), device, run_dtype, calibration)
    return {k: explain[k] for k in ("kernels", "libraries", "memory_split", "power", "mfu")}
