"""harness.gpu_check's real steps on this CPU, a stand-in for the GPU: real `python -m harness.run` workers (the tiny
preset, not compiled, a few steps), the real budget loop and clock, the real compare and report, packing after every
run and unpacking. Only the workload is shrunk (the stand-in) and the sanity check left out (it needs CUDA)."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest
from shipped import RESULTS

from harness.gpu_check import choose, estimate, pack, plan, runner
from harness.gpu_check.budget import spend
from harness.gpu_check.plan import Tier

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent


class StandIn(runner.WorkerRunner):
    """The plan's harness.run command with the GPU workload swapped for the tiny preset on the CPU."""

    def argv(self, run, timeout_s):
        argv = super().argv(run, timeout_s)
        swap = {"gpt2-124m": "tiny", "cuda": "cpu", str(run.batch_size): "2"}
        return [swap.get(a, a) if i and argv[i - 1] in ("--preset", "--device", "--batch-size") else a
                for i, a in enumerate(argv)] + ["--set", "compile=off", "--threads", "1"]


def test_a_budgeted_call_on_the_cpu_stand_in(tmp_path):
    out, packed = tmp_path / "call", tmp_path / "OUT"
    tiers = plan.select(["padding-tf32", "fastest"], steps=(4, 1))
    est = estimate.Estimator([], "stand-in")
    # 1 s a run, the cuDNN one 200 s: the fastest tier (a pair, all or nothing) cannot fit the 300 s
    est.prior = lambda run: estimate.Estimate(200.0 if run.rung == "sdpa-cudnn" else 1.0, "stand-in")
    workers = StandIn(sys.executable, out)
    t0 = time.monotonic()
    summary = {"gpu": "stand-in", "started_at": "2026-11-25T19:00:00+00:00", "budget_s": 600.0, "runs": [], "sanity": {}}

    def packed_after(outcome):
        summary["runs"].append(outcome.to_dict())
        pack.pack(out, summary, "t\n", packed)

    outcomes = spend(tiers, workers, time.monotonic, t0 + 300, est, on_done=packed_after)
    assert [(o.run.rung, o.status) for o in outcomes] == [
        ("tf32-50257-no-pad", "ok"), ("fp32-50257-no-pad", "ok"), ("best-of-ladder", "not started"),
        ("sdpa-cudnn", "not started")]
    assert outcomes[2].note.startswith("tier fastest needs ~")
    assert est.scale > 1  # the tiny runs took longer than the 1 s they were given: the estimates grew
    records = [json.loads(p.read_text()) for p in sorted((out / "padding").glob("*.json"))]
    assert [r["rung"] for r in records] == ["tf32-50257-no-pad", "fp32-50257-no-pad"]
    assert records[0]["workload"]["profile_steps"] == 3 and records[1]["workload"]["profile_steps"] == 0
    assert records[0]["flags"]["requested"]["inductor_shape_padding"] == "off"
    assert "=== padding/tf32-50257-no-pad@B16" in (out / "logs" / "padding-tf32.log").read_text()

    summary.update(runner.closing(sys.executable, out, [RESULTS / "reference"]))
    assert summary["compare"]["exit"] == 0 and summary["report"]["exit"] == 0
    # compare's verdict names no rung when nothing is paired (two rungs, one env, one CPU); its count and the report do.
    # A run this shared machine measured under contention (another tenant busy) is counted apart, not as ok.
    head = " ".join((out / "compare.txt").read_text().split())
    ok, contended = re.search(r"(\d+) ok measured run\(s\)", head), re.search(r"(\d+) contended left out", head)
    assert int(ok.group(1)) + (int(contended.group(1)) if contended else 0) == 2, head[:400]
    assert "tf32-50257-no-pad" in (out / "report" / "report.md").read_text() and (out / "report" / "report.html").is_file()
    files = pack.pack(out, summary, "t\n", packed)
    assert len(list(packed.iterdir())) == 3 == len(files)
    target = pack.unpack(files[0], tmp_path / "results")
    assert target.name == "gpu-stand-in-20261125"
    assert {p.name for p in (target / "padding").glob("*.json")} == {f"{r['run_id']}.json" for r in records}
    assert (target / "report" / "report.html").is_file() and (target / "README.md").is_file()


class StandInAtB(StandIn):
    """As StandIn, at the plan's own B: the call decides its best stack among the runs at B=64."""

    def argv(self, run, timeout_s):
        argv = runner.WorkerRunner.argv(self, run, timeout_s)
        swap = {"gpt2-124m": "tiny", "cuda": "cpu"}
        return [swap.get(a, a) if i and argv[i - 1] in ("--preset", "--device") else a
                for i, a in enumerate(argv)] + ["--set", "compile=off", "--threads", "1"]


def test_stacks_in_a_call_on_the_cpu_stand_in(tmp_path):
    """The default call's first tiers with real workers: cuDNN and the cuDNN+CCE stack have no CPU path and are
    recorded unsupported with the reason (never faked); a stack with a CPU path runs; the spread's "best stack" is
    decided from this call's own records (the fastest run whose loss matches the baseline's), then run A B."""
    out = tmp_path / "call"
    cpu_stack = Tier("cpu-stack", "a stack with a CPU path", (
        plan.Run("cpu-stack", "beyond-ladder", "sdpa-auto+inductor-aggressive-fusion", 64, False, "beyond", 4, 1),),
        needs=("fastest",))
    tiers = [*plan.select(["fastest", "stack"], steps=(4, 1)), cpu_stack, *plan.select(["spread"], steps=(4, 1))]
    est = estimate.Estimator([], "stand-in")
    est.prior = lambda run: estimate.Estimate(1.0, "stand-in")
    chooser = choose.Chooser([], "stand-in", out)
    outcomes = spend(tiers, StandInAtB(sys.executable, out), time.monotonic, time.monotonic() + 900, est,
                     say=lambda line: None, decide=chooser)
    records = {(r["rung"], r["run_id"]): r for r in (json.loads(p.read_text()) for p in (out / "beyond").glob("*.json"))}
    status = [(o.run.tier, o.run.rung, o.status) for o in outcomes]
    assert status[:4] == [("fastest", "best-of-ladder", "ok"), ("fastest", "sdpa-cudnn", "unsupported"),
                          ("stack", "sdpa-cudnn+lm-head-cce", "unsupported"),
                          ("cpu-stack", "sdpa-auto+inductor-aggressive-fusion", "ok")]
    stack = next(r for (rung, _), r in records.items() if rung == "sdpa-cudnn+lm-head-cce")
    assert "SDPA backend 'cudnn' has no CPU kernel" in stack["reason"] and "Triton" in stack["reason"]
    (decided,) = [c for c in chooser.choices if c.startswith("spread: best stack = ")]
    best = decided.removeprefix("spread: best stack = ").split(" (")[0]
    # the chooser read the records: the one equivalent run beside the baseline, never an unsupported one
    assert best == "sdpa-auto+inductor-aggressive-fusion", chooser.choices
    assert [(o.run.rung, o.status) for o in outcomes[4:]] == [("best-of-ladder", "ok"), (best, outcomes[5].status)]
