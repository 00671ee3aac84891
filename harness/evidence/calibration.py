"""The GEMM peak measured on the device (explain.mfu.measured_peak), and the dtype the run's GEMMs compute in.

The worker calibrates before the model exists, with the run's global flags already applied (so fp32 vs
tf32 is the run's own setting); mfu.py divides by the result.
"""

from __future__ import annotations

import time

import torch


def gemm_dtype(precision: str, matmul_precision: str | None, device_type: str) -> str:
    """The dtype the run's GEMMs compute in: autocast dtype, else what float32 matmul precision allows."""
    if precision in ("bf16", "fp16"):
        return precision
    if device_type != "cuda":
        return "fp32"  # TF32 is a GPU tensor-core mode; CPU matmuls stay fp32
    return {"high": "tf32", "medium": "bf16"}.get(matmul_precision or "", "fp32")


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
            if device.type == "cuda":
                torch.cuda.synchronize(device)
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
