"""harness.cluster: sbatch scripts, the manifest, job states from real squeue/sacct output, collect,
resubmit, Kubernetes Jobs against the real Job schema, bad input. No Slurm needed: sbatch, squeue and
sacct are small fakes on PATH that print Slurm's real output shapes (tests/data/slurm/, captured from
Slurm 22.05 started by scripts/slurm_local.sh). The last test runs a real local Slurm where one is up."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from module_cli import ROOT, assert_refused, run_module
from records_factory import make_record, write

from harness.cluster import k8s, slurm
from harness.cluster.__main__ import main
from harness.cluster.matrix import ClusterError, Matrix, expected_points, find_matrix, load_config, new_matrix
from harness.run import parse_request
from harness.runner.request import build_points

DATA = Path(__file__).parent / "data" / "slurm"
LOCAL_CONFIG = ROOT / "scripts" / "slurm_local.yaml"
RUN_ARGS = ["--plan", "seed-ladder", "--preset", "tiny", "--rungs", "fp32,tf32", "--steps", "8", "--device", "cpu"]
MATRIX_ARGS = ["--envs", "torch212,latest", "--gpus", "a100,h100", "--rungs", "fp32,tf32", "--steps", "8", "--device", "cpu"]

FAKE = r'''#!{python}
"""A stand-in for Slurm's {name}: logs its arguments, prints what the test put in $FAKE_SLURM."""
import json, os, pathlib, sys
d = pathlib.Path(os.environ["FAKE_SLURM"])
with open(d / "calls.jsonl", "a") as f:
    f.write(json.dumps(["{name}", *sys.argv[1:]]) + "\n")
name = "{name}"
if name == "sbatch":
    if "--test-only" in sys.argv:
        sys.stderr.write("sbatch: Job 1 to start at 2026-11-23T10:00:00 using 1 processors on nodes vm in partition debug\n")
        sys.exit(1 if (d / "sbatch.fail").exists() else 0)
    counter = d / "next_job"
    job = int(counter.read_text()) if counter.exists() else 100
    counter.write_text(str(job + 1))
    script = pathlib.Path(sys.argv[-1])
    (d / f"script-{{job}}.sh").write_text(script.read_text())
    print(job)
    sys.exit(0)
out = d / f"{name}.txt"
err = d / f"{name}.err"
if err.exists():
    sys.stderr.write(err.read_text())
    sys.exit(1)
sys.stdout.write(out.read_text() if out.exists() else "")
'''


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """sbatch/squeue/sacct fakes first on PATH; returns their folder (write squeue.txt, sacct.txt, *.err there)."""
    bin_dir, state = tmp_path / "bin", tmp_path / "slurm-state"
    bin_dir.mkdir()
    state.mkdir()
    for name in ("sbatch", "squeue", "sacct"):
        path = bin_dir / name
        path.write_text(FAKE.format(python=sys.executable, name=name))
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM", str(state))
    return state


def calls(state: Path) -> list[list[str]]:
    path = state / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def points_for(run_args: list[str]):
    return build_points(parse_request(run_args))[1]


def write_cell_records(results: Path, env: str, gpu: str, rungs=("fp32", "tf32"), status="ok", run_args=RUN_ARGS):
    """Records that match the matrix's expected points exactly (the workload and flags harness.run builds)."""
    records = [make_record(env=env, gpu=None, rung=p.rung, repeat=p.repeat, workload=p.workload, flags=p.flags,
                           status=status, reason=None if status == "ok" else "worker exited with code -9")
               for p in points_for(run_args) if p.rung in rungs]
    write(results / env / gpu, records)


def submit(results: Path, *extra) -> int:
    return main(["slurm", "submit", "--cluster-config", str(LOCAL_CONFIG), *MATRIX_ARGS, "--results", str(results), *extra])


# --------------------------------------------------------------------------- scripts and the manifest

def test_dry_run_prints_one_script_per_gpu_type_and_submits_nothing(tmp_path, fake_slurm, capsys):
    assert submit(tmp_path / "r", "--dry-run") == 0
    out = capsys.readouterr().out
    assert out.count("#!/bin/bash") == 2
    assert "#SBATCH --array=0,2\n#SBATCH --constraint=a100" in out and "#SBATCH --array=1,3\n#SBATCH --constraint=h100" in out
    assert "--gres" not in out
    assert calls(fake_slurm) == [] and not (tmp_path / "r").exists()


def test_script_runs_each_cell_with_its_envs_nox_session_and_is_valid_bash(tmp_path):
    config = load_config()  # the default: GPU types as gres
    matrix = new_matrix("torch212,latest", "a100,h100", config["slurm"]["gpu_types"], "default", RUN_ARGS, tmp_path, config)
    text = slurm.render_script(matrix, "h100", [(c, matrix.run_args) for c in matrix.cells if c.gpu == "h100"], 1, "gpu")
    assert "#SBATCH --gres=gpu:h100:1" in text and "#SBATCH --partition=gpu" in text and "--constraint" not in text
    assert "  1)  # torch212/h100\n" in text and "  3)  # latest/h100\n" in text and "  0)" not in text
    assert f"-R -s bench-latest -- {' '.join(RUN_ARGS)} --out {tmp_path}/latest/h100" in text
    nox = f"{sys.executable} -m nox"  # the default: the submitting interpreter's nox, kept in the manifest
    assert f"flock .nox/bench-torch212.lock {nox} -r -s bench-torch212 --install-only\n" in text
    assert f"exec {nox} -R -s bench-latest -- " in text and matrix.config["slurm"]["nox"] == nox
    assert subprocess.run(["bash", "-n"], input=text, text=True, check=False).returncode == 0


def test_container_runner_uses_the_envs_image_through_srun(tmp_path):
    config = load_config()
    config["slurm"].update(runner="container", container_image="registry.example/harness/{env}:v1")
    matrix = new_matrix("nightly", "h200", config["slurm"]["gpu_types"], "default", RUN_ARGS, tmp_path, config)
    text = slurm.render_script(matrix, "h200", [(matrix.cells[0], matrix.run_args)], 1)
    assert (f"exec srun --container-image=registry.example/harness/nightly:v1 --container-mounts={tmp_path}:/results "
            f"python -m harness.run {' '.join(RUN_ARGS)} --env nightly --out /results/nightly/h200") in text
    assert "nox" not in text.split("case")[1]


def test_submit_writes_the_manifest_mapping_each_array_index_to_its_cell(tmp_path, fake_slurm, capsys):
    results = tmp_path / "r"
    assert submit(results) == 0
    matrix = find_matrix(results)
    assert [(c.index, c.name) for c in matrix.cells] == [(0, "torch212/a100"), (1, "torch212/h100"), (2, "latest/a100"), (3, "latest/h100")]
    assert [(s["gpu"], s["job_id"], s["indices"]) for s in matrix.submissions] == [("a100", "100", [0, 2]), ("h100", "101", [1, 3])]
    assert [(p["rung"], p["repeat"]) for p in matrix.points] == [("fp32", 0), ("tf32", 0)]
    assert matrix.run_args == RUN_ARGS
    # what sbatch got is the script kept beside the manifest; every script was test-submitted first
    assert (fake_slurm / "script-100.sh").read_text() == (matrix.dir / "round1-a100.sbatch").read_text()
    assert [c[1] for c in calls(fake_slurm)] == ["--test-only", "--test-only", "--parsable", "--parsable"]
    assert "submitted job 101 (h100, array 1,3): 1=torch212/h100, 3=latest/h100" in capsys.readouterr().out
    # the manifest is YAML, never mistaken for a record by harness.compare
    assert not list((results / ".cluster").rglob("*.json"))
    # the same matrix again: refused, nothing submitted
    with pytest.raises(SystemExit) as exc:
        submit(results)
    assert exc.value.code == 2 and "was submitted before" in capsys.readouterr().err
    assert len([c for c in calls(fake_slurm) if c[1] == "--parsable"]) == 2


def test_submit_skips_cells_that_already_have_every_record_and_narrows_half_done_ones(tmp_path, fake_slurm, capsys):
    results = tmp_path / "r"
    write_cell_records(results, "torch212", "a100")
    write_cell_records(results, "latest", "h100", rungs=("fp32",))
    assert submit(results) == 0
    out = capsys.readouterr().out
    assert "torch212/a100: already has every record here; not submitted" in out
    matrix = find_matrix(results)
    assert [(s["gpu"], s["indices"]) for s in matrix.submissions] == [("h100", [1, 3]), ("a100", [2])]
    h100 = (matrix.dir / "round1-h100.sbatch").read_text()
    assert "--out " + str(results / "latest" / "h100") in h100
    case3 = h100.split("  3)  # latest/h100")[1]
    assert "--rungs tf32 --out" in case3 and "fp32,tf32" not in case3


def test_a_failed_sbatch_test_submits_nothing(tmp_path, fake_slurm, capsys):
    (fake_slurm / "sbatch.fail").write_text("")
    with pytest.raises(SystemExit) as exc:
        submit(tmp_path / "r")
    assert exc.value.code == 1 and "sbatch --test-only" in capsys.readouterr().err
    assert [c[1] for c in calls(fake_slurm)] == ["--test-only"] and not list((tmp_path / "r").rglob("manifest.yaml"))


# --------------------------------------------------------------------------- job states

def test_parses_captured_sacct_and_squeue_output():
    sacct = slurm.parse_task_lines((DATA / "sacct-22.05-mixed.txt").read_text(), "sacct")
    assert {k: (v.state, v.exit_code) for k, v in sacct.items()} == {
        ("8", 0): ("COMPLETED", "0:0"), ("8", 1): ("FAILED", "3:0"), ("8", 2): ("CANCELLED", "0:0"),
        ("8", 3): ("TIMEOUT", "0:0"), ("8", 4): ("FAILED", "0:9"),
        ("13", 0): ("PENDING", "0:0"), ("13", 1): ("PENDING", "0:0"), ("13", 2): ("PENDING", "0:0"), ("13", 3): ("PENDING", "0:0")}
    squeue = slurm.parse_task_lines((DATA / "squeue-22.05-mixed.txt").read_text(), "squeue")
    assert {k: v.exit_code for k, v in squeue.items() if k[0] == "8"} == {
        ("8", 0): "0:0", ("8", 1): "3:0", ("8", 2): "0:15", ("8", 3): "0:15", ("8", 4): "0:9"}
    requeued = slurm.parse_task_lines((DATA / "sacct-22.05-requeued.txt").read_text(), "sacct")
    assert requeued["13", 3].state == "REQUEUED" and "REQUEUED" in slurm.PENDING


def test_pending_array_ranges_with_a_throttle_expand_to_their_indices():
    states = slurm.parse_task_lines("6_0|RUNNING|0:0\n6_[2-5%1]|PENDING|0:0\n6_0.batch|RUNNING|0:0\n7|COMPLETED|0:0\n", "sacct")
    assert sorted(states) == [("6", 0), ("6", 2), ("6", 3), ("6", 4), ("6", 5)]


def _submitted(results: Path, fake_slurm: Path) -> Matrix:
    assert submit(results) == 0
    return find_matrix(results)


def test_status_per_cell_from_squeue_sacct_and_the_records(tmp_path, fake_slurm, capsys):
    results = tmp_path / "r"
    matrix = _submitted(results, fake_slurm)  # jobs 100 (a100: cells 0, 2) and 101 (h100: cells 1, 3)
    write_cell_records(results, "torch212", "a100")
    write_cell_records(results, "torch212", "h100", rungs=("fp32",))
    # sacct lags: it still says 100_2 runs, the controller (squeue) knows it failed; 101_3 is only in squeue
    (fake_slurm / "sacct.txt").write_text("100_0|COMPLETED|0:0\n100_2|RUNNING|0:0\n101_1|FAILED|1:0\n")
    (fake_slurm / "squeue.txt").write_text("100_2|FAILED|256|\n101_3|PENDING|0|\n")
    capsys.readouterr()
    assert main(["slurm", "status", "--results", str(results)]) == 3  # a cell is still pending
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("torch212/", "latest/"))}
    assert rows["torch212/a100"][1:6] == ["done", "100_0", "COMPLETED", "0:0", "2/2"]
    assert rows["torch212/h100"][1:6] == ["failed", "101_1", "FAILED", "1:0", "1/2"]
    assert rows["latest/a100"][1:6] == ["failed", "100_2", "FAILED", "1:0", "0/2"]
    assert rows["latest/h100"][1:6] == ["pending", "101_3", "PENDING", "0:0", "0/2"]
    assert out.strip().endswith("1 done, 2 failed, 0 running, 1 pending")
    sacct = [c for c in calls(fake_slurm) if c[0] == "sacct"][-1]
    assert sacct[:7] == ["sacct", "-X", "-P", "-n", "-j", "100,101", "--format=JobID,State,ExitCode"] and sacct[7] == "-S"
    assert matrix.progress(matrix.cells[0]).devices == ["cpu: Test CPU @ 2GHz"]


def test_status_without_accounting_reads_squeue_and_says_so(tmp_path, fake_slurm, capsys):
    results = tmp_path / "r"
    _submitted(results, fake_slurm)
    (fake_slurm / "sacct.err").write_text("Slurm accounting storage is disabled\n")
    (fake_slurm / "squeue.txt").write_text("100_0|COMPLETED|0|\n100_2|RUNNING|0|\n101_1|FAILED|768|\n101_3|RUNNING|0|\n")
    write_cell_records(results, "torch212", "a100")
    capsys.readouterr()
    assert main(["slurm", "status", "--results", str(results)]) == 3
    out = capsys.readouterr().out
    assert "note: sacct: Slurm accounting storage is disabled" in out
    assert "1 done, 1 failed, 2 running, 0 pending" in out


# --------------------------------------------------------------------------- collect and resubmit

def test_collect_names_the_missing_points_then_compares_what_is_there(tmp_path, fake_slurm, capsys):
    results = tmp_path / "r"
    _submitted(results, fake_slurm)
    write_cell_records(results, "torch212", "a100")
    write_cell_records(results, "torch212", "h100")
    write_cell_records(results, "latest", "a100")
    write_cell_records(results, "latest", "h100", rungs=("fp32",))
    write_cell_records(results, "latest", "h100", rungs=("tf32",), status="error")  # a worker that died
    capsys.readouterr()
    assert main(["slurm", "collect", "--results", str(results), "--", "--table", "ladder"]) == 1
    out = capsys.readouterr().out
    assert "3/4 cell(s) complete, 7 of 8 point(s) recorded" in out
    assert (f"missing: latest/h100: tf32 #0; 1 error record(s); slurm task 101_3, log "
            f"{results}/.cluster/{find_matrix(results).id}/logs/101_3.out") in out
    assert out.count("missing:") == 1
    assert "== Ladder: plan seed-ladder" in out  # harness.compare ran on the cells' folders


def test_collect_of_a_complete_matrix_exits_with_compares_status(tmp_path, fake_slurm, capsys):
    results = tmp_path / "r"
    _submitted(results, fake_slurm)
    for env in ("torch212", "latest"):
        for gpu in ("a100", "h100"):
            write_cell_records(results, env, gpu)
    assert main(["slurm", "collect", "--results", str(results)]) == 0
    assert "4/4 cell(s) complete, 8 of 8 point(s) recorded" in capsys.readouterr().out


def test_resubmit_reruns_only_the_failed_cells_and_only_their_missing_rungs(tmp_path, fake_slurm, capsys):
    results = tmp_path / "r"
    _submitted(results, fake_slurm)
    write_cell_records(results, "torch212", "a100")  # done
    write_cell_records(results, "torch212", "h100", rungs=("fp32",))  # preempted half-way
    (fake_slurm / "sacct.txt").write_text("100_0|COMPLETED|0:0\n101_1|PREEMPTED|0:0\n100_2|FAILED|1:0\n101_3|RUNNING|0:0\n")
    capsys.readouterr()
    assert main(["slurm", "resubmit", "--results", str(results)]) == 0
    out = capsys.readouterr().out
    matrix = find_matrix(results)
    assert [(s["round"], s["gpu"], s["indices"]) for s in matrix.submissions][2:] == [(2, "h100", [1]), (2, "a100", [2])]
    h100 = (matrix.dir / "round2-h100.sbatch").read_text()
    assert "#SBATCH --array=1\n" in h100 and "--rungs tf32 --out" in h100 and "  3)" not in h100
    a100 = (matrix.dir / "round2-a100.sbatch").read_text()
    assert "#SBATCH --array=2\n" in a100 and f"{' '.join(RUN_ARGS)} --out" in a100 and "  0)" not in a100
    assert "resubmit torch212/h100: 1/2 records, was 101_1 PREEMPTED; runs" in out
    # the status now follows the newest tasks (102_1, 103_2), not the failed ones
    (fake_slurm / "squeue.txt").write_text("102_1|PENDING|0|\n103_2|RUNNING|0|\n")
    rows, _ = slurm.cell_states(find_matrix(results))
    assert [(r.cell.name, r.state, r.task) for r in rows] == [
        ("torch212/a100", "done", "100_0"), ("torch212/h100", "pending", "102_1"),
        ("latest/a100", "running", "103_2"), ("latest/h100", "running", "101_3")]


def test_resubmit_refuses_a_done_or_queued_cell(tmp_path, fake_slurm, capsys):
    results = tmp_path / "r"
    _submitted(results, fake_slurm)
    write_cell_records(results, "torch212", "a100")
    (fake_slurm / "squeue.txt").write_text("101_3|RUNNING|0|\n")
    before = len(calls(fake_slurm))
    for cell, why in (("torch212/a100", "torch212/a100 is done (2/2 records"),
                      ("latest/h100", "latest/h100 is running (0/2 records, slurm task 101_3 RUNNING)"),
                      ("latest/v100", "no cell latest/v100 in matrix")):
        with pytest.raises(SystemExit) as exc:
            main(["slurm", "resubmit", "--results", str(results), "--cells", cell])
        assert exc.value.code == 2 and why in capsys.readouterr().err
    assert not [c for c in calls(fake_slurm)[before:] if c[0] == "sbatch"]


def test_resubmit_with_nothing_failed_submits_nothing(tmp_path, fake_slurm, capsys):
    results = tmp_path / "r"
    _submitted(results, fake_slurm)
    (fake_slurm / "squeue.txt").write_text("100_0|RUNNING|0|\n100_2|RUNNING|0|\n101_1|PENDING|0|\n101_3|PENDING|0|\n")
    assert main(["slurm", "resubmit", "--results", str(results)]) == 0
    assert "nothing to resubmit (0 done, 0 failed, 2 running, 2 pending)" in capsys.readouterr().out
    assert len(find_matrix(results).submissions) == 2


# --------------------------------------------------------------------------- Kubernetes

def test_k8s_jobs_one_per_cell_valid_against_the_kubernetes_job_schema(tmp_path, capsys):
    kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (the test extra) not installed")
    out = tmp_path / "k8s"
    assert main(["k8s", "render", *MATRIX_ARGS, "-o", str(out)]) == 0
    files = sorted(out.glob("*.yaml"))
    assert len(files) == 4
    products = {}
    for path in files:
        manifest = yaml.safe_load(path.read_text())
        kubernetes_validate.validate(manifest, kubernetes_validate.latest_version(), strict=True)
        spec = manifest["spec"]["template"]["spec"]
        env, gpu = manifest["metadata"]["labels"]["gpt-harness/env"], manifest["metadata"]["labels"]["gpt-harness/gpu"]
        products[env, gpu] = spec["nodeSelector"]["nvidia.com/gpu.product"]
        container = spec["containers"][0]
        assert container["image"] == f"envs/{env}:latest" and container["resources"]["limits"]["nvidia.com/gpu"] == 1
        assert container["args"][-4:] == ["--env", env, "--out", f"/results/{env}/{gpu}"]
        assert spec["volumes"][0]["persistentVolumeClaim"]["claimName"] == "harness-results"
        assert len(manifest["metadata"]["name"]) <= 63
    assert products["latest", "h100"] == "NVIDIA-H100-80GB-HBM3" and products["torch212", "a100"] == "NVIDIA-A100-SXM4-80GB"
    # the validator is not vacuous: a Job with a misspelt field or no containers fails it
    broken = yaml.safe_load(files[0].read_text())
    broken["spec"]["template"]["spec"]["nodeSelectr"] = broken["spec"]["template"]["spec"].pop("nodeSelector")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, kubernetes_validate.latest_version(), strict=True)
    del broken["spec"]["template"]["spec"]["containers"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, kubernetes_validate.latest_version(), strict=False)


def test_k8s_job_names_stay_valid_for_long_plan_names(tmp_path):
    config = load_config()
    matrix = new_matrix("torch212", "h100", config["k8s"]["gpu_products"], "default", RUN_ARGS, tmp_path, config)
    matrix.plan = "a-very-long-plan-name-that-goes-on-and-on-and-on-and-on-and-on"
    name = k8s.job_name(matrix, matrix.cells[0])
    assert len(name) <= 63 and name.endswith(f"{matrix.id.rsplit('-', 1)[-1]}-torch212-h100") and name[0].isalpha()


# --------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("args, message", [
    (["--envs", "torch212,nosuch", "--gpus", "a100"], "--envs: unknown env nosuch; envs/ knows"),
    (["--envs", "torch212", "--gpus", "a100,v100"], "--gpus: unknown GPU type v100;"),
    (["--envs", " , ", "--gpus", "a100"], "--envs: empty; name at least one of"),
    (["--envs", "torch212", "--gpus", ""], "--gpus: empty"),
    (["--envs", "torch212,torch212", "--gpus", "a100"], "--envs: torch212 given twice"),
    (["--envs", "torch212", "--gpus", "a100", "--rungs", "nope"], "no rung 'nope' in plan seed-ladder"),
    (["--envs", "torch212", "--gpus", "a100", "--", "--out", "x"], "--out and --env are set per cell"),
])
def test_bad_matrix_exits_2_with_one_line_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "r"
    out.mkdir()
    proc = run_module("harness.cluster", "slurm", "submit", *args, "--results", out, timeout=120)
    assert_refused(proc, out, message)


@pytest.mark.parametrize("run_args, message", [
    (["--warmup-steps", "x"], "harness.run options: argument --warmup-steps: 'x': expected a number of steps from 0"),
    (["--results", "r"], "harness.run options: unrecognized arguments: --results r"),
    (["--threads", "0"], "harness.run options: argument --threads: '0': expected a number of threads from 1"),
    (["--timeout", "0"], "harness.run options: argument --timeout: '0': expected a finite number of seconds above 0"),
    (["--sweep-name", "x"], "--sweep-name needs --sweep"),
    (["--rungs", "fp32,nope"], "no rung 'nope' in plan seed-ladder"),
])
def test_the_matrix_checks_harness_run_options_as_harness_run_does(run_args, message):
    """What harness.run would refuse before its first worker, the matrix refuses before anything is submitted."""
    with pytest.raises(ClusterError, match="^" + message.replace("(", r"\(")):
        expected_points(["--preset", "tiny", *run_args])


def test_bad_cluster_config_exits_2(tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    bad = tmp_path / "cluster.yaml"
    for text, message in (("slurm: {gpu_types: {v100: v100}, gres: 1}\n", "slurm: unknown key(s) gres"),
                          ("slurm: {gpu_select: magic}\n", "slurm.gpu_select: 'magic' is not one of gres, constraint"),
                          ("slurm: {gpu_types: [a100]}\n", "slurm.gpu_types: expected a dict")):
        bad.write_text(text)
        proc = run_module("harness.cluster", "slurm", "submit", "--envs", "latest", "--gpus", "a100", "--cluster-config", bad,
                          "--results", out, timeout=120)
        assert_refused(proc, out, message)
    bad.write_text("slurm: {gpu_types: {v100: volta}}\n")  # a cluster's own table replaces the default one
    proc = run_module("harness.cluster", "slurm", "submit", "--envs", "latest", "--gpus", "a100", "--cluster-config", bad,
                      "--results", out, timeout=120)
    assert_refused(proc, out, "--gpus: unknown GPU type a100; " + str(bad) + " knows v100")


def test_status_without_a_matrix_exits_2(tmp_path):
    proc = run_module("harness.cluster", "slurm", "status", "--results", tmp_path, timeout=60)
    assert_refused(proc, tmp_path, f"no matrix under {tmp_path}/.cluster/")


# --------------------------------------------------------------------------- a real Slurm, where one runs

def _local_slurm_up() -> str | None:
    if shutil.which("sinfo") is None:
        return "no Slurm client here (scripts/slurm_local.sh start installs and starts one)"
    if subprocess.run(["pgrep", "-x", "slurmctld"], capture_output=True, check=False).returncode != 0:
        return "no slurmctld on this machine (scripts/slurm_local.sh start)"  # asked first: sinfo waits ~10 s for a dead one
    proc = subprocess.run(["sinfo", "-h", "-o", "%T %f"], capture_output=True, text=True, check=False, timeout=30)
    if proc.returncode != 0 or not any(s in proc.stdout for s in ("idle", "mixed")):
        return f"slurmctld not running or no idle node ({(proc.stderr or proc.stdout).strip()[:100]})"
    if "a100" not in proc.stdout:
        return "the running Slurm has no node feature a100 (not scripts/slurm_local.sh's)"
    return None


@pytest.mark.slow
def test_real_slurm_runs_a_cell_and_collects_it(tmp_path, capsys, monkeypatch):
    """One cell (env `local`: this interpreter's torch, nothing installed) on the real local Slurm."""
    why_not = _local_slurm_up()
    if why_not:
        pytest.skip(f"real Slurm: {why_not}")
    monkeypatch.setenv("HARNESS_LOCAL_PYTHON", sys.executable)
    results = tmp_path / "r"
    assert main(["slurm", "submit", "--cluster-config", str(LOCAL_CONFIG), "--envs", "local", "--gpus", "a100",
                 "--rungs", "fp32", "--steps", "3", "--device", "cpu", "--results", str(results), "--", "--warmup-steps", "1"]) == 0
    assert main(["slurm", "status", "--results", str(results), "--wait", "--poll", "2", "--timeout", "900"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[1] for line in out.splitlines() if line.startswith("local/a100")] == ["done"]
    assert main(["slurm", "collect", "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert "1/1 cell(s) complete, 1 of 1 point(s) recorded" in out and "Ladder" in out
    matrix = find_matrix(results)
    log = (matrix.dir / "logs" / f"{matrix.submissions[0]['job_id']}_0.out").read_text()
    assert "harness.cluster: matrix" in log and "[1/1] fp32" in log


def test_a_point_is_done_by_the_one_measurement_rule_and_older_manifests_are_read_by_it(tmp_path, fake_slurm):
    """The manifest's points carry harness.record.model.measurement_key (the hashes every table compares by) and the
    run length; a manifest written with the old whole-workload hashes gets its points made again from its run_args."""
    from harness.record.model import measurement_key

    results = tmp_path / "r"
    assert submit(results) == 0
    matrix = find_matrix(results)
    expected = [measurement_key(p.workload, p.flags) for p in points_for(RUN_ARGS)]
    assert [(p["workload_hash"], p["flags_hash"]) for p in matrix.points] == expected
    assert all(set(p["run_length"]) == {"steps", "warmup_steps", "profile_steps"} for p in matrix.points)
    data = yaml.safe_load(matrix.path.read_text())
    for p in data["points"]:
        del p["run_length"]
        p["workload_hash"] = "whole-workload hash of the old rule"
    matrix.path.write_text(yaml.safe_dump(data))
    assert find_matrix(results).points == matrix.points


# Hostile input (issues 22 and 31), beside this module's other tests since issue 51: a docstring's leading number
# is an item of issue 22, its class one of issue 31.


def test_sbatch_values_cannot_add_a_line(tmp_path):
    """5. --partition $'p1\\ntouch /tmp/pwned' is refused (exit 2, one line, nothing written); a value with a space
    is one quoted word; a cluster config's setup line with a newline is refused too."""
    p = run_module("harness.cluster", "slurm", "submit", "--envs", "latest", "--gpus", "a100", "--dry-run",
                   "--results", tmp_path, "--partition", "p1\ntouch /tmp/pwned")
    assert p.returncode == 2 and "--partition" in p.stderr and "touch" not in p.stdout
    assert p.stderr.strip().count("\n") == 0 and not list(tmp_path.iterdir())
    p = run_module("harness.cluster", "slurm", "submit", "--envs", "latest", "--gpus", "a100", "--dry-run",
                   "--results", tmp_path, "--partition", "p 1")
    assert p.returncode == 0 and "#SBATCH '--partition=p 1'\n" in p.stdout
    config = tmp_path / "cluster.yaml"
    config.write_text('slurm:\n  setup: ["module load x\\ntouch /tmp/pwned"]\n')
    p = run_module("harness.cluster", "slurm", "submit", "--envs", "latest", "--gpus", "a100", "--dry-run",
                   "--results", tmp_path, "--cluster-config", config)
    assert p.returncode == 2 and "slurm.setup" in p.stderr


@pytest.mark.parametrize("payload", ["x; touch {mark}", "x$(touch {mark})", "x`touch {mark}`", "x && touch {mark}",
                                     "x\ntouch {mark}"])
@pytest.mark.parametrize("runner", ["nox", "container"])
def test_no_cluster_config_value_runs_as_a_command(tmp_path, capsys, payload, runner):
    """Class 10 of issue 31: every slurm value of a cluster config (but `setup`, which is shell by design) goes into
    the sbatch script as words that run nothing, or is refused (exit 2). Each script is run for real by bash, with
    every command it calls a stub and `touch` a stub that leaves the mark."""
    from harness.cluster import __main__ as cluster_main

    stubs = tmp_path / "bin"
    stubs.mkdir()
    mark = tmp_path / "PWNED"
    for name in ("mkdir", "flock", "hostname", "srun", "nox"):
        (stubs / name).write_text("#!/bin/sh\nexit 0\n")
    (stubs / "touch").write_text(f"#!/bin/sh\necho ran > {mark}\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    value = payload.format(mark=mark)
    slurm = {"runner": runner, "nox": "nox"}
    keys = ["partition", "time", "cpus_per_task", "mem", "nox", "container_image", "container_results", "gpu_types",
            "sbatch_options", "gpu_select"]
    for key in keys:
        config = {**slurm, key: {"a100": value} if key == "gpu_types" else [value] if key == "sbatch_options" else value}
        path = tmp_path / f"{key}.yaml"
        path.write_text(json.dumps({"slurm": config}))
        try:
            code = cluster_main.main(["slurm", "submit", "--envs", "latest", "--gpus", "a100", "--dry-run",
                                      "--results", str(tmp_path / "results"), "--cluster-config", str(path)])
        except SystemExit as exc:  # the parser's usage error
            code = exc.code
        out, err = capsys.readouterr()
        if code == 2:
            assert "Traceback" not in err and f"slurm.{key}" in err.strip().splitlines()[-1], (key, err)
            continue
        assert code == 0, (key, err[-300:])
        script = out[out.index("#!/bin/bash"):]
        subprocess.run([shutil.which("bash"), "-c", script], env={"PATH": str(stubs), "SLURM_ARRAY_TASK_ID": "0"}, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60, check=False)
        assert not mark.exists(), (key, script)

