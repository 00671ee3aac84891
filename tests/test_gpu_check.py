"""harness.gpu_check without a GPU: the budget and ordering logic with a fake clock and fake runner, the estimates
against the committed H100 records, the plan's harness.run commands, the dry run as a user reads it, packing and
unpacking, the CLI's wiring with its GPU steps stood in, and scripts/gpu_check.sh's quick mode. Nothing here trains
(the real workers on the tiny preset are in test_gpu_check_stand_in.py, marked slow)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tarfile
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from records_factory import make_record, write
from shipped import RESULTS

from harness.gpu_check import __main__ as cli
from harness.gpu_check import archive_summary, budget, estimate, pack, plan, runner, sanity
from harness.gpu_check.budget import Result, SimulatedClock, spend
from harness.gpu_check.plan import Run, Tier
from harness.record.io import iter_records
from harness.record.view import RecordView
from harness.runner.request import build_points

ROOT = Path(__file__).resolve().parent.parent
H100 = RESULTS / "gpu-h100-80gb-hbm3"
# --records as the default reads them (results/gpu-*/), from the shipped copy: a GPU call a user unpacked changes nothing
SHIPPED_GPU = [arg for folder in sorted(RESULTS.glob("gpu-*/")) for arg in ("--records", str(folder))]
H100_NAME = "NVIDIA H100 80GB HBM3"
DATA = ROOT / "tests" / "data"


# ---------------------------------------------------------------- a fake clock, a fake runner, fixed estimates

class FixedEstimator(estimate.Estimator):
    """Prior = a table by rung (seconds); the scaling by the call's runs is the real one."""

    def __init__(self, seconds: dict[str, float]):
        self.seconds, self.prior_sum, self.actual_sum = seconds, 0.0, 0.0

    def prior(self, run: Run) -> estimate.Estimate:
        return estimate.Estimate(self.seconds[run.rung], "table")


class FakeRunner:
    """Each run takes `took[rung]` on the fake clock (default its estimate) and ends with `status[rung]` (default ok)."""

    def __init__(self, clock: SimulatedClock, took: dict[str, float], status: dict[str, str] | None = None):
        self.clock, self.took, self.status, self.calls = clock, took, status or {}, []

    def __call__(self, run: Run, timeout_s: float) -> Result:
        self.calls.append((run.rung, round(timeout_s, 1)))
        self.clock.advance(min(self.took[run.rung], timeout_s))
        return Result(self.status.get(run.rung, "ok"), [f"id-{run.rung}"])


def tier(name, *rungs, atomic=True, needs=()):
    return Tier(name, f"answers {name}", tuple(Run(name, "padding", r, 16, False, "padding") for r in rungs), atomic, needs)


def go(tiers, took, deadline, status=None, est=None):
    clock = SimulatedClock()
    est = est or FixedEstimator(dict(took))
    fake = FakeRunner(clock, took, status)
    seen = []
    outcomes = spend(tiers, fake, clock, deadline, est, on_done=seen.append, say=lambda line: None)
    assert seen == outcomes  # every decision reported as it is made, in order
    return outcomes, fake, clock


def test_runs_in_order_and_starts_none_that_would_not_finish():
    tiers = [tier("t", "a", "b", "c", "d", atomic=False)]
    outcomes, fake, clock = go(tiers, {"a": 40, "b": 50, "c": 30, "d": 10}, deadline=100)
    # a (40) and b (50) fit; c (30) would end at 120 > 100: not started; d (10) still fits after it
    assert [o.run.rung for o in outcomes] == ["a", "b", "c", "d"]
    assert [o.started for o in outcomes] == [True, True, False, True]
    assert outcomes[2].note == "needs ~30 s, 10 s left"
    assert fake.calls == [("a", 100), ("b", 60), ("d", 10)]  # each run's timeout is the time left
    assert clock.now == 100


def test_a_cheaper_later_run_uses_what_a_skipped_one_leaves():
    outcomes, fake, _ = go([tier("t", "big", "small", atomic=False)], {"big": 80, "small": 20}, deadline=50)
    assert [o.started for o in outcomes] == [False, True]
    assert fake.calls == [("small", 50)]


def test_an_atomic_tier_starts_only_when_all_its_runs_fit():
    tiers = [tier("pair", "a", "b"), tier("single", "c")]
    outcomes, fake, _ = go(tiers, {"a": 30, "b": 30, "c": 20}, deadline=50)
    assert [o.started for o in outcomes] == [False, False, True]
    assert outcomes[0].note == "tier pair needs ~60 s, 50 s left"
    assert fake.calls == [("c", 50)]


def test_a_tier_that_needs_another_waits_for_it_to_complete():
    tiers = [tier("base", "a", "b"), tier("knobs", "k", atomic=False, needs=("base",)), tier("free", "f")]
    # base does not fit, so knobs (which need it) do not start although they would fit; free does
    outcomes, _fake, _ = go(tiers, {"a": 60, "b": 60, "k": 10, "f": 10}, deadline=100)
    assert [o.started for o in outcomes] == [False, False, False, True]
    assert outcomes[2].note == "needs tier base complete in this call"
    # a run of the needed tier that left no measurement (error) leaves it incomplete too
    outcomes, _, _ = go(tiers, {"a": 10, "b": 10, "k": 10, "f": 10}, deadline=100, status={"b": "error"})
    assert [o.status for o in outcomes] == ["ok", "error", "not started", "ok"]
    # oom and unsupported are results: the tier is complete
    outcomes, _, _ = go(tiers, {"a": 10, "b": 10, "k": 10, "f": 10}, deadline=100, status={"b": "oom"})
    assert [o.status for o in outcomes] == ["ok", "oom", "ok", "ok"]


def test_estimates_follow_the_runs_this_call_has_done():
    # every run takes twice its estimate: after the first, the rest are estimated x2, and c no longer fits
    tiers = [tier("t", "a", "b", "c", atomic=False)]
    est = FixedEstimator({"a": 10, "b": 10, "c": 20})
    outcomes, _, _ = go(tiers, {"a": 20, "b": 20, "c": 40}, deadline=70, est=est)
    assert [o.started for o in outcomes] == [True, True, False]
    assert est.scale == pytest.approx(2.0)
    assert outcomes[1].estimate_s == pytest.approx(20) and outcomes[2].estimate_s == pytest.approx(40)
    assert outcomes[2].note == "needs ~40 s, 30 s left"


def test_failed_runs_do_not_move_the_estimates():
    est = FixedEstimator({"a": 30, "b": 30})
    go([tier("t", "a", "b", atomic=False)], {"a": 2, "b": 30}, deadline=100, status={"a": "unsupported"}, est=est)
    assert est.scale == pytest.approx(1.0)  # the unsupported run's 2 s says nothing about training time


def test_a_run_that_overruns_its_estimate_is_cut_at_the_deadline():
    clock = SimulatedClock()
    fake = FakeRunner(clock, {"a": 500})
    spend([tier("t", "a")], fake, clock, 100, FixedEstimator({"a": 50}), say=lambda line: None)
    assert fake.calls == [("a", 100)] and clock.now == 100  # its timeout kept the reserve


# ---------------------------------------------------------------- estimates from the committed records

def h100_records():
    return estimate.load_gpu_records([H100])


def test_prior_is_the_committed_run_less_the_steps_left_out():
    est = estimate.Estimator(h100_records(), H100_NAME)
    run = Run("x", "padding", "tf32-50257-no-pad", 16, True, "padding", 30, 5)
    e = est.prior(run)
    # the matching record: seed-ladder tf32 at B=16, read here independently of the estimator
    (rec,) = [r for r in map(json.loads, map(Path.read_text, (H100 / "ladder").glob("*tf32*.json")))
              if r["workload"]["batch_size"] == 16]
    worker = (datetime.fromisoformat(rec["finished_at"]) - datetime.fromisoformat(rec["started_at"])).total_seconds()
    want = estimate.LAUNCH_S + worker - 20 * rec["summary"]["step_ms_median"] / 1000
    # the same workload; the run turns the compiler's padding off, a flag the record did not set
    assert e.seconds == pytest.approx(want) and e.measured and e.basis == "tf32 B=16; other flags"


def test_the_nearest_record_stands_in_and_says_what_differs():
    est = estimate.Estimator(h100_records(), H100_NAME)
    e = est.prior(Run("x", "beyond-ladder", "sdpa-cudnn", 64, True, "beyond"))
    assert e.basis == "fused-adamw-clip B=64; other sdpa_backend" and e.measured
    e = est.prior(Run("x", "beyond-ladder", "compile-max-autotune-no-cudagraphs", 64, False, "beyond"))
    assert not e.measured and "+240 s assumed: no record has compile max-autotune-no-cudagraphs" in e.basis
    # at the committed 50 steps nothing is taken off
    e = est.prior(Run("x", "beyond-ladder", "best-of-ladder", 64, True, "beyond", 50, 10))
    slowest = max(r.worker_seconds for r in h100_records()
                  if r.rung == "fused-adamw-clip" and r.workload.batch_size == 64)
    assert e.seconds == estimate.LAUNCH_S + slowest
    # no run at B=24: the nearest B (16; the rung ran at 16, 64, 96 and 104 here), its 30 steps scaled by 24/16
    e = est.prior(Run("x", "beyond-ladder", "best-of-ladder", 24, False, "beyond"))
    (b16,) = [r for r in h100_records() if r.rung == "fused-adamw-clip" and r.workload.batch_size == 16]
    median_s = b16.summary.step_ms_median / 1000
    want = estimate.LAUNCH_S + b16.worker_seconds - (len(b16.step_ms) - 30) * median_s + 30 * median_s * (24 / 16 - 1)
    assert e.seconds == pytest.approx(want) and not e.measured
    assert e.basis == ("fused-adamw-clip B=16, its steps scaled to B=24 (assumed: step time in proportion to the "
                       "sequences per step)")
    # in micro-batches: B=12x2 is 24 sequences a step, the same steps' time (its worker runs the same data)
    e2 = est.prior(Run("x", "beyond-ladder", "best-of-ladder", 12, False, "beyond", grad_accum=2))
    assert e2.seconds == pytest.approx(want) and "scaled to B=12x2" in e2.basis and "grad_accum" not in e2.basis
    # no run of this model at all: the slowest run there is (here: CPU records of the tiny preset), else an assumption
    tiny = [RecordView(json.loads(f.read_text())) for f in sorted((DATA / "aa-cpu-1t" / "b").glob("*.json"))]
    e = estimate.Estimator(tiny, "cpu").prior(Run("x", "beyond-ladder", "best-of-ladder", 24, False, "beyond"))
    assert e.seconds == pytest.approx(max(estimate.LAUNCH_S + r.worker_seconds for r in tiny)) and not e.measured
    assert e.basis.startswith("no committed run of this model at T=1024: the slowest committed run")
    e = estimate.Estimator([], H100_NAME).prior(Run("x", "beyond-ladder", "best-of-ladder", 24, False, "beyond"))
    assert (e.seconds, e.basis) == (estimate.UNKNOWN_RUN_S, "no committed run of this model at T=1024: 120 s assumed")


def test_a_knob_of_flags_alone_is_estimated_from_its_own_record_and_failures_are_not_a_basis():
    """Flags are not part of a workload: the H200's coordinate-descent run (137 s of compile) was the basis of its
    baseline, the same workload, which then did not fit a call; and a run that failed in its compile (25 s) was the
    basis of the same rung's next try. Both seen in the dry run after 2026-11-27's H200 calls."""
    records = estimate.load_gpu_records([RESULTS / "gpu-h200-20261127-call1"])
    assert all(r.ok for r in records) and "compile-max-autotune-no-cudagraphs" not in {r.rung for r in records}
    est = estimate.Estimator(records, "NVIDIA H200")
    base = est.prior(Run("x", "beyond-ladder", "best-of-ladder", 64, True, "beyond", 50, 10))
    tuned = est.prior(Run("x", "beyond-ladder", "inductor-coordinate-descent", 64, False, "beyond", 50, 10))
    assert base.basis == "best-of-ladder B=64" and base.seconds < 70
    assert tuned.basis == "inductor-coordinate-descent B=64" and tuned.seconds > 150
    autotune = est.prior(Run("x", "beyond-ladder", "compile-max-autotune-no-cudagraphs", 64, False, "beyond", 50, 10))
    assert "+240 s assumed" in autotune.basis and autotune.seconds > 240


def test_another_gpu_falls_back_to_the_records_there_are_and_says_so():
    est = estimate.Estimator(h100_records(), "NVIDIA A100-SXM4-80GB")
    assert est.fallback
    assert "no committed record of NVIDIA A100-SXM4-80GB" in est.prior(plan.TIERS[0].runs[0]).basis


def test_launch_time_is_what_the_committed_logs_say():
    """LAUNCH_S against the H100 logs: each progress line's '(N s)' less its record's finished_at - started_at."""
    gaps = []
    for log, folder, batch in (("ladder-b16.log", "ladder", 16), ("ladder-b64.log", "ladder", 64),
                               ("batch64.log", "batch-search", None)):
        lines = re.findall(r"^\[\d+/\d+\] (\S+).*\((\d+) s\)$", (H100 / "logs" / log).read_text(), re.MULTILINE)
        timed = [RecordView(r) for _p, r in iter_records([H100 / folder], warn=lambda line: None)]  # oom runs too
        recs = sorted((r for r in timed if r.kind == "measured" and r.worker_seconds is not None
                       and (batch is None or r.workload.batch_size == batch)), key=lambda r: r.run_id)
        assert [rung for rung, _ in lines] == [r.rung for r in recs]
        gaps += [int(n) - r.worker_seconds for (_, n), r in zip(lines, recs)]
    assert len(gaps) == 17 and min(gaps) >= 5 and max(gaps) <= estimate.LAUNCH_S


# ---------------------------------------------------------------- the plan

def decided(run: Run) -> Run:
    """A run as a call decides it: the planned stack for the best one, B=128 for the largest (the baseline there in
    two micro-batches of 64)."""
    rung = run.rung.replace(plan.BEST_STACK, plan.PLANNED_STACK)
    if run.batch_size is not plan.LARGEST_B:
        return replace(run, rung=rung)
    return replace(run, rung=rung, batch_size=64, grad_accum=2) if rung == plan.BASELINE else \
        replace(run, rung=rung, batch_size=128)


def test_every_planned_run_is_a_valid_harness_run_command():
    from harness.run import parse_request

    keys = set()
    for t in plan.TIERS:
        for run in map(decided, t.runs):
            request = parse_request([*run.argv(), "--out", "/tmp/x"])
            _name, points = build_points(request)
            assert len(points) == 1 and points[0].workload["batch_size"] == run.batch_size
            w = points[0].workload
            assert (w["steps"], w["warmup_steps"]) == ((30, 5) if run.plan == "padding" else (50, 10))
            assert w["profile_steps"] == (3 if run.capture else 0)
            assert w["grad_accum"] == run.grad_accum
            assert t.repeats or (t.name, run.key) not in keys
            keys.add((t.name, run.key))
    assert len(keys) == 31 and ("largest-b", "beyond-ladder/best-of-ladder@B64x2") in keys
    with pytest.raises(ValueError, match="not decided yet"):
        plan.tier("spread").runs[1].argv()


def test_the_default_call_measures_what_is_unknown_and_answered_questions_only_when_asked():
    assert [t.name for t in plan.select()] == ["fastest", "stack", "largest-b", "spread", "batch-96", "spread-2",
                                               "autotune"]
    assert [(r.rung, r.batch_size, r.capture) for r in plan.tier("fastest").runs] == [
        ("best-of-ladder", 64, True), ("sdpa-cudnn", 64, True)]
    assert [r.rung for r in plan.tier("stack").runs] == ["sdpa-cudnn+lm-head-cce"]
    spread = [plan.tier("spread"), plan.tier("spread-2")]  # A B A B, a pair at a time
    assert all(t.repeats and t.atomic for t in spread) and spread[1].needs == ("spread",)
    assert [r.rung for t in spread for r in t.runs] == ["best-of-ladder", "best-stack"] * 2
    assert not any(r.capture for t in spread for r in t.runs)  # timed only
    asked = {t.name for t in plan.ASKED_TIERS}
    assert {"padding-tf32", "padding-vocab", "default-pair", "shape-pad"} <= asked
    assert not asked & {t.name for t in plan.select()}
    vocab = {r.rung for r in plan.tier("padding-vocab").runs}
    assert vocab == {"bf16-50257", "bf16-50304", "bf16-50257-no-pad", "bf16-50304-no-pad"}
    with pytest.raises(ValueError, match="unknown tier"):
        plan.select(["padding-tf32", "nope"])
    (fastest,) = plan.select(["fastest"], steps=(20, 4))
    assert {(r.steps, r.warmup_steps) for r in fastest.runs} == {(20, 4)}


def test_dry_run_for_an_h100_reads_at_120_columns(capsys):
    assert cli.main(["--dry-run", *SHIPPED_GPU]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 120
    assert out.startswith(f"gpu_check dry run for {H100_NAME}: budget 480 s")
    rows = [line for line in out.splitlines() if re.match(r"\d+ +\S+ +\S+ +\d+(x\d+)? ", line)]
    assert len(rows) == 12
    # by the committed H100 times: the baseline, cuDNN, the stack at B=64, the stack at the largest B it fits (192)
    # with the baseline on as many sequences in two micro-batches (its 0.71 GiB a sample does not fit 192), and the
    # first interleaved pair fit in 480 s
    for name, ran in (("fastest", 2), ("stack", 1), ("largest-b", 2), ("spread", 2)):
        assert f"{name} (plan beyond-ladder; {ran} of {ran} runs, complete)" in out
    assert re.search(r"^4 +largest-b +sdpa-cudnn\+lm-head-cce +192 ", out, re.MULTILINE)
    assert re.search(r"^5 +largest-b +best-of-ladder +96x2 ", out, re.MULTILINE)
    assert "- largest-b: B=192, the largest at which sdpa-cudnn+lm-head-cce fits: " in out
    assert re.search(r"batch-96 \(plan beyond-ladder; 0 of 2 runs, not started: needs ~\d+ s, \d+ s left\)", out)
    assert re.search(r"autotune \(plan beyond-ladder; 0 of 1 runs, not started: tier autotune needs ~\d+ s", out)
    assert "- largest-b, spread, spread-2, autotune: best stack = sdpa-cudnn+lm-head-cce" in out
    # a smaller budget does not reach the stack
    assert cli.main(["--dry-run", "--budget-s", "150", *SHIPPED_GPU]) == 0
    assert re.search(r"stack \(plan beyond-ladder; 0 of 1 runs, not started: tier stack needs ~\d+ s, \d+ s left\)",
                     capsys.readouterr().out)


def test_an_asked_tier_runs_in_the_order_given(capsys):
    assert cli.main(["--dry-run", "--tiers", "padding-tf32,fastest", *SHIPPED_GPU]) == 0
    out = capsys.readouterr().out
    rows = [line.split()[1:3] for line in out.splitlines() if re.match(r"\d+ +\S+ +\S+ +\d+ ", line)]
    assert rows == [["padding-tf32", "tf32-50257-no-pad"], ["padding-tf32", "fp32-50257-no-pad"],
                    ["fastest", "best-of-ladder"], ["fastest", "sdpa-cudnn"]]


@pytest.mark.parametrize("argv, message", [
    (["--dry-run", "--tiers", "fastest,bogus"], "unknown tier(s) bogus"),
    (["--dry-run", "--budget-s", "10", "--reserve-s", "20"], "--reserve-s from 0 to below it"),
    (["--dry-run", "--steps", "5", "--warmup-steps", "5"], "--warmup-steps from 0 to below it"),
    (["--dry-run", "--steps", "20"], "--steps and --warmup-steps go together"),
    (["--dry-run", "--records", "/no/such/folder"], "no such folder /no/such/folder"),
    (["--out", str(RESULTS / "gpu-h200")], "is not empty: a call's folder holds that call alone"),
    (["--out", "/tmp/gc-new", "--pack-to", "/tmp/gc-new/packed"], "--pack-to must be outside --out"),
])
def test_bad_options_are_one_line_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


# ---------------------------------------------------------------- packing and unpacking

def summary_for(outcomes=(), **more):
    s = {"tool": "python -m harness.gpu_check", "command": ["python", "-m", "harness.gpu_check"], "gpu": H100_NAME,
         "started_at": "2026-11-26T10:15:00+00:00", "finished_at": "2026-11-26T10:23:00+00:00", "budget_s": 480.0,
         "reserve_s": 20.0, "tiers": plan.tier_names(),
         "source": {"source_sha256": "ab" * 32, "commit": None},
         "sanity": {"gpu": H100_NAME, "torch": "2.11.0+cu130", "cuda": "13.0", "cudnn": 91900, "driver": "580.159.04",
                    "python": "3.12.3", "exit": 0, "seconds": 9.0},
         "runs": [o.to_dict() for o in outcomes], "scale": 0.97,
         "compare": {"exit": 0, "paths": ["/tmp/gpu-check", "/root/repo/results/gpu-h100-80gb-hbm3"]},
         "report": {"exit": 0}, "used_s": 470.0,
         "choices": ["largest-b: B=96, the largest at which sdpa-cudnn+lm-head-cce and best-of-ladder fit"]}
    s["archive_name"] = pack.archive_name(s)
    return {**s, **more}


def results_folder(tmp_path) -> Path:
    out = tmp_path / "call"
    write(out / "padding", [make_record(env="local", gpu="H100", rung="tf32", plan="padding")])
    (out / "logs").mkdir()
    (out / "logs" / "padding-tf32.log").write_text("=== padding/tf32-50257-no-pad@B16\n")
    (out / "compare.txt").write_text("tables\n")
    (out / ".harness-index").mkdir()  # compare's index, keyed to this machine: never packed
    (out / ".harness-index" / "records.idx").write_bytes(b"index")
    return out


def test_pack_writes_three_files_and_unpack_makes_the_results_folder(tmp_path):
    out = results_folder(tmp_path)
    run = plan.tier("padding-tf32").runs[0]
    outcomes = [budget.Outcome(run, 57.0, "tf32 B=16", status="ok", seconds=55.2, records=["id1"], tokens_s=148592.4,
                               memory="36,419"),
                budget.Outcome(plan.tier("fastest").runs[0], 51.0, "fused-adamw-clip B=64", note="needs ~51 s, 20 s left")]
    files = pack.pack(out, summary_for(outcomes), "the closing table\n", tmp_path / "OUT")
    assert [f.name for f in files] == ["gpu-check-h100-80gb-hbm3-20261126T101500Z.tar.gz", "summary.json", "summary.txt"]
    assert sorted(p.name for p in (tmp_path / "OUT").iterdir()) == sorted(f.name for f in files)  # <= 8 files back
    outer = json.loads((tmp_path / "OUT" / "summary.json").read_text())
    assert outer["archive"]["name"] == files[0].name and len(outer["archive"]["sha256"]) == 64

    target = pack.unpack(files[0], tmp_path / "results")
    assert target == tmp_path / "results" / "gpu-h100-80gb-hbm3-20261126"
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()) == sorted(
        ["README.md", "compare.txt", "gpu-check.json", "logs/padding-tf32.log",
         *(f"padding/{p.name}" for p in (out / "padding").iterdir())])
    readme = (target / "README.md").read_text()
    assert readme.startswith(f"# GPU records: {H100_NAME}, torch 2.11.0+cu130")
    assert "| 1 | padding-tf32 | padding/tf32-50257-no-pad@B16 | 5+25 | yes | ok | 57 | 55 | 148,592 | 36,419 |  |" in readme
    assert ("| 2 | fastest | beyond-ladder/best-of-ladder@B64 | 10+40 | yes | not started | 51 |  |  |  | needs ~51 s, 20 s "
            "left |") in readme
    assert "harness.compare and harness.report over this folder, `results/gpu-h100-80gb-hbm3` |" in readme
    assert readme.endswith("- not started, tier fastest: best-of-ladder (needs ~51 s, 20 s left).\n")
    assert ("(the best stack, the largest B that fits):\n\n- largest-b: B=96, the largest at which "
            "sdpa-cudnn+lm-head-cce and best-of-ladder fit\n") in readme
    with pytest.raises(pack.PackError, match="exists; records are never overwritten"):
        pack.unpack(files[0], tmp_path / "results")


def test_unpack_refuses_what_is_not_its_archive_and_keeps_members_inside(tmp_path):
    bogus = tmp_path / "x.tar.gz"
    bogus.write_bytes(b"not a tar")
    with pytest.raises(pack.PackError, match="not a gpu_check archive"):
        pack.unpack(bogus, tmp_path / "results")
    evil = tmp_path / "evil.tar.gz"
    payload = json.dumps(summary_for()).encode()
    with tarfile.open(evil, "w:gz") as tar:
        for name, data in ((f"{pack.TOP}/{pack.SUMMARY}", payload), (f"{pack.TOP}/../../escaped.txt", b"x"),
                           ("other/file.txt", b"y")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, __import__("io").BytesIO(data))
    with pytest.raises(pack.PackError, match="would land outside its folder"):
        pack.unpack(evil, tmp_path / "results")
    assert not (tmp_path / "escaped.txt").exists() and not list(tmp_path.rglob("other"))
    assert not (tmp_path / "results").exists() or list((tmp_path / "results").iterdir()) == []  # nothing left behind


def _archive(path: Path, summary, members=()) -> Path:
    """A gpu_check archive as someone else may have made it: this summary (any JSON) and these (name, bytes)."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in ((f"{pack.TOP}/{pack.SUMMARY}", json.dumps(summary).encode()), *members):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, __import__("io").BytesIO(data))
    return path


@pytest.mark.parametrize("summary, why", [
    (summary_for(started_at="../../../x"), "started_at: '../../../x' is no ISO time"),
    (summary_for(started_at="2026-11-26T10:15:00/../../x"), "is no ISO time"),
    ({k: v for k, v in summary_for().items() if k != "budget_s"}, "budget_s: 'None'"),
    (summary_for(budget_s="480"), "budget_s: '480'"),
    (summary_for(budget_s=float("nan")), "budget_s: 'nan'"),
    (summary_for(runs=[{"status": 1}]), "runs[0].status: '1'"),
    (summary_for(gpu=["H100"]), "gpu: \"['H100']\""),
    ([1, 2], "not an object"),
])
def test_unpack_checks_the_summary_before_it_names_anything(tmp_path, summary, why):
    archive = _archive(tmp_path / "a.tar.gz", summary, [(f"{pack.TOP}/compare.txt", b"t")])
    with pytest.raises(pack.PackError, match="is not a gpu_check summary") as exc:
        pack.unpack(archive, tmp_path / "results" / "inner")
    assert why in str(exc.value), str(exc.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz"]  # nothing written anywhere


def test_unpack_of_a_bad_archive_leaves_nothing_behind(tmp_path, monkeypatch):
    good = pack.pack(results_folder(tmp_path), summary_for(), "t\n", tmp_path / "OUT")[0]
    results = tmp_path / "results"
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])  # a truncated download
    with pytest.raises(pack.PackError, match="not unpacked|not a gpu_check archive"):
        pack.unpack(cut, results)
    big = _archive(tmp_path / "big.tar.gz", summary_for(), [(f"{pack.TOP}/logs/huge.log", b"\0" * 5000)])
    monkeypatch.setattr(pack, "MAX_UNPACKED_BYTES", 4096)  # (1 GiB: a 1 MB archive of zeros inflated to it)
    with pytest.raises(pack.PackError, match="unpacks to more than"):
        pack.unpack(big, results)
    monkeypatch.delattr(tarfile, "data_filter")  # Python 3.11.2, allowed by requires-python, has no filters
    with pytest.raises(pack.PackError, match="no extraction filters"):
        pack.unpack(good, results)
    assert not results.exists() or list(results.iterdir()) == []  # no half-unpacked folder blocks a retry
    monkeypatch.undo()
    assert pack.unpack(good, results).is_dir()  # the retry works


def test_the_readme_carries_the_summarys_text_as_text(tmp_path):
    hostile = summary_for(gpu='NVIDIA H100 <script>alert(1)</script> | x', command=["python", "[a](javascript:x)"])
    archive = _archive(tmp_path / "a.tar.gz", hostile)
    target = pack.unpack(archive, tmp_path / "results")
    readme = (target / "README.md").read_text()
    assert "<script>" not in readme and "](javascript" not in readme and "&lt;script>" in readme
    assert target.name == "gpu-h100-script-alert-1-script-x-20261126"


def test_every_committed_call_summary_is_one_unpack_reads():
    summaries = sorted(RESULTS.glob("gpu-*/gpu-check.json"))
    assert summaries
    for path in summaries:
        archive_summary.check_summary(json.loads(path.read_text()), path)


def test_unpack_command_line(tmp_path, capsys):
    files = pack.pack(results_folder(tmp_path), summary_for(), "t\n", tmp_path / "OUT")
    assert cli.main(["unpack", str(files[0]), "--into", str(tmp_path / "here")]) == 0
    assert (tmp_path / "here" / "README.md").is_file() and "unpacked into" in capsys.readouterr().out
    assert cli.main(["unpack", str(files[0]), "--into", str(tmp_path / "here")]) == 2  # one line, no usage
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "never overwritten" in err


# ---------------------------------------------------------------- the call, its GPU steps stood in

def stand_in_call(monkeypatch, run) -> list[str]:
    """main()'s GPU steps stood in: the sanity check finds an H100, each planned run is `run(out, run, n)` (its
    Result; n counts the runs), compare and report pass. Returns the keys of the runs, as they are made."""
    calls: list[str] = []

    class Workers:
        def __init__(self, python, out):
            self.out = out

        def __call__(self, planned, timeout_s):
            calls.append(planned.key)
            return run(self.out, planned, len(calls))

    monkeypatch.setattr(runner, "run_sanity", lambda python, logs: (0, {"gpu": H100_NAME, "torch": "2.11.0+cu130"}))
    monkeypatch.setattr(runner, "WorkerRunner", Workers)
    monkeypatch.setattr(runner, "closing", lambda python, out, paths, deadline: {
        "compare": {"exit": 0, "seconds": 1.0, "paths": [str(out), *map(str, paths)]}, "report": {"exit": 0, "seconds": 2.0}})
    return calls


def test_the_call_runs_the_budget_closes_and_packs(tmp_path, monkeypatch, capsys):
    """main() end to end with the sanity check, the workers and the closing stood in; the clock is real but the
    fake runs take no time, so every run fits."""
    def run(out, planned, n):
        write(out / planned.folder, [make_record(env="local", gpu="H100", rung="tf32", plan=planned.plan, run_id=f"r{n}")])
        if planned.rung == "lm-head-liger":
            return Result("unsupported", [f"r{n}"], note="lm_head_loss=liger needs liger-kernel, which is "
                          "not installed in this env (torch 2.11.0+cu130)")
        return Result("ok", [f"r{n}"], tokens_s=463975.4, memory="48,571")

    calls = stand_in_call(monkeypatch, run)
    code = cli.main(["--out", str(tmp_path / "call"), "--pack-to", str(tmp_path / "OUT"), "--tiers", "fastest,knobs,long-tail",
                     *SHIPPED_GPU])
    assert code == 0
    assert calls[:2] == ["beyond-ladder/best-of-ladder@B64", "beyond-ladder/sdpa-cudnn@B64"] and len(calls) == 9
    summary = json.loads((tmp_path / "OUT" / "summary.json").read_text())
    assert [r["status"] for r in summary["runs"]].count("ok") == 8 and summary["gpu"] == H100_NAME
    h100_folders = sorted(RESULTS.glob("gpu-h100-80gb-hbm3*/"))  # the 2026-11-23 records and the calls since
    assert H100 in h100_folders and len(h100_folders) > 1
    reference = str(cli.ROOT / "results" / "reference")  # the checkout's own: gpu_check always reads the user's log
    assert summary["compare"]["paths"][1:] == [*map(str, h100_folders), reference]  # same GPU only
    text = (tmp_path / "OUT" / "summary.txt").read_text()
    assert max(map(len, text.splitlines())) <= 120 and "9 of 9 runs started" in text
    assert re.search(r"^1 +fastest +best-of-ladder +64 +55 +0 +ok +463,975 +48,571", text, re.MULTILINE)
    assert "lm_head_loss=liger" in text and "liger-kernel," in text
    assert capsys.readouterr().out.endswith(text)


def test_the_default_call_decides_its_open_runs_as_it_goes_and_says_so(tmp_path, monkeypatch, capsys):
    """main() with the default tiers, workers stood in (no time, every run ok): each open run decided when its tier
    starts (the best stack: the planned one, as no stood-in run is equivalent to a baseline; the largest B from the
    committed H100 memory lines), run as decided, and listed in the summary, its text and the README."""
    calls = stand_in_call(monkeypatch, lambda out, planned, n: Result("ok", [f"r{n}"], tokens_s=463975.4, memory="48,571"))
    assert cli.main(["--out", str(tmp_path / "call"), "--pack-to", str(tmp_path / "OUT"), *SHIPPED_GPU]) == 0
    stack = "beyond-ladder/sdpa-cudnn+lm-head-cce"
    assert calls == ["beyond-ladder/best-of-ladder@B64", "beyond-ladder/sdpa-cudnn@B64", f"{stack}@B64",
                     f"{stack}@B192", "beyond-ladder/best-of-ladder@B96x2",  # largest-b: the baseline in 2 parts
                     "beyond-ladder/best-of-ladder@B64", f"{stack}@B64",  # spread
                     "beyond-ladder/sdpa-cudnn@B96", "beyond-ladder/best-of-ladder@B96",  # batch-96
                     "beyond-ladder/best-of-ladder@B64", f"{stack}@B64",  # spread-2
                     f"{stack}+compile-max-autotune-no-cudagraphs@B64"]
    summary = json.loads((tmp_path / "OUT" / "summary.json").read_text())
    assert summary["choices"][1].startswith("largest-b: B=192, the largest at which sdpa-cudnn+lm-head-cce fits: "
                                            "sdpa-cudnn+lm-head-cce ")
    assert summary["choices"][1].endswith("; best-of-ladder 70.1 GiB at B=96x2")
    assert [r["grad_accum"] for r in summary["runs"] if r["key"].endswith("@B96x2")] == [2]
    text = (tmp_path / "OUT" / "summary.txt").read_text()
    assert "decided from this call's runs:\n- largest-b, spread, spread-2, autotune: best stack = " in text
    assert max(map(len, text.splitlines())) <= 120


def test_no_cuda_device_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runner, "run_sanity", lambda python, logs: (3, None))
    assert cli.main(["--out", str(tmp_path / "call")]) == 2
    assert "found no CUDA device" in capsys.readouterr().err


def test_sanity_line_round_trip():
    found = {"gpu": H100_NAME, "torch": "2.11.0+cu130"}
    assert sanity.parse(f"python 3.12\n{sanity.PREFIX}{json.dumps(found)}\n") == found
    assert sanity.parse("gpu_check: no CUDA device\n") is None


# ---------------------------------------------------------------- scripts/gpu_check.sh's quick mode

def script(env: dict, *args) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), *args], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HARNESS_LOCAL_PYTHON": "echo", **env}, check=False)


def test_quick_mode_hands_the_call_to_harness_gpu_check(tmp_path):
    proc = script({"GPU_CHECK_STEPS": "quick", "GPU_CHECK_PACK_TO": str(tmp_path / "o"), "GPU_CHECK_TIERS": "fastest"},
                  str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["-m", "harness.gpu_check", "--budget-s", "480", "--out", str(tmp_path / "r"),
                                   "--pack-to", str(tmp_path / "o"), "--tiers", "fastest"]
    proc = script({"GPU_CHECK_STEPS": "quick", "GPU_CHECK_BUDGET_S": "8 min"})
    assert proc.returncode == 2 and "GPU_CHECK_BUDGET_S: '8 min' is not a positive whole number" in proc.stderr


def test_the_plain_command_is_the_budgeted_call_packed_into_a_lent_machines_out(tmp_path):
    """`bash scripts/gpu_check.sh` alone is the quick call (a lent machine gives one command of at most 10 minutes);
    where $OUT is set (the folder a lent machine sends back) it packs there; the long steps are asked for by name."""
    proc = script({"OUT": str(tmp_path / "sent-back")}, str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["-m", "harness.gpu_check", "--budget-s", "480", "--out", str(tmp_path / "r"),
                                   "--pack-to", str(tmp_path / "sent-back")]
    proc = script({"OUT": str(tmp_path / "sent-back"), "GPU_CHECK_PACK_TO": str(tmp_path / "mine")}, str(tmp_path / "r"))
    assert proc.stdout.split()[-2:] == ["--pack-to", str(tmp_path / "mine")]
    assert script({}, str(tmp_path / "r")).stdout.split() == ["-m", "harness.gpu_check", "--budget-s", "480", "--out",
                                                              str(tmp_path / "r")]
    # all: the long steps (the stand-in interpreter `echo` says each command they would run)
    proc = script({"GPU_CHECK_STEPS": "all"}, str(tmp_path / "r"))
    steps = re.findall(r"^=== gpu_check: ([^:(]+?) \(", proc.stdout, re.MULTILINE)
    assert steps == ["sanity", "explain", "ladder B=16", "ladder B=32", "ladder B=64", "padding", "batch", "overhead",
                     "compare", "report"]
    assert "--budget-s" not in proc.stdout
    proc = script({"GPU_CHECK_STEPS": "quick all"})
    assert proc.returncode == 2 and "unknown step 'quick'" in proc.stderr


def test_the_steps_evidence_from_the_committed_records(capsys):
    """scripts/gpu_steps_evidence.py, whose table docs/gpu-check.md quotes: the full runs agree with themselves, every
    A/A pair stays within noise, the H100's vocab step is beyond noise at 5+25, cuDNN's +3% on the H200 is undecided."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_steps_evidence", ROOT / "scripts" / "gpu_steps_evidence.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # the folders docs/gpu-check.md's table was made from (the calls since ran 5+25 steps, or 10+40 once per rung)
    assert module.main([str(H100), str(RESULTS / "gpu-h200")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("31 committed GPU runs of 50 steps (H100 80GB HBM3, H200)")
    assert re.search(r"^ 10\+40\s+0\.00%\s+0\.00%.*8 of 8\s+0\.0\s+0\.0$", out, re.MULTILINE)
    assert re.search(r"^  5\+25\s+.*8 of 8\s+0\.9\s+2\.8$", out, re.MULTILINE)
    # one run a side borrows the GPU's spread where 2+ configurations lend it: the H200 repeated one configuration
    # in these folders, so cuDNN's +3% is not decided even from full runs; the H100's vocab step is at any length
    assert "10+40  H200 B=64 fused-adamw-clip -> sdpa-cudnn: +3.05% one run a side: run-to-run noise unknown" in out
    assert "5+25  H100 80GB HBM3 B=16 sdpa-flash -> vocab-50304: +7.61% [+6.52%,+8.70%] beyond noise" in out


def test_a_step_past_its_time_is_killed_and_its_output_kept(tmp_path, capsys):
    import sys

    log = tmp_path / "logs" / "x.log"
    code, text = runner.tee([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"], log,
                            timeout_s=2, header="=== x")
    assert code == 124 and text == "started\n"
    assert log.read_text() == "=== x\nstarted\ngpu_check: killed after 2 s\n"
    assert capsys.readouterr().out == "started\n"


@pytest.mark.parametrize("batch", ["64", None, 0, True, -8])
def test_a_record_without_a_usable_batch_size_is_no_basis_and_the_dry_run_still_plans(tmp_path, capsys, batch):
    """One committed record of a GPU folder with a batch size that is not a positive whole number (hand-edited, or
    from another tool): left out of the estimates and the memory lines, never a crash of the dry run."""
    folder = tmp_path / "gpu-h100"
    shutil.copytree(H100, folder)
    victim = next(p for p in sorted(folder.rglob("*.json")) if '"status": "ok"' in p.read_text())
    record = json.loads(victim.read_text())
    record["workload"]["batch_size"] = batch
    victim.write_text(json.dumps(record))
    assert record["run_id"] not in {r.run_id for r in estimate.load_gpu_records([folder])}
    assert cli.main(["--dry-run", "--records", str(folder)]) == 0
    assert "runs start if every run takes its estimate" in capsys.readouterr().out
