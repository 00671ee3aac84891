"""What a gpu_check call decides as it goes (harness.gpu_check.choose): the best stack from its own runs, the largest B
from the memory lines of the committed H100/H200 records, and the stacks' time estimates; and how the budget loop
uses those decisions. The numbers the tests expect are recomputed here from the record files themselves."""

from __future__ import annotations

import json
import shutil
import statistics
from dataclasses import replace

import pytest
from shipped import RESULTS

from harness.gpu_check import choose, estimate, plan
from harness.gpu_check.budget import RAN_EARLIER, Result, SimulatedClock, spend
from harness.gpu_check.plan import Run, Tier

GIB = 2**30
H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


@pytest.fixture(scope="module")
def committed():
    return estimate.load_gpu_records(sorted(RESULTS.glob("gpu-*/")))


def _peaks(rung_names: set[str], gpu: str, lm_head_loss: str = "plain", sdpa: str = "flash") -> list[tuple[int, float]]:
    """(B, NVML device-used GiB) of the ok compiled bf16 runs of a configuration, read from the JSON directly."""
    out = []
    for path in RESULTS.glob("gpu-*/**/*.json"):
        r = json.loads(path.read_text())
        w = r.get("workload") or {}
        if (r.get("status") == "ok" and r.get("kind") == "measured" and r.get("rung") in rung_names
                and (r.get("environment", {}).get("gpu") or {}).get("name") == gpu
                and w.get("lm_head_loss", "plain") == lm_head_loss and w.get("sdpa_backend") == sdpa):
            used = r["summary"].get("device_used_bytes") or r["summary"]["peak_reserved_bytes"]
            out.append((w["batch_size"], used / GIB))
    return out


def test_the_memory_line_of_the_baseline_is_a_least_squares_fit_of_its_runs(committed):
    h100 = choose.MemoryModel([r for r in committed if r.environment.gpu.name == H100])
    pts = _peaks({"best-of-ladder", "fused-adamw-clip"}, H100)
    assert len({b for b, _ in pts}) >= 3  # B = 16, 64, 96, 104
    line = statistics.linear_regression([b for b, _ in pts], [p for _, p in pts])
    assert h100.fixed == pytest.approx(line.intercept, rel=1e-6)
    slope, basis = h100.per_sample("best-of-ladder")
    assert slope == pytest.approx(statistics.fmean((p - line.intercept) / b for b, p in pts), rel=1e-6)
    assert basis == f"{len(pts)} run(s)"
    # 96 fits the H100 with the 5 GiB headroom (about 70 GiB), 128 does not (about 93 GiB of 79)
    p = h100.largest_b("best-of-ladder")
    assert p.batch_size == 96 and p.peak_gib + 5 <= p.usable_gib < h100.peak("best-of-ladder", 128) + 5


def test_a_stack_no_run_has_adds_its_parts_per_sample_differences(committed):
    h200 = choose.MemoryModel([r for r in committed if r.environment.gpu.name == H200])
    base, _ = h200.per_sample("best-of-ladder")
    cudnn, _ = h200.per_sample("sdpa-cudnn")
    cce, _ = h200.per_sample("lm-head-cce")
    (cce_run,) = _peaks({"lm-head-cce"}, H200, lm_head_loss="cce")
    assert cce == pytest.approx((cce_run[1] - h200.fixed) / cce_run[0], rel=1e-6)  # CCE halves the memory per sample
    stack, basis = h200.per_sample("sdpa-cudnn+lm-head-cce")
    assert stack == pytest.approx(base + (cudnn - base) + (cce - base))
    assert basis.startswith("its parts, assumed additive (sdpa-cudnn: ")
    # the H100 has no CCE run: the H200's difference to its baseline stands in, and says so
    h100 = choose.MemoryModel([r for r in committed if r.environment.gpu.name == H100], h200)
    slope, basis = h100.per_sample("lm-head-cce")
    assert slope == pytest.approx(h100.per_sample("best-of-ladder")[0] + cce - base)
    assert basis == "its difference to the baseline on another GPU (assumed the same per sample)"
    assert choose.MemoryModel([r for r in committed if r.environment.gpu.name == H100]).per_sample("lm-head-cce") == (
        None, "no run of lm-head-cce on this GPU")


def test_no_line_without_the_baseline_at_two_batch_sizes(committed):
    one_b = [r for r in committed if r.environment.gpu.name == H200 and r.workload.batch_size == 64]
    model = choose.MemoryModel(one_b)
    assert model.fixed is None
    assert model.largest_b("best-of-ladder").batch_size is None
    assert "fewer than two B" in model.largest_b("best-of-ladder").basis


def test_the_largest_b_tier_runs_the_stack_at_its_largest_b_and_the_baseline_on_as_many_sequences(committed):
    """The stack at the largest B its memory line fits; the baseline, which does not fit there on the H100 (nor on
    the H200 at 256), in the fewest micro-batches that fit, so the stack's loss is checked at its own B."""
    chooser = choose.Chooser(committed, H100)
    decided = chooser(plan.tier("largest-b"))
    assert [(r.rung, r.batch_size, r.grad_accum, why) for r, why in decided] == [
        ("sdpa-cudnn+lm-head-cce", 192, 1, None), ("best-of-ladder", 96, 2, None)]
    assert [r.key for r, _why in decided] == ["beyond-ladder/sdpa-cudnn+lm-head-cce@B192",
                                             "beyond-ladder/best-of-ladder@B96x2"]
    memory = choose.MemoryModel([r for r in committed if r.environment.gpu.name == H100],
                                choose.MemoryModel([r for r in committed if r.environment.gpu.name != H100]))
    assert not memory.fits("best-of-ladder", 192) and memory.fits("best-of-ladder", 96)
    assert chooser.choices[0] == ("largest-b: best stack = sdpa-cudnn+lm-head-cce (no equivalent run at B=64 in this "
                                  "call yet: the planned sdpa-cudnn+lm-head-cce)")
    assert chooser.choices[1].startswith("largest-b: B=192, the largest at which sdpa-cudnn+lm-head-cce fits: ")
    assert chooser.choices[1].endswith("; best-of-ladder 70.1 GiB at B=96x2")
    h200 = [(r.rung, r.batch_size, r.grad_accum) for r, _w in choose.Chooser(committed, H200)(plan.tier("largest-b"))]
    assert h200 == [("sdpa-cudnn+lm-head-cce", 256, 1), ("best-of-ladder", 128, 2)]
    # a GPU no record has: nothing is known to fit, and every run of the tier says why it does not start
    decided = choose.Chooser(committed, "NVIDIA B200")(plan.tier("largest-b"))
    assert all(r.batch_size is plan.LARGEST_B and why.startswith("no B from 96 up is known to fit: sdpa-cudnn+lm-head-cce: "
                                                                 "its memory line is unknown") for r, why in decided)


def test_a_knob_the_best_stack_cannot_take_is_not_run_and_says_why(tmp_path):
    assert choose.with_stack("best-stack+compile-max-autotune-no-cudagraphs", "sdpa-cudnn+lm-head-cce") == \
        "sdpa-cudnn+lm-head-cce+compile-max-autotune-no-cudagraphs"
    assert choose.with_stack("best-stack+lm-head-cce", "sdpa-cudnn+lm-head-cce") == "sdpa-cudnn+lm-head-cce"
    call = tmp_path / "call" / "beyond"  # a call whose fastest equivalent run changes the compile mode
    shutil.copytree(RESULTS / "gpu-h200-20261127-call1" / "beyond", call)
    for p in call.glob("*.json"):
        if json.loads(p.read_text())["rung"] not in ("best-of-ladder", "compile-reduce-overhead"):
            p.unlink()
    assert choose.best_stack(call)[0] == "compile-reduce-overhead"
    ((run, why),) = choose.Chooser([], H200, call.parent)(plan.tier("autotune"))
    assert run.rung == "compile-reduce-overhead+compile-max-autotune-no-cudagraphs"
    assert why.startswith("the best stack does not take it: --rungs 'compile-reduce-overhead+compile-max-autotune-no-"
                          "cudagraphs': compile-max-autotune-no-cudagraphs and compile-reduce-overhead both set compile")


def test_the_best_stack_is_the_fastest_run_whose_loss_matches_the_calls_baseline(tmp_path):
    call = tmp_path / "call" / "beyond"
    shutil.copytree(RESULTS / "gpu-h200-20261127-call1" / "beyond", call)
    runs = {json.loads(p.read_text())["rung"]: json.loads(p.read_text()) for p in call.glob("*.json")}
    assert runs["sdpa-cudnn"]["status"] == "ok"
    rung, why = choose.best_stack(call)
    assert rung == "sdpa-cudnn" and why.startswith("the fastest equivalent run at B=64 in this call (530,368 tokens/s)")
    # without it, the next: every run of this call had the same loss as its baseline, so the fastest of the rest
    rest = {k: v["summary"]["tokens_per_s"] for k, v in runs.items()
            if v["status"] == "ok" and k not in ("sdpa-cudnn", "best-of-ladder")}
    next(call.glob("*-sdpa-cudnn-*.json")).unlink()
    assert choose.best_stack(call)[0] == max(rest, key=rest.get)
    # without the baseline nothing is equivalent: the planned stack
    next(call.glob("*-best-of-ladder-*.json")).unlink()
    planned = "no equivalent run at B=64 in this call yet: the planned sdpa-cudnn+lm-head-cce"
    assert choose.best_stack(call) == (plan.PLANNED_STACK, planned)
    assert choose.best_stack(None)[0] == plan.PLANNED_STACK


def test_a_stack_no_record_has_is_estimated_from_its_parts(committed):
    est = estimate.Estimator(committed, H200)
    run = Run("stack", "beyond-ladder", "sdpa-cudnn+lm-head-cce", 64, True, "beyond", *plan.FULL)
    base = est.prior(Run("stack", "beyond-ladder", "best-of-ladder", 64, True, "beyond", *plan.FULL)).seconds
    parts = [est.prior(Run("stack", "beyond-ladder", p, 64, True, "beyond", *plan.FULL)).seconds
             for p in ("sdpa-cudnn", "lm-head-cce")]
    got = est.prior(run)
    assert got.seconds == pytest.approx(base + sum(max(p - base, 0.0) for p in parts))
    assert not got.measured and got.basis.startswith(f"best-of-ladder {base:.0f} s sdpa-cudnn +")
    assert "(a stack no run has: its parts' extra times, assumed additive)" in got.basis
    # a part's long compile carries over to the stack: coordinate descent compiled minutes on the H200
    slow = est.prior(Run("s", "beyond-ladder", "sdpa-cudnn+inductor-coordinate-descent", 64, False, "beyond", *plan.FULL))
    assert slow.seconds > base + 90


class Decider:
    """Decides BEST_STACK as `stack` and LARGEST_B as 96, as a call would from its runs."""

    def __init__(self, stack: str):
        self.stack = stack

    def __call__(self, tier: Tier):
        return [(Run(r.tier, r.plan, r.rung.replace(plan.BEST_STACK, self.stack), 96 if r.batch_size is None else
                     r.batch_size, r.capture, r.folder, r.steps, r.warmup_steps), None) for r in tier.runs]


def test_the_budget_runs_what_the_call_decides_and_repeats_only_where_a_tier_means_to():
    clock, ran = SimulatedClock(), []

    def runner(run: Run, timeout_s: float) -> Result:
        ran.append(run.key)
        clock.advance(10)
        return Result("ok", [run.key])

    class Ten(estimate.Estimator):
        def __init__(self):
            self.prior_sum = self.actual_sum = 0.0

        def prior(self, run):
            return estimate.Estimate(10.0, "ten")

    tiers = [plan.tier(n) for n in ("fastest", "largest-b", "spread", "batch-96", "spread-2")]
    outcomes = spend(tiers, runner, clock, 1000, Ten(), say=lambda line: None, decide=Decider("sdpa-cudnn"))
    assert ran == ["beyond-ladder/best-of-ladder@B64", "beyond-ladder/sdpa-cudnn@B64",
                   "beyond-ladder/sdpa-cudnn@B96", "beyond-ladder/best-of-ladder@B96",  # largest-b
                   "beyond-ladder/best-of-ladder@B64", "beyond-ladder/sdpa-cudnn@B64",  # spread: A B again, on purpose
                   "beyond-ladder/best-of-ladder@B64", "beyond-ladder/sdpa-cudnn@B64"]  # spread-2
    skipped = [(o.run.tier, o.run.key, o.note) for o in outcomes if not o.started]
    assert skipped == [("batch-96", "beyond-ladder/sdpa-cudnn@B96", RAN_EARLIER),
                       ("batch-96", "beyond-ladder/best-of-ladder@B96", RAN_EARLIER)]


def test_a_run_the_call_could_not_decide_is_skipped_with_why_and_never_started():
    clock = SimulatedClock()

    def runner(run, timeout_s):  # pragma: no cover - must not be called
        raise AssertionError(f"started {run.key}")

    def undecidable(tier):
        return [(r, "no B from 96 is known to fit best-stack") for r in tier.runs]

    alone = replace(plan.tier("largest-b"), needs=())  # (with its need unmet, that need is the reason given)
    outcomes = spend([alone], runner, clock, 1000, estimate.Estimator([], H100),
                     say=lambda line: None, decide=undecidable)
    assert [(o.run.key, o.status, o.note, o.basis) for o in outcomes] == [
        ("beyond-ladder/best-stack@Blargest", "not started", "no B from 96 is known to fit best-stack",
         "decided in the call"),
        ("beyond-ladder/best-of-ladder@Blargest", "not started", "no B from 96 is known to fit best-stack",
         "decided in the call")]
