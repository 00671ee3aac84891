"""The runner CLI: one process per rung, one record each, clear errors, nothing lost."""

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
from hostile import disk_full
from module_cli import assert_refused, run_module
from records_factory import make_record
from shipped import RESULTS

from harness import run as runmod
from harness.record.device import device_label
from harness.record.io import iter_records, read_record
from harness.record.model import workload_hash
from harness.runner import launcher
from harness.runner.flags import flags_hash
from harness.runner.plan import PlanError, load_plan
from harness.runner.request import OptionError, build_points, rerun_command
from harness.runner.worker_spec import WorkerSpec


@pytest.mark.parametrize("args, message", [
    (["--plan", "no-such-plan"], "no plan 'no-such-plan'"),
    (["--set", "bogus=1"], "unknown workload field 'bogus'"),
    (["--set", "precision"], "expected FIELD=VALUE"),
    (["--set", "precision=fp8"], "precision='fp8'"),
    (["--rungs", "fp32,warp-drive"], "no rung 'warp-drive' in plan seed-ladder; it has fp32, tf32"),
    (["--repeats", "0"], "--repeats: '0': expected a number of runs, or 'auto', from 1 to 1,000"),
    (["--env", "a/b"], "--env 'a/b'"),
    (["--env", "Torch212"], "--env 'Torch212'"),
    (["--rungs", ""], "--rungs ''"),
    (["--rungs", "fp32,"], "--rungs 'fp32,'"),
    (["--timeout", "0"], "--timeout: '0': expected a finite number of seconds above 0"),
    (["--timeout=-5"], "--timeout: '-5': expected a finite number of seconds above 0"),
    (["--timeout", "nan"], "--timeout: 'nan': expected a finite number of seconds above 0"),
    (["--set", "batch_size=2.5"], "batch_size='2.5': expected an integer"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    proc = run_module("harness.run", "--out", str(tmp_path), "--set", "compile=off", "--steps", "3", "--warmup-steps", "1", *args)
    assert_refused(proc, tmp_path, message)


def unwritable_outs(tmp_path):
    (tmp_path / "a-file").write_text("")
    outs = [(tmp_path / "a-file", "--out"), (tmp_path / "a-file" / "sub", "--out"), (Path("/proc/x"), "--out /proc/x")]
    if os.geteuid() != 0:  # root writes into a read-only directory anyway
        (tmp_path / "ro").mkdir(mode=0o555)
        outs.append((tmp_path / "ro" / "results", "--out"))
    return outs


def test_an_out_that_cannot_take_records_is_refused_before_any_worker_runs(tmp_path):
    for out, message in unwritable_outs(tmp_path):
        proc = run_module("harness.run", "--out", out, "--set", "compile=off", "--steps", "3", "--warmup-steps", "1")
        assert proc.returncode == 2, (out, proc.stdout, proc.stderr)
        last = proc.stderr.strip().splitlines()[-1]
        assert message in last and "cannot write records there" in last and "run(s)" not in proc.stdout


@pytest.mark.parametrize("plan_text, message", [
    ("rungs:\n  - name: a\n    set: {n_layer: null}\n", "rung a: set: n_layer=None: expected an integer, got null"),
    ("rungs:\n  - name: a\n    set: {batch_size: [1, 2]}\n", "rung a: set: batch_size=[1, 2]: expected an integer, got a list"),
    ("rungs:\n  - name: a\n    set: {batch_size: 2.5}\n", "rung a: set: batch_size=2.5: expected an integer"),
    ("rungs:\n  - name: a\n    set: {precision: 16}\n", "rung a: set: precision=16: expected a string"),
    ("rungs:\n  - name: a\n    set: {grad_clip: true}\n", "rung a: set: grad_clip=True: expected a number"),
    ("defaults: {seq_len: 6.4}\nrungs:\n  - name: a\n", "defaults: seq_len=6.4: expected an integer"),
    ("rungs:\n  - name: [1, 2]\n", "rung 0: name: [1, 2]: expected a name"),
    ("rungs:\n  - name: a/b\n", "rung 0: name: 'a/b': expected a name"),
    ("name: [1, 2]\nrungs:\n  - name: a\n", "name: [1, 2]: expected a name"),
    ("cumulative: yes please\nrungs:\n  - name: a\n", "cumulative: expected true or false"),
    ("rungs:\n  - name: a\n    flags: [x]\n", "rung a: flags: expected a mapping"),
    ("rungs:\n  - name: a\n    sweep: {field: batch_size, values: [2, 2.5]}\n", "batch_size=2.5: expected an integer"),
    ("sweep: {field: batch_size, values: [2], name: [x]}\nrungs:\n  - name: a\n", "sweep: name: ['x']: expected a name"),
])
def test_plan_values_are_type_checked_when_the_plan_is_loaded(tmp_path, plan_text, message):
    plan = tmp_path / "plan.yaml"
    plan.write_text(plan_text)
    with pytest.raises(PlanError) as caught:
        load_plan(str(plan))
    assert str(caught.value).startswith(f"{plan}: ") and message in str(caught.value)


def test_a_wrongly_typed_plan_is_exit_2_naming_file_and_field(tmp_path):
    (tmp_path / "plan.yaml").write_text("name: p\nrungs:\n  - name: a\n    set: {batch_size: 2.5}\n")
    out = tmp_path / "out"
    out.mkdir()
    proc = run_module("harness.run", "--plan", tmp_path / "plan.yaml", "--out", out)
    assert_refused(proc, out, f"{tmp_path / 'plan.yaml'}: rung a: set: batch_size=2.5: expected an integer")


def test_run_ids_are_plain_file_names_and_not_taken(tmp_path):
    _, points = build_points(runmod.parse_request(["--out", str(tmp_path), "--rungs", "fp32", "--sweep", "data=text:/a/b.txt"]))
    run_id = launcher.new_run_id("local", "seed-ladder", points[0], tmp_path)
    assert "/" not in run_id and re.fullmatch(r"[A-Za-z0-9._-]+", run_id)


@pytest.mark.slow
def test_a_taken_run_id_keeps_the_new_measurement_under_a_fresh_id(tmp_path):
    """The worker finds its run_id taken: the old record stays, the new measurement gets a fresh id, and the
    runner returns the new one (it returned the old record as the result, and lost the measurement, before)."""
    _, points = build_points(runmod.parse_request(["--out", str(tmp_path), "--rungs", "fp32", "--set", "compile=off",
                                                   "--steps", "3", "--warmup-steps", "1"]))
    old = make_record(run_id="taken", env="local", gpu=None, rung="fp32")
    (tmp_path / "taken.json").write_text(json.dumps(old))
    spec = WorkerSpec(run_id="taken", env="local", plan="seed-ladder", rung="fp32", rung_index=0, repeat=0,
                      workload=points[0].workload, flags=points[0].flags, out=str(tmp_path), rerun="x")
    record = launcher.run_point(spec, timeout_s=600)
    assert record["status"] == "ok" and record["run_id"].startswith("taken-") and record["started_at"] is not None
    assert json.loads((tmp_path / "taken.json").read_text()) == old
    assert read_record(tmp_path / f"{record['run_id']}.json") == record


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


def test_a_rung_the_plan_lacks_is_one_message_everywhere():
    """harness.run's --rungs, batch_search's --rung, tune's --start-rung and the cluster's matrix all ask the plan."""
    plan = load_plan("seed-ladder")
    with pytest.raises(PlanError, match=r"^no rungs 'warp', 'x' in plan seed-ladder; it has fp32, tf32, bf16, "):
        plan.check_rungs(["fp32", "warp", "x", "warp"])
    plan.check_rungs(["bf16", "fp32"])
    assert plan.rung("bf16") is plan.rungs[2]
    with pytest.raises(PlanError, match=r"^no rung 'warp' in plan seed-ladder; it has "):
        plan.rung("warp")


def test_seed_ladder_is_the_users_ladder():
    rungs = load_plan("seed-ladder").rungs
    assert [r.name for r in rungs] == ["fp32", "tf32", "bf16", "sdpa-flash", "vocab-50304", "fused-adamw-clip"]
    assert all(r.settings["compile"] == "default" for r in rungs)
    last = rungs[-1].settings
    assert (last["precision"], last["attention"], last["sdpa_backend"], last["vocab_size"], last["optimizer"], last["grad_clip"]) == ("bf16", "sdpa", "flash", 50304, "fused", 1.0)


def test_a_worker_that_dies_still_leaves_an_error_record(tmp_path):
    _, points = build_points(runmod.parse_request(["--out", str(tmp_path), "--rungs", "fp32", "--set", "compile=off"]))
    spec = WorkerSpec(run_id="dies", env="local", plan="seed-ladder", rung="fp32", rung_index=0, repeat=0,
                      workload=points[0].workload, flags=points[0].flags, out=str(tmp_path), rerun="x")
    record = launcher.run_point(spec, timeout_s=0.5)  # far too short: the worker is killed
    assert record["status"] == "error" and "timed out" in record["reason"]
    assert json.loads((tmp_path / "dies.json").read_text())["status"] == "error"
    # the runner records where the worker was meant to run: not an "unknown device" (the H100/H200 records' defect)
    env = record["environment"]
    assert env["device"] == "cpu" and env["cpu"]["model"] and "runner" in env["captured_by"]
    assert device_label(env).startswith("cpu: ") and env["harness"]["source_sha256"]
    assert record["workload_hash"] == workload_hash(points[0].workload) and record["flags"]["hash"] == flags_hash(points[0].flags)


def test_rerun_command_names_env_and_rung():
    request = runmod.parse_request(["--env", "torch212", "--preset", "tiny", "--set", "batch_size=2"])
    _, points = build_points(request)
    assert rerun_command(request, points[2]) == "nox -s bench-torch212 -- --plan seed-ladder --preset tiny --rungs bf16 --repeats 1 --out results/runs --set batch_size=2"
    request = runmod.parse_request(["--env", "local", "--preset", "tiny", "--set", "batch_size=2"])
    assert rerun_command(request, points[2]).startswith("python -m harness.run --env local --plan seed-ladder")


def test_parse_request_is_the_command_line_as_data():
    """harness.run's arguments held as data (harness.cluster's) make the same RunRequest the command line makes;
    an option the parser refuses is one OptionError line, never argparse's usage text and exit."""
    argv = ["--rungs", "fp32", "--set", "compile=off", "--flag", "cudnn_benchmark=true", "--steps", "3", "--timeout", "60"]
    request = runmod.parse_request(argv)
    assert request == runmod.RunRequest.from_args(runmod.make_parser().parse_args(argv))
    assert (request.rungs, request.sets, request.flags, request.steps, request.timeout) == (
        "fp32", ("compile=off",), ("cudnn_benchmark=true",), 3, 60.0)
    for bad, message in ((["--steps", "three"], "argument --steps: 'three': expected a number of steps from 1"),
                         (["--warp"], "unrecognized arguments: --warp"),
                         (["--preset", "huge"], "argument --preset: invalid choice: 'huge'")):
        with pytest.raises(OptionError, match=re.escape(message)):
            runmod.parse_request(bad)


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


# ---------------------------------------------------------------- the one stop handler


def test_report_stops_says_what_finished_and_why_and_restores_the_handlers(capsys):
    records = [make_record(run_id="a", rung="fp32", gpu=None)]
    before = {sig: signal.getsignal(sig) for sig in launcher.STOP_SIGNALS}
    with launcher.report_stops("python -m harness.x", records, "out/", note="plan file p.yaml") as stop:
        stop.total = 3
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises Interrupted at the next bytecode, long before this ends
        pytest.fail("the stop signal did not end the work")
    assert stop.exit_code == 143
    out, err = capsys.readouterr()
    assert out.splitlines() == ["finished before the stop: 1 of 3 run(s)", "  fp32 #0: ok -> out/a.json"]
    assert err == ("python -m harness.x: interrupted by SIGTERM: the running worker and its subprocesses were stopped; "
                   "1 run(s) finished, their records are in out/ (plan file p.yaml)\n")
    assert {sig: signal.getsignal(sig) for sig in launcher.STOP_SIGNALS} == before
    with launcher.report_stops("python -m harness.x", records, "out") as stop:
        pass  # no signal: nothing said, no exit code
    assert stop.exit_code is None and capsys.readouterr() == ("", "")


def test_report_stops_ends_a_run_that_cannot_keep_its_records_with_one_line(capsys):
    """A full --out (launcher.RecordsUnwritable): the same finished list, one stderr line saying why, exit 1, for
    every command that runs workers (issue 22: disk full mid-run)."""
    records = [make_record(run_id="a", rung="fp32", gpu=None)]
    with launcher.report_stops("python -m harness.x", records, "out") as stop:
        stop.total = 2
        raise launcher.RecordsUnwritable("cannot write records to out/ any more (No space left on device); the run "
                                         "stops here")
    assert stop.exit_code == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == ["finished before the stop: 1 of 2 run(s)", "  fp32 #0: ok -> out/a.json"]
    assert err == ("python -m harness.x: cannot write records to out/ any more (No space left on device); the run "
                   "stops here; 1 run(s) finished, their records are in out/\n")


@pytest.mark.parametrize("module, argv", [
    ("run", ["--rungs", "fp32,tf32", "--set", "compile=off"]),
    ("batch_search", ["--rung", "fp32", "--set", "compile=off", "--start", "2", "--max", "8"]),
    ("tune", ["--set", "compile=off", "--knobs", "sdpa-auto", "--no-batch-search"]),
])
def test_every_command_that_runs_workers_stops_through_report_stops(tmp_path, monkeypatch, capsys, module, argv):
    """harness.run, batch_search and tune: a stop signal during a run (a worker finished before it) is the same
    exit code, the same finished list and the same last stderr line, from the one handler."""
    import importlib

    def one_then_stopped(request, plan_name, points, records=None):
        records.append(make_record(run_id="first", rung=points[0].rung, gpu=None, workload=points[0].workload))
        raise launcher.Interrupted(signal.SIGINT)

    monkeypatch.setattr(launcher, "run_points", one_then_stopped)
    monkeypatch.setattr(runmod, "run_points", one_then_stopped)
    code = importlib.import_module(f"harness.{module}").main([*argv, "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 130
    assert "finished before the stop: 1 of " in out and f"#0: ok -> {tmp_path / 'first.json'}" in out
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"python -m harness.{module}: interrupted by SIGINT: the running worker and its subprocesses "
                           f"were stopped; 1 run(s) finished, their records are in {tmp_path}/")
    assert ("(plan file " in last) == (module == "tune")


# Hostile input (issues 22 and 31), beside this module's other tests since issue 51: a docstring's leading number
# is an item of issue 22, its class one of issue 31.


@pytest.mark.parametrize("args, message", [
    (["--steps", "1000000000"], "--steps: '1000000000': expected a number of steps from 1 to 100,000"),
    (["--seq-len", "100000"], "--seq-len: '100000': expected a sequence length from 1 to 65,536"),
    (["--batch-size", "1000000"], "--batch-size: '1000000': expected a batch size from 1 to 65,536"),
    (["--set", "steps=1000000000"], "steps=1000000000: must be at most 100,000"),  # --set: the workload's own bounds
    (["--set", "vocab_size=1"], "vocab_size=1: must be at least 2"),
    (["--batch-size", "8192", "--seq-len", "8192"], "batch_size x seq_len = 67,108,864: must be at most 16,777,216 tokens per micro-step"),
    (["--repeats", "1000000"], "--repeats: '1000000': expected a number of runs, or 'auto', from 1 to 1,000"),
])
def test_sizes_are_bounded_before_any_worker(tmp_path, args, message):
    """7. Every size a user sets has a bound, checked before a worker starts: one line naming field and bound."""
    out = tmp_path / "out"
    p = run_module("harness.run", "--out", out, *args, timeout=60)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].endswith(message) and not out.exists()


def test_plan_steps_are_bounded(tmp_path):
    plan = tmp_path / "big.yaml"
    plan.write_text("name: big\nrungs:\n  - name: a\n    set: {steps: 1000000000}\n")
    p = run_module("harness.run", "--plan", plan, "--out", tmp_path / "out", timeout=60)
    assert p.returncode == 2 and "steps=1000000000: must be at most 100,000" in p.stderr


def test_disk_full_mid_run_stops_with_one_line_and_keeps_what_finished(tmp_path, monkeypatch, capsys):
    """6. The worker could not write its record and not even the failure record fits: the run stops with one line
    (exit 1), lists the runs that finished with their records, and leaves no partial file."""
    from harness import run
    from harness.record import io as record_io
    from harness.runner import launcher

    finished = record_io.read_record(min((RESULTS / "cpu-amd-epyc-2core").glob("*.json")))
    out = tmp_path / "out"

    def run_point(spec, timeout_s, progress=None, python=None):
        if not run_point.calls:
            run_point.calls = 1
            return {**finished, "run_id": spec.run_id}
        disk_full(monkeypatch, record_io)
        return launcher._record_or_failure(spec, "", "worker exited with code 1: harness.worker: cannot write its "
                                           "record: No space left on device")
    run_point.calls = 0
    monkeypatch.setattr(launcher, "run_point", run_point)
    code = run.main(["--rungs", "fp32,tf32,bf16", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.err.strip().count("\n") == 0 and "No space left on device" in captured.err
    assert "the run stops here; 1 run(s) finished" in captured.err and "Traceback" not in captured.err
    assert "finished before the stop: 1 of 3 run(s)" in captured.out and "fp32 #0: ok" in captured.out
    assert not [p for p in out.iterdir()]  # the stub kept its record in memory; nothing half-written on disk


def test_a_killed_workers_reason_names_the_signal():
    """Also seen: a SIGKILLed worker that printed nothing got the reason "worker exited with code -9: "."""
    from harness.runner.launcher import exit_reason

    assert exit_reason(-9, "") == ("worker killed by SIGKILL (exit code -9), from outside: the kernel's OOM killer does "
                                   "this (dmesg says); it printed nothing")
    assert exit_reason(-15, "step 3") == "worker killed by SIGTERM (exit code -15): step 3"
    assert exit_reason(1, "") == "worker exited with code 1; it printed nothing"


def test_an_env_that_does_not_exist_is_refused(tmp_path):
    """Also seen: --env nosuchenv ran and tagged its records with that name."""
    out = tmp_path / "out"
    p = run_module("harness.run", "--env", "nosuchenv", "--out", out, timeout=60)
    assert p.returncode == 2 and "--env nosuchenv: no such env" in p.stderr.strip().splitlines()[-1]
    assert not out.exists()


def test_threads_are_bounded_by_the_cpus_this_process_may_use(tmp_path):
    """Class 14 of issue 31: --threads above the usable CPUs (10,000 on 2 cores ran at 9,674 ms/step) is refused
    before any worker starts, saying the bound and why."""
    from harness.provenance.envinfo import usable_cpus

    out = tmp_path / "out"
    p = run_module("harness.run", "--threads", usable_cpus() + 1, "--out", out, timeout=60)
    assert p.returncode == 2 and not out.exists()
    assert f"--threads {usable_cpus() + 1}: at most the {usable_cpus()} CPU(s) this process may use" in p.stderr

