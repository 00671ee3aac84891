"""Stacks of knobs as rungs: "a+b" names the changes rungs a and b of a non-cumulative plan make together
(harness.runner.plan.Plan.stack), in --rungs, the gpu_check tiers and the records."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.analysis.context import Compare
from harness.analysis.dataset import load
from harness.analysis.fastest import beyond_candidates
from harness.record.view import RecordView
from harness.runner.plan import PlanError, load_plan
from harness.runner.request import RunRequest, build_points, selection_line

ROOT = Path(__file__).resolve().parent.parent


def points(rungs: str, plan: str = "beyond-ladder"):
    return build_points(RunRequest(plan=plan, preset="tiny", rungs=rungs, device="cpu"))[1]


def test_a_stack_sets_what_each_of_its_rungs_changes_and_nothing_else():
    plan = load_plan("beyond-ladder")
    base = plan.defaults
    (stack,) = points("sdpa-cudnn+lm-head-cce+inductor-coordinate-descent")
    assert stack.rung == "sdpa-cudnn+lm-head-cce+inductor-coordinate-descent"
    assert (stack.workload["sdpa_backend"], stack.workload["lm_head_loss"]) == ("cudnn", "cce")
    assert stack.flags["inductor_coordinate_descent_tuning"] == "on"
    (alone,) = points("sdpa-cudnn")
    differ = {k for k in stack.workload if stack.workload[k] != alone.workload[k]}
    assert differ == {"lm_head_loss"}
    assert all(stack.workload[k] == v for k, v in base.items() if k not in ("sdpa_backend", "lm_head_loss"))


def test_one_stack_has_one_name_and_follows_the_single_rungs():
    a = points("lm-head-cce+sdpa-cudnn,sdpa-cudnn,sdpa-cudnn+lm-head-cce")
    assert [p.rung for p in a] == ["sdpa-cudnn", "sdpa-cudnn+lm-head-cce"]  # given twice in two orders: one stack
    (b,) = points("sdpa-cudnn+lm-head-cce")
    assert (a[1].workload, a[1].flags, a[1].rung_index) == (b.workload, b.flags, b.rung_index)
    assert a[1].rung_index >= len(load_plan("beyond-ladder").rungs) > a[0].rung_index
    request = RunRequest(plan="beyond-ladder", preset="tiny", rungs="sdpa-cudnn+lm-head-cce,sdpa-cudnn", device="cpu")
    assert selection_line(request, build_points(request)[1]).startswith("rungs: sdpa-cudnn, sdpa-cudnn+lm-head-cce (left out")


@pytest.mark.parametrize("rungs, message", [
    ("sdpa-cudnn+sdpa-auto", r"sdpa-auto and sdpa-cudnn both set sdpa_backend \(auto vs cudnn\): they do not stack"),
    ("best-of-ladder+sdpa-cudnn", "rung best-of-ladder changes nothing against plan beyond-ladder's defaults"),
    ("sdpa-cudnn+sdpa-cudnn", "a stack names two or more different rungs"),
    ("sdpa-cudnn+", "a stack names two or more different rungs"),
    ("sdpa-cudnn+warp", r"no rung 'warp' in plan beyond-ladder; it has best-of-ladder, "),
])
def test_a_stack_that_cannot_be_is_refused_with_why(rungs, message):
    with pytest.raises(PlanError, match=message):
        points(rungs)


def test_the_rungs_of_a_ladder_do_not_stack():
    with pytest.raises(PlanError, match="plan seed-ladder is a ladder .*do not stack"):
        points("tf32+bf16", plan="seed-ladder")


def test_two_flags_that_disagree_do_not_stack(tmp_path):
    plan = tmp_path / "p.yaml"
    plan.write_text("name: p\ndefaults: {compile: default}\nrungs:\n  - name: base\n"
                    "  - name: cd-on\n    flags: {inductor_coordinate_descent_tuning: 'on'}\n"
                    "  - name: cd-off\n    flags: {inductor_coordinate_descent_tuning: 'off'}\n"
                    "  - name: fusion\n    flags: {inductor_aggressive_fusion: 'on'}\n")
    with pytest.raises(PlanError, match=r"cd-on and cd-off both set flag inductor_coordinate_descent_tuning"):
        build_points(RunRequest(plan=str(plan), preset="tiny", rungs="cd-on+cd-off", device="cpu"))
    (p,) = build_points(RunRequest(plan=str(plan), preset="tiny", rungs="fusion+cd-on", device="cpu"))[1]
    assert p.rung == "cd-on+fusion"
    assert (p.flags["inductor_coordinate_descent_tuning"], p.flags["inductor_aggressive_fusion"]) == ("on", "on")


def test_stacks_run_on_cpu_and_a_knob_with_no_cpu_path_is_unsupported_never_faked(tmp_path):
    """Real workers: the cuDNN + CCE stack has no CPU path for either part (recorded unsupported, both reasons); a
    stack of two Inductor options runs, and compare sets it against the beyond-ladder base at the same B."""
    out = tmp_path / "r"
    proc = subprocess.run([sys.executable, "-m", "harness.run", "--env", "local", "--plan", "beyond-ladder",
                           "--preset", "tiny", "--set", "compile=off", "--rungs",
                           "best-of-ladder,lm-head-cce+sdpa-cudnn,inductor-aggressive-fusion+sdpa-auto",
                           "--steps", "4", "--warmup-steps", "1", "--device", "cpu", "--out", str(out)],
                          check=False, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = {r["rung"]: r for r in (json.loads(p.read_text()) for p in out.glob("*.json"))}
    assert set(records) == {"best-of-ladder", "sdpa-cudnn+lm-head-cce", "sdpa-auto+inductor-aggressive-fusion"}
    cudnn_cce = RecordView(records["sdpa-cudnn+lm-head-cce"])
    assert cudnn_cce.status == "unsupported"
    assert "SDPA backend 'cudnn' has no CPU kernel" in cudnn_cce.reason and "CCE" in cudnn_cce.reason
    assert "--rungs sdpa-cudnn+lm-head-cce " in records["sdpa-cudnn+lm-head-cce"]["rerun"]["command"]
    fused = RecordView(records["sdpa-auto+inductor-aggressive-fusion"])
    assert fused.ok and fused.workload.sdpa_backend == "auto"
    cmp = Compare(load([out], warn=lambda line: None, include_contended=True))  # the machine may be busy: no speed is judged
    (gpu,) = cmp.ds.gpus()
    (c,) = [c for c in beyond_candidates(cmp, gpu) if c.group.label.startswith("sdpa-auto+")]
    assert c.partner is not None and c.partner.label == "best-of-ladder"  # its base at the same B: the loss is checked
    assert c.parity is not None
