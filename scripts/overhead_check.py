"""Is the harness honest? Its tokens/s against a bare training loop of the same model and config, same job.

  python scripts/overhead_check.py --rung fused-adamw-clip [harness.run options] [--rounds 3] [--tolerance 0.01]
  python scripts/overhead_check.py --rung fused-adamw-clip --preset gpt2-124m --batch-size 64 --device cuda

Each round runs two fresh processes one after the other:
  1. the harness: `python -m harness.run --rungs RUNG ...` (its record lands in --out, like any run);
  2. a bare loop of that record's workload and flags: the same model, optimizer, data on the device, flags and
     torch.compile (built by gpt.train.build), stepped by a plain loop: no per-step events, no loss or grad-norm
     kept, no power sampler, no profiler; one synchronize before and one after the timed steps.
Warm-up steps (the record's warmup_steps, compile included) are excluded on both sides.

tokens/s: harness = the record's summary (tokens per step / median timed step); bare = tokens per step * timed
steps / wall time of those steps. The check passes when the median over rounds of harness / bare is within
--tolerance of 1 (default 1%). A summary (both figures per round, the ratio, where and with which torch) is
written to --out as overhead-<time>.yaml (not .json: it is not a run record). Exit 0 pass, 1 fail, 2 bad use.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness import argtypes
from harness.record.io import read_record
from harness.record.view import RecordView


def bare_loop(workload: dict, flags: dict) -> dict:
    """Time the workload in a plain loop; returns tokens/s and what it measured."""
    import torch

    from gpt.config import WorkloadConfig
    from gpt.train import build
    from harness.runner import flags as flagmod

    config = WorkloadConfig(**workload).validate()
    flagmod.apply(flagmod.FrozenFlags.from_dict(flags))  # before the model exists, as the worker does
    t = build(config)
    params = list(t.model.parameters())
    accum = config.grad_accum

    def step():
        for _ in range(accum):
            x, y = t.batches.next()
            with t.autocast():
                _, loss = t.forward(x, y)
            t.scaler.scale(loss / accum).backward()
        if config.grad_clip > 0:
            t.scaler.unscale_(t.optimizer)
            torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        t.scaler.step(t.optimizer)
        t.scaler.update()
        t.optimizer.zero_grad(set_to_none=True)

    def sync():
        if t.device.type == "cuda":
            torch.cuda.synchronize(t.device)

    for _ in range(config.warmup_steps):
        step()
    sync()
    timed = config.steps - config.warmup_steps
    start = time.perf_counter()
    for _ in range(timed):
        step()
    sync()
    seconds = time.perf_counter() - start
    return {"tokens_per_s": config.tokens_per_step * timed / seconds, "timed_steps": timed, "seconds": seconds,
            "step_ms_mean": seconds * 1000 / timed, "torch": torch.__version__, "device": t.device.type}


def harness_round(run_args: list[str], out: Path) -> dict:
    """One harness.run of one rung; returns its record (the newest record in `out`)."""
    before = set(out.glob("*.json"))
    cmd = [sys.executable, "-m", "harness.run", *run_args, "--out", str(out)]
    proc = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True)
    new = sorted(set(out.glob("*.json")) - before)
    if proc.returncode != 0 or len(new) != 1:
        raise SystemExit(f"harness run failed ({' '.join(cmd)}): {(proc.stdout + proc.stderr).strip().splitlines()[-1:]}")
    record = RecordView(read_record(new[0]))
    if not record.ok:
        raise SystemExit(f"harness run was {record.status}: {record.reason} ({new[0]})")
    return record


def bare_round(record: RecordView) -> dict:
    """The bare loop of the record's workload and flags, in a fresh process."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.json"
        spec.write_text(json.dumps({"workload": record.workload.to_dict(), "flags": dict(record.flags)}))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        proc = subprocess.run([sys.executable, __file__, "--bare", str(spec)], check=False, cwd=ROOT,
                              capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"bare loop failed: {proc.stderr.strip().splitlines()[-1:] or proc.stdout}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def verdict(pairs: list[tuple[float, float]], tolerance: float) -> dict:
    """pairs: (harness tokens/s, bare tokens/s) per round -> ratios, their median and pass/fail."""
    ratios = [h / b for h, b in pairs]
    median = statistics.median(ratios)
    return {"ratios": ratios, "median_ratio": median, "overhead": 1 - median, "tolerance": tolerance,
            "passed": abs(median - 1) <= tolerance}


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Any other option goes to `python -m harness.run` (e.g. --preset, --batch-size, --set, --steps, --device).")
    p.add_argument("--rung", required=True, help="the one rung of the plan to check (e.g. fused-adamw-clip)")
    p.add_argument("--rounds", type=argtypes.whole(1, 1_000, "number of rounds"), default=3, help="harness/bare pairs, alternated (default 3)")
    p.add_argument("--tolerance", type=argtypes.fraction, default=0.01, help="allowed |harness / bare - 1| (default 0.01)")
    p.add_argument("--out", type=argtypes.path_arg, default=Path("results/overhead-check"), help="records and the summary (default results/overhead-check/)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--bare"]:
        spec = json.loads(Path(argv[1]).read_text())
        print(json.dumps(bare_loop(spec["workload"], spec["flags"])))  # not a record: the bare loop's spec
        return 0
    args, run_args = make_parser().parse_known_args(argv)
    if any(a.split("=")[0] in ("--rungs", "--repeats", "--sweep") for a in run_args):
        print("error: --rungs/--repeats/--sweep are set by the check (use --rung and --rounds)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    run_args = [*run_args, "--rungs", args.rung, "--repeats", "1"]
    rounds = []
    for i in range(args.rounds):
        record = harness_round(run_args, args.out)
        bare = bare_round(record)
        h = record.summary_number("tokens_per_s")
        h_mean = record.tokens_per_step / (record.summary_number("step_ms_mean") / 1000)
        rounds.append({"harness_tokens_per_s": h, "harness_tokens_per_s_from_mean_step": h_mean,
                       "bare_tokens_per_s": bare["tokens_per_s"], "bare_step_ms_mean": bare["step_ms_mean"],
                       "harness_record": record.run_id})
        print(f"round {i + 1}/{args.rounds}: harness {h:,.0f} tokens/s (median step; {h_mean:,.0f} from the mean step), "
              f"bare loop {bare['tokens_per_s']:,.0f} tokens/s, harness/bare {h / bare['tokens_per_s']:.4f}", flush=True)
    result = verdict([(r["harness_tokens_per_s"], r["bare_tokens_per_s"]) for r in rounds], args.tolerance)
    summary = {
        "check": "harness tokens/s vs a bare loop of the same workload and flags",
        "when": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(["python", "scripts/overhead_check.py", *argv]),
        "device": record.intended_device or record.environment.device,
        "torch": record.torch_version,
        "rung": args.rung, "workload_hash": record.workload_hash,
        "rounds": rounds, **result,
    }
    import yaml

    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = args.out / f"overhead-{stamp}-{args.rung}.yaml"
    with open(path, "x") as f:  # never overwrite a finished check
        yaml.safe_dump(summary, f, sort_keys=False)
    print(f"harness / bare = {result['median_ratio']:.4f} (median of {args.rounds}); overhead {result['overhead']:+.2%}; "
          f"tolerance {args.tolerance:.1%}: {'PASS' if result['passed'] else 'FAIL'}; on {summary['device']}, torch "
          f"{summary['torch']} -> {path}")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
