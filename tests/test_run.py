"""The runner CLI: one process per rung, one record each, clear errors, nothing lost."""

import json

import pytest
from module_cli import assert_refused, run_module

from harness import run as runmod
from harness.flags import flags_hash
from harness.plan import PlanError, load_plan
from harness.record import device_label, iter_records, workload_hash


@pytest.mark.parametrize("args, message", [
    (["--plan", "no-such-plan"], "no plan 'no-such-plan'"),
    (["--set", "bogus=1"], "unknown workload field 'bogus'"),
    (["--set", "precision"], "expected FIELD=VALUE"),
    (["--set", "precision=fp8"], "precision='fp8'"),
    (["--rungs", "fp32,warp-drive"], "no rung(s) warp-drive"),
    (["--repeats", "0"], "--repeats must be at least 1"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    proc = run_module("harness.run", "--out", str(tmp_path), *args)
    assert_refused(proc, tmp_path, message)


def test_plans_are_data(tmp_path):
    plan = tmp_path / "mine.yaml"
    plan.write_text("name: mine\ncumulative: true\nrungs:\n  - name: a\n    set: {precision: bf16}\n  - name: b\n    set: {batch_size: 2}\n    flags: {cudnn_benchmark: true}\n")
    loaded = load_plan(str(plan))
    assert [r.name for r in loaded.rungs] == ["a", "b"]
    assert loaded.rungs[1].settings == {"precision": "bf16", "batch_size": 2} and loaded.rungs[1].flags == {"cudnn_benchmark": True}
    plan.write_text("name: bad\nrungs:\n  - name: a\n    flags: {turbo: true}\n")
    with pytest.raises(PlanError, match="unknown flag"):
        load_plan(str(plan))
    plan.write_text("rungs: [{name: a}, {name: a}]\n")
    with pytest.raises(PlanError, match="appears twice"):
        load_plan(str(plan))


def test_seed_ladder_is_the_users_ladder():
    rungs = load_plan("seed-ladder").rungs
    assert [r.name for r in rungs] == ["fp32", "tf32", "bf16", "sdpa-flash", "vocab-50304", "fused-adamw-clip"]
    assert all(r.settings["compile"] == "default" for r in rungs)
    last = rungs[-1].settings
    assert (last["precision"], last["attention"], last["sdpa_backend"], last["vocab_size"], last["optimizer"], last["grad_clip"]) == ("bf16", "sdpa", "flash", 50304, "fused", 1.0)


def test_a_worker_that_dies_still_leaves_an_error_record(tmp_path):
    args = runmod.make_parser().parse_args(["--out", str(tmp_path), "--rungs", "fp32", "--set", "compile=off"])
    _, points = runmod.build_points(args)
    spec = {"run_id": "dies", "env": "local", "plan": "seed-ladder", "rung": "fp32", "rung_index": 0, "repeat": 0, "sweep": None,
            "workload": points[0].workload, "flags": points[0].flags, "out": str(tmp_path), "rerun": "x"}
    record = runmod.run_point(spec, timeout_s=0.5)  # far too short: the worker is killed
    assert record["status"] == "error" and "timed out" in record["reason"]
    assert json.loads((tmp_path / "dies.json").read_text())["status"] == "error"
    # the runner records where the worker was meant to run: not an "unknown device" (the H100/H200 records' defect)
    env = record["environment"]
    assert env["device"] == "cpu" and env["cpu"]["model"] and "runner" in env["captured_by"]
    assert device_label(env).startswith("cpu: ") and env["harness"]["source_sha256"]
    assert record["workload_hash"] == workload_hash(points[0].workload) and record["flags"]["hash"] == flags_hash(points[0].flags)


def test_rerun_command_names_env_and_rung():
    args = runmod.make_parser().parse_args(["--env", "torch212", "--preset", "tiny", "--set", "batch_size=2"])
    _, points = runmod.build_points(args)
    assert runmod.rerun_command(args, points[2]) == "nox -s bench-torch212 -- --plan seed-ladder --preset tiny --rungs bf16 --repeats 1 --out results --set batch_size=2"
    args.env = "local"
    assert runmod.rerun_command(args, points[2]).startswith("python -m harness.run --env local --plan seed-ladder")


@pytest.mark.slow
def test_tiny_ladder_compiled_on_cpu_gives_one_valid_record_per_rung(tmp_path):
    proc = run_module("harness.run", "--preset", "tiny", "--out", str(tmp_path), "--steps", "4", "--warmup-steps", "1", "--repeats", "1", "--env", "local", timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = {r["rung"]: r for _, r in iter_records([tmp_path])}
    assert sorted(records) == sorted(["fp32", "tf32", "bf16", "sdpa-flash", "vocab-50304", "fused-adamw-clip"])
    from gpt import torch_compat

    for rung, r in records.items():
        expected = "unsupported" if rung == "fused-adamw-clip" and torch_compat.TORCH_VERSION < (2, 4) else "ok"
        assert r["status"] == expected, (rung, r["reason"])
        assert r["workload"]["compile"] == "default" and r["env"] == "local"
    # fp32 -> tf32 changes matmul precision, sdpa-flash pins the SDPA backend; later rungs keep those flags
    assert len({records[r]["flags"]["hash"] for r in ("fp32", "tf32", "sdpa-flash")}) == 3
    assert records["vocab-50304"]["flags"]["hash"] == records["sdpa-flash"]["flags"]["hash"]
    assert len({r["workload_hash"] for r in records.values()}) == 6  # ...but every rung's workload differs
    assert "[6/6] fused-adamw-clip" in proc.stdout and "ms/step (median)" in proc.stdout
