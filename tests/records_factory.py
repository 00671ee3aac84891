"""Run records with known numbers (no torch), built by the one constructor (harness.record.model.new_record):
for the compare/report tests."""

from __future__ import annotations

import json
from pathlib import Path

from harness.record.model import canonical_hash, new_record

GPUS = {
    "H100": ("NVIDIA H100 80GB HBM3", "9.0"),
    "A100": ("NVIDIA A100-SXM4-80GB", "8.0"),
}
TORCH = {"torch212": "2.1.2+cu121", "torch23": "2.3.1+cu121", "nightly": "2.6.0.dev20241203+cu124", "local": "2.5.1+cpu"}
RUNGS = ("fp32", "tf32", "bf16", "sdpa-flash", "vocab-50304", "fused-adamw-clip")

BASE_WORKLOAD = {
    "preset": "gpt2-124m", "n_layer": 12, "n_head": 12, "n_embd": 768, "vocab_size": 50257, "seq_len": 1024, "batch_size": 16,
    "grad_accum": 1, "precision": "fp32", "attention": "naive", "sdpa_backend": "auto", "compile": "default", "optimizer": "foreach",
    "grad_clip": 0.0, "lr": 6e-4, "weight_decay": 0.1, "steps": 12, "warmup_steps": 2, "seed": 1337, "data": "synthetic", "device": "auto",
    "memory_budget_gib": None, "profile_steps": 0, "lm_head_loss": "plain",
}

_counter = [0]


def constant_ms(value: float, warmup: int = 2, timed: int = 10, compile_ms: float = 5000.0) -> list[float]:
    """Step times whose timed part is exactly `value` (zero noise)."""
    return [compile_ms] + [value * 1.5] * (warmup - 1) + [value] * timed


def noisy_ms(value: float, spread: float, seed: int, warmup: int = 2, timed: int = 10) -> list[float]:
    """Timed steps spread uniformly over value*(1 +- spread), deterministic."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [5000.0] + [value * 1.5] * (warmup - 1) + list(value * (1 + rng.uniform(-spread, spread, timed)))


def make_record(*, env="torch212", gpu="H100", rung="fp32", rung_index=None, plan="seed-ladder", repeat=0, ms=None,
                workload=None, flags=None, status="ok", reason=None, loss=None, memory=None, mfu=None, explain=None,
                sweep=None, kind="measured", torch_version=None, device=None, run_id=None, reference=None) -> dict:
    _counter[0] += 1
    w = dict(BASE_WORKLOAD, **(workload or {}))
    if device is None:
        device = "cpu" if gpu is None else "cuda"
    ms = constant_ms(100.0, w["warmup_steps"], w["steps"] - w["warmup_steps"]) if ms is None else ms
    loss = [10.0 - 0.1 * i for i in range(len(ms))] if loss is None else loss
    flags = {"matmul_precision": "highest" if w["precision"] == "fp32" else "high"} if flags is None else flags
    environment = {
        "env_name": env, "device": device,
        "torch": {"version": torch_version or TORCH.get(env, "2.4.0"), "cuda": "12.1" if device == "cuda" else None},
        "cpu": {"model": "Test CPU @ 2GHz", "count": 2},
        "python": {"version": "3.11.7"},
        "gpu": {"name": GPUS[gpu][0], "capability": GPUS[gpu][1]} if device == "cuda" else None,
    }
    timed = [x for x in ms[w["warmup_steps"]:] if x is not None]
    tokens = w["batch_size"] * w["seq_len"] * w["grad_accum"]
    median = sorted(timed)[len(timed) // 2] if timed else None
    summary = {
        "step_ms_median": median, "timed_steps": len(timed), "tokens_per_step": tokens,
        "tokens_per_s": tokens / (median / 1000) if median else None,
        "final_loss": loss[-1] if loss else None, "mean_loss": None, "first_step_ms": ms[0] if ms else None,
        "mfu": mfu,
    }
    if memory is not None:
        summary["peak_allocated_bytes" if device == "cuda" else "peak_rss_bytes"] = int(memory)
    if status != "ok":
        ms, loss, summary = [], [], {}
    record = new_record(
        run_id=run_id or f"t{_counter[0]:05d}-{env}-{gpu}-{rung}-{repeat}", kind=kind, status=status, reason=reason,
        env=env, plan=plan, rung=rung, rung_index=RUNGS.index(rung) if rung_index is None and rung in RUNGS else rung_index,
        repeat=repeat, sweep=sweep, workload=w, flags_requested=flags,
        flags_hash=None if kind == "measured" else canonical_hash(flags),
        environment=environment, steps={"ms": ms, "loss": loss, "grad_norm": []}, summary=summary, reference=reference,
    )
    record["flags"].update(applied=flags, after=flags)
    record["explain"] = explain
    return record  # validated where it is read (harness.compare.load), like any record


def failure_record(*, env="torch212", rung="fp32", workload=None, gpu: str | None = None, reason="worker exited with code -9") -> dict:
    """What harness.run wrote (schema version 1) for a worker that died before writing its record: empty hashes and,
    from the old runner, an environment with env_name only; gpu="H100" gives the newer shape that names the intended
    device (environment.device and environment.gpu from NVML)."""
    r = make_record(env=env, rung=rung, workload=workload, status="error", reason=reason)
    r.update(schema_version=1, workload_hash="", flags={"requested": r["flags"]["requested"], "hash": ""}, summary={})
    del r["contention"], r["workload_code"], r["invocation"]  # versions 2's and 3's
    r["environment"] = {"env_name": env}
    if gpu is not None:
        r["environment"].update(device="cuda", gpu={"name": GPUS[gpu][0], "capability": GPUS[gpu][1]})
    return r


def write(directory: Path, records: list[dict]) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for r in records:
        (directory / f"{r['run_id']}.json").write_text(json.dumps(r, indent=1))
    return directory


def kernels(lm_head: str, attention: list[str], top: list[tuple[str, str, float, float]], backend=None) -> dict:
    """An explain block; top = [(name, category, per_step_us, share)]."""
    by_cat: dict = {}
    for _n, cat, us, share in top:
        c = by_cat.setdefault(cat, {"total_us": 0.0, "per_step_us": 0.0, "share": 0.0})
        c["total_us"] += us
        c["per_step_us"] += us
        c["share"] += share
    return {"kernels": {
        "available": True, "reason": None,
        "top": [{"name": n, "category": c, "precision": None, "calls": 1, "total_us": us, "per_step_us": us, "share": s}
                for n, c, us, s in top],
        "by_category": by_cat, "lm_head_gemm": {"name": lm_head, "per_step_us": next((us for n, _c, us, _s in top if n == lm_head), None)},
        "attention_kernels": attention, "sdpa_backend": backend}}


def rich_dataset() -> list[dict]:
    """A small but complete set: 2 GPUs x 2 envs, a ladder, kernels, memory split, a sweep, an OOM, repeats."""
    records = []
    ladder = {  # rung -> workload overrides
        "bf16": {"precision": "bf16"},
        "sdpa-flash": {"precision": "bf16", "attention": "sdpa", "sdpa_backend": "flash"},
        "vocab-50304": {"precision": "bf16", "attention": "sdpa", "sdpa_backend": "flash", "vocab_size": 50304},
    }
    base_ms = {("H100", "torch212"): (110.0, 90.0, 58.0), ("H100", "nightly"): (100.0, 80.0, 76.0),
               ("A100", "torch212"): (160.0, 150.0, 146.0), ("A100", "nightly"): (150.0, 140.0, 136.0)}
    for (gpu, env), times in base_ms.items():
        for (rung, w), ms in zip(ladder.items(), times):
            gemm = "sm90_xmma_gemm_bf16bf16_128x128" if (gpu, env, rung) == ("H100", "torch212", "vocab-50304") else \
                "ampere_bf16_s16816gemm_64x64_tn" if gpu == "A100" else "sm90_xmma_gemm_bf16bf16_64x64_fringe"
            att = ["flash_fwd_kernel", "flash_bwd_kernel"] if "sdpa" in str(w.get("attention")) else ["softmax_warp_forward"]
            explain = kernels(gemm, att, [(gemm, "gemm", ms * 400, 0.45), (att[0], "attention", ms * 200, 0.2),
                                          ("triton_poi_fused_gelu", "elementwise", ms * 150, 0.15),
                                          ("multi_tensor_apply_kernel", "optimizer", ms * 100, 0.1)],
                              backend="flash" if "sdpa" in str(w.get("attention")) else None)
            explain["memory_split"] = {"available": True, "tensors_bytes": int(14e9 if rung == "bf16" else 9e9),
                                       "allocator_cache_bytes": int(3e9), "outside_allocator_bytes": int(0.6e9)}
            explain["libraries"] = {"available": True, "reason": None, "source": "/proc/self/maps", "disagreements": [],
                                    "mapped": {"cublas": {"path": "/x/libcublas.so", "version": "12.1.3" if env == "torch212" else "12.4.5"}}}
            for rep in range(2):
                records.append(make_record(env=env, gpu=gpu, rung=rung, repeat=rep, workload=w,
                                           ms=noisy_ms(ms, 0.01, seed=rep + 10 * len(records)),
                                           memory=(20 if rung == "bf16" else 12) * 2**30 * (0.8 if env == "nightly" else 1.0),
                                           mfu=0.3 * 100 / ms, explain=explain))
    for b, ms in ((16, 76.0), (32, 140.0), (48, 205.0)):
        records.append(make_record(env="nightly", gpu="H100", rung="vocab-50304", workload=dict(ladder["vocab-50304"], batch_size=b),
                                   sweep={"name": "batch", "field": "batch_size", "value": b}, ms=noisy_ms(ms, 0.01, seed=b),
                                   memory=b * 0.7 * 2**30))
    records.append(make_record(env="nightly", gpu="H100", rung="vocab-50304", status="oom", reason="CUDA out of memory",
                               workload=dict(ladder["vocab-50304"], batch_size=64), sweep={"name": "batch", "field": "batch_size", "value": 64}))
    records.append(make_record(env="torch212", gpu="A100", rung="fp32", rung_index=0, status="unsupported", reason="no such kernel"))
    return records
