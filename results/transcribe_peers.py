"""A peer's own numbers (results/gpu-*/peer-<name>.jsonl) as records: results/gpu-*/peer/<run id>.json.

    python results/transcribe_peers.py          # (re)write every results/gpu-*/peer/*.json
    python results/transcribe_peers.py --check  # exit 1 if the files differ from this transcription

A peer is another program doing the same work on the same machine in the same session (build-nanogpt's
train_gpt2.py GPT and its own loop; how it was run: the README beside each .jsonl). Its .jsonl mixes one JSON
line per run with the program's own console output; each JSON line becomes one record of kind "peer", which
harness.compare reads through the one record reader and never groups with measured runs. What the line says is
copied; what the README says of the conditions is written as known; everything else is null, not guessed.
The peer timed itself (median of steps 10-49) and kept no per-step times: a single value, no noise estimate.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from harness.record.io import read_record
from harness.record.model import canonical_hash, new_record
from harness.record.validator import validate

STEPS, FIRST_TIMED = 50, 10  # the README: 50 steps, median of steps 10-49
PEERS = {  # peer name (the .jsonl's stem after "peer-") -> what the README beside it says of how it ran
    "build-nanogpt": {
        "program": "build-nanogpt train_gpt2.py (its GPT, model code unchanged, and its own loop)",
        "workload": {"precision": "bf16", "attention": "sdpa", "sdpa_backend": "auto", "lm_head_loss": "plain",
                     "optimizer": "fused", "grad_clip": 1.0},
        "flags": {"matmul_precision": "high", "sdpa": "auto"},
        "known": ["bf16 autocast", "TF32 on (set_float32_matmul_precision('high'))", "SDPA with every backend enabled",
                  "vocab 50304", "fused AdamW", "gradient clipping at 1.0", "torch.compile", "B=64, T=1024",
                  "50 steps, its own timing: median of steps 10-49", "random tokens (not the harness's synthetic corpus)"],
        "unknown": ["learning rate and its schedule", "weight decay", "seed", "cuDNN TF32 flag", "per-step times"],
    },
}


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def make(jsonl: Path, line: int, text: str) -> dict:
    peer = jsonl.stem.removeprefix("peer-")
    info = PEERS[peer]
    reported = json.loads(text)
    b, t = reported["B"], reported["T"]
    workload = dict(
        preset="gpt2-124m", n_layer=12, n_head=12, n_embd=768, vocab_size=reported["vocab"], seq_len=t, batch_size=b,
        grad_accum=1, **info["workload"], compile="default" if reported["compile"] else "off", lr=None, weight_decay=None,
        steps=STEPS, warmup_steps=FIRST_TIMED, seed=None, data=None, device="cuda", memory_budget_gib=None, profile_steps=None,
    )
    mib = 2**20
    summary = {
        "step_ms_median": reported["median_ms"], "step_ms_q1": None, "step_ms_q3": None, "step_ms_iqr": None,
        "step_ms_mean": None, "first_step_ms": reported["first_step_ms"], "timed_steps": STEPS - FIRST_TIMED,
        "tokens_per_step": b * t, "tokens_per_s": reported["tokens_per_s"], "final_loss": reported["loss_last"],
        "mean_loss": None, "peak_allocated_bytes": reported["peak_alloc_mib"] * mib,
        "peak_reserved_bytes": reported["peak_reserved_mib"] * mib, "device_used_bytes": None, "peak_rss_bytes": None,
        "mfu": None,
    }
    record = new_record(
        run_id=f"peer-{peer}-{jsonl.parent.name.removeprefix('gpu-')}-L{line:03d}", kind="peer", status="ok",
        notes=[(f"transcribed from {rel(jsonl)}:{line}: the peer's own timing (median of steps {FIRST_TIMED}-{STEPS - 1}); "
                "per-step times were not kept, so there is no noise estimate")],
        env="peer", plan=f"peer-{peer}", rung=peer, workload=workload,
        # never equal to a measured run's hash: a peer is beside the measurements, not one of them
        flags_requested=info["flags"], flags_hash=canonical_hash({"peer": peer, **info["flags"]}),
        environment={"device": "cuda", "gpu": {"name": reported["gpu"]}, "torch": {"version": reported["torch"]}},
        steps={"ms": [reported["first_step_ms"]] + [None] * (STEPS - 1),
               "loss": [reported["loss_first"]] + [None] * (STEPS - 2) + [reported["loss_last"]], "grad_norm": []},
        summary=summary, reference=None,
        peer={"name": peer, "program": info["program"], "source": rel(jsonl), "line": line, "text": text,
              "reported": reported, "readme": rel(jsonl.parent / "README.md"), "known": info["known"],
              "unknown": info["unknown"]},
    )
    return validate(record)


def sources() -> list[Path]:
    return sorted(HERE.glob("gpu-*/peer-*.jsonl"))


def records() -> list[tuple[Path, dict]]:
    """(where the record belongs, record) for every JSON line of every peer file."""
    out = []
    for jsonl in sources():
        for i, text in enumerate(jsonl.read_text(encoding="utf-8").splitlines(), 1):
            if text.startswith("{"):  # the other lines are the program's own console output
                out.append((jsonl.parent / "peer", make(jsonl, i, text)))
    return out


def render(record: dict) -> str:
    return json.dumps(record, indent=1) + "\n"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    check = "--check" in argv
    made = {folder / f"{r['run_id']}.json": r for folder, r in records()}
    wanted = {path: render(r) for path, r in made.items()}
    # current: the file reads as the transcription (a version-1 file, upgraded on read, is not rewritten for that)
    stale = [p for p, r in made.items() if not p.is_file() or read_record(p) != r]
    extra = sorted(p for p in HERE.glob("gpu-*/peer/*.json") if p not in wanted)
    if check:
        for path in stale + extra:
            print(f"{rel(path)}: differs from the transcription (run python results/transcribe_peers.py)", file=sys.stderr)
        return 1 if stale or extra else 0
    for path in stale:
        path.parent.mkdir(exist_ok=True)
        path.write_text(wanted[path], encoding="utf-8")
    for path in extra:
        path.unlink()
    print(f"{len(wanted)} peer records under {rel(HERE)}/gpu-*/peer/ ({len(stale)} written, {len(extra)} removed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
