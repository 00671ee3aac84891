"""The user's own numbers (../shared/seeds/000, and the 2.1.2 vs nightly pair that 002 discusses) as records.

    python results/reference/transcribe.py          # (re)write results/reference/ref-*.json
    python results/reference/transcribe.py --check  # exit 1 if the files differ from this transcription

Each record is kind="reference": one logged "Step 49" line (a single sample: no noise estimate), with
what the log says about its conditions in the `reference` object. What the log does not say is null,
not guessed; values taken from the seed-ladder plan rather than the log are listed under `assumed`.
Memory is nvidia-smi's MiB for the whole device: summary.device_used_bytes = MiB * 2**20.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from harness.record.io import read_record
from harness.record.model import canonical_hash, new_record
from harness.record.validator import validate

SOURCE = "../shared/seeds/000_3624f831bf4e6e33.txt"
PLAN = "seed-ladder"
GPU_CLASS = "H100/H800 class"

# The seed-ladder plan's rungs (harness/plans/seed-ladder.yaml), cumulative, as the log's headings.
RUNGS = {
    "fp32": {"precision": "fp32", "attention": "naive", "vocab_size": 50257, "optimizer": "foreach", "grad_clip": 0.0},
    "tf32": {"precision": "tf32", "attention": "naive", "vocab_size": 50257, "optimizer": "foreach", "grad_clip": 0.0},
    "bf16": {"precision": "bf16", "attention": "naive", "vocab_size": 50257, "optimizer": "foreach", "grad_clip": 0.0},
    "sdpa-flash": {"precision": "bf16", "attention": "sdpa", "vocab_size": 50257, "optimizer": "foreach", "grad_clip": 0.0},
    "vocab-50304": {"precision": "bf16", "attention": "sdpa", "vocab_size": 50304, "optimizer": "foreach", "grad_clip": 0.0},
    "fused-adamw-clip": {"precision": "bf16", "attention": "sdpa", "vocab_size": 50304, "optimizer": "fused", "grad_clip": 1.0},
}
ASSUMED = {
    "optimizer": "optimizer from the seed-ladder plan: the log names no AdamW implementation before 'fused adamw'",
    "grad_clip": "grad_clip from the seed-ladder plan: before 'fused adamw, gradient clipping' no clipping is mentioned; "
                 "the clipping threshold itself is not in the log (1.0 is the plan's)",
}
TORCH_NOTE = ("the log states no version for this line; seeds/001 line 142: the H800 experiments ran a torch "
              "'earlier than 2.3.1'")
BATCH_SWEEP = {"name": "batch-size (user, nightly)", "field": "batch_size"}

# (line, rung, B, compiled, torch, loss, grad norm, dt ms, tokens/s, MiB, first-step ms, watts, flags, extra notes)
LINES = [
    (5, "fp32", 16, True, None, 6.358187675476074, None, 340.22, 48157.21, 39104, 20859.24, None, {}, []),
    (7, "fp32", 32, True, None, 5.9969305992126465, None, 669.65, 48933.07, 76968, None, None, {}, []),
    (11, "tf32", 16, True, None, 6.358736991882324, None, 133.00, 123183.87, 42246, 20879.86, None, {}, []),
    (13, "tf32", 16, True, None, 6.358736991882324, None, 133.96, 122304.29, 42246, 21045.29, None, {"cudnn_benchmark": False}, []),
    (15, "tf32", 16, True, None, 6.358736991882324, None, 132.95, 123238.21, 42255, 22351.99, None, {"cudnn_benchmark": True}, []),
    (17, "tf32", 32, True, None, None, None, None, None, None, None, None, {}, []),  # out of memory
    (23, "bf16", 16, True, None, 6.35786771774292, None, 103.14, 158857.38, 32806, 24512.58, None, {}, []),
    (25, "bf16", 32, True, None, 5.995821475982666, None, 197.20, 166163.26, 64100, 24141.83, 600, {}, ["'around 600 watts'"]),
    (30, "bf16", 32, False, None, 5.9717278480529785, None, 351.59, 93199.80, 67024, 677.84, 550, {}, ["logged under 'torch not compiled'"]),
    (34, "sdpa-flash", 16, True, None, 6.358168601989746, None, 87.71, 186796.08, 20047, 21131.58, 560, {}, []),
    (37, "sdpa-flash", 32, True, None, 5.977290630340576, None, 167.07, 196134.30, 40173, 22232.85, 580, {}, []),
    (40, "sdpa-flash", 64, True, None, 6.309854984283447, None, 322.03, 203510.60, 71086, 21106.93, 600, {}, []),
    (44, "vocab-50304", 16, True, None, 6.344438552856445, None, 56.20, 291549.90, 28989, 20473.14, 620, {}, []),
    (46, "vocab-50304", 32, True, None, 6.1723222732543945, None, 103.06, 317939.65, 36304, 20549.18, 670, {}, []),
    (48, "vocab-50304", 64, True, None, 6.0859222412109375, None, 196.53, 333465.86, 77426, 20501.64, 680, {}, []),
    (53, "fused-adamw-clip", 16, True, None, 5.870011, 0.6411, 71.42, 229402.91, 20469, 20363.48, None, {}, []),
    (55, "fused-adamw-clip", 32, True, None, 5.842730, 0.7216, 118.88, 275643.09, 36294, 20375.14, None, {}, []),
    (57, "fused-adamw-clip", 64, True, "2.1.2", 5.871626, 0.5131, 212.69, 308129.73, 77425, 20752.81, None, {}, []),
    (59, "fused-adamw-clip", 64, True, "nightly", 5.827522, 0.5281, 147.88, 443161.33, 48007, 1767.82, None, {}, ["'full 132 SM occupancy'"]),
    (61, "fused-adamw-clip", 96, True, "nightly", 5.892543, 0.3151, 217.20, 452605.54, 71223, 1909.78, None, {}, []),
    (63, "fused-adamw-clip", 104, True, "nightly", 5.877217, 0.3724, 237.49, 448431.31, 77023, 1846.30, None, {}, []),
]
ALSO_IN = {
    57: "../shared/seeds/002_47e3185d3476f478.txt:38 (the 2.1.2 side of '77 GB -> 48 GB, 3.1e5 -> 4.4e5 tokens/s'); "
        "002 line 8: 'single H800 gpu'",
    59: "../shared/seeds/002_47e3185d3476f478.txt:38 (the nightly side of '77 GB -> 48 GB, 3.1e5 -> 4.4e5 tokens/s'); "
        "002 line 8: 'single H800 gpu'",
}
STEP = 49  # the only step the log prints


def source_text(line: int, run_id: str) -> str | None:
    """The source line's text; where the seeds are not beside the repo, the text already transcribed."""
    path = HERE.parent.parent / SOURCE
    try:
        return path.read_text(encoding="utf-8").splitlines()[line - 1].strip()
    except (OSError, IndexError):
        try:
            return json.loads((HERE / f"{run_id}.json").read_text())["reference"]["text"]
        except (OSError, ValueError, KeyError):
            return None


def make(entry) -> dict:
    line, rung, batch, compiled, torch, loss, norm, dt, tok_s, mib, first_ms, watts, flags, notes = entry
    workload = dict(
        preset="gpt2-124m", n_layer=12, n_head=12, n_embd=768, seq_len=1024, batch_size=batch, grad_accum=1,
        **RUNGS[rung], sdpa_backend=None, compile="default" if compiled else "off",
        lr=None, weight_decay=None, steps=None, warmup_steps=None, seed=None, data=None, device="cuda",
        memory_budget_gib=None, profile_steps=None, lm_head_loss="plain",
    )
    ok = dt is not None
    name = f"ref-000-L{line:03d}-{rung}-b{batch}"
    sweep = {**BATCH_SWEEP, "value": batch} if torch == "nightly" else None
    reference = {
        "source": SOURCE, "line": line, "text": source_text(line, name),
        "gpu_class": GPU_CLASS, "torch": torch, "torch_note": None if torch else TORCH_NOTE,
        "batch_size": batch, "seq_len": 1024, "compiled": compiled, "step": STEP,
        "memory_mib_nvidia_smi": mib, "watts": watts, "tokens_per_s_logged": tok_s, "dt_ms_logged": dt,
        "first_step_ms_logged": first_ms,
        "first_step_ms_meaning": "the trailing ms figure of the line; the seeds README reads it as the first (compile) step" if first_ms else None,
        "assumed": [ASSUMED[k] for k in ("optimizer", "grad_clip")],
        "unknown": ["sdpa backend", "lr", "weight decay", "seed", "data", "steps", "warm-up", "driver", "CUDA"],
        "also_in": ALSO_IN.get(line), "notes": notes,
    }
    steps = {"ms": [], "loss": [], "grad_norm": []}
    summary: dict = {}
    if ok:
        steps = {
            "ms": [first_ms] + [None] * (STEP - 1) + [dt],
            "loss": [None] * STEP + [loss],
            "grad_norm": [None] * STEP + [norm],
        }
        summary = {
            "step_ms_median": dt, "step_ms_q1": None, "step_ms_q3": None, "step_ms_iqr": None, "step_ms_mean": dt,
            "first_step_ms": first_ms, "timed_steps": 1, "tokens_per_step": batch * 1024, "tokens_per_s": tok_s,
            "final_loss": loss, "mean_loss": None, "peak_allocated_bytes": None, "peak_reserved_bytes": None,
            "device_used_bytes": mib * 2**20, "peak_rss_bytes": None, "mfu": None,
        }
    record = new_record(
        run_id=name, kind="reference", status="ok" if ok else "oom",
        reason=None if ok else "out of memory, as logged ('B = 32, T = 1024, out of memory')",
        notes=["transcribed from the user's log: one 'Step 49' line, a single sample with no noise estimate"],
        env="reference", plan=PLAN, rung=rung, rung_index=list(RUNGS).index(rung), sweep=sweep, workload=workload,
        flags_requested=flags, flags_hash=canonical_hash({"reference": rung, **flags}),
        environment={"device": "cuda", "gpu": {"name": GPU_CLASS, "capability": "9.0"},
                     "torch": {"version": "2.1.2" if torch == "2.1.2" else None}},
        steps=steps, summary=summary, reference=reference,
    )
    return validate(record)


def records() -> list[dict]:
    return [make(e) for e in LINES]


def render(record: dict) -> str:
    return json.dumps(record, indent=1) + "\n"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    check = "--check" in argv
    stale = []
    made = {f"{r['run_id']}.json": r for r in records()}
    wanted = {name: render(r) for name, r in made.items()}
    for name, text in wanted.items():
        path = HERE / name
        # A file is current when it reads as the transcription (read_record: a version-1 file, upgraded on read, is
        # not rewritten for its version alone).
        if not path.is_file() or read_record(path) != made[name]:
            stale.append(name)
            if not check:
                path.write_text(text)
    extra = sorted(p.name for p in HERE.glob("ref-*.json") if p.name not in wanted)
    if check:
        for name in stale + extra:
            print(f"results/reference/{name}: differs from the transcription (run transcribe.py)", file=sys.stderr)
        return 1 if stale or extra else 0
    for name in extra:
        (HERE / name).unlink()
    print(f"wrote {len(wanted)} reference records to {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
