"""explain.kernels: torch.profiler over a few training steps *after* the timed ones, and what ran in them.

profile_kernels() runs the profiled steps; inventory() turns profiler events into the part: per-kernel and
per-category time, every GEMM with its shapes/strides/dtypes (_gemm_inventory), the lm_head's three GEMMs
(_vocab_gemms), the attention kernels and the SDPA backend. Event fields that differ between torch versions
are read through gpt/torch_compat.py; the kernel-name rules are harness/evidence/kernels.py's.
"""

from __future__ import annotations

import json
import time

import torch

from gpt import torch_compat
from harness.evidence import kernels, unavailable

TOP_KERNELS = 40


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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
