"""The worker's contract (harness.runner.worker_spec.WorkerSpec): what the launcher writes is what the worker reads, the
worker's record and the launcher's failure record start from it alike, and a file that is not a spec is one line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from harness.record.validator import validate
from harness.runner import launcher
from harness.runner.flags import flags_hash
from harness.runner.request import RunRequest, build_points, rerun_command
from harness.runner.worker_spec import WorkerSpec, WorkerSpecError

ROOT = Path(__file__).resolve().parent.parent


def a_spec(tmp_path) -> WorkerSpec:
    """The spec run_points makes for the first point of harness.run --rungs bf16 --sweep batch_size=2,4 --threads 2."""
    request = RunRequest(rungs="bf16", sweep="batch_size=2,4", out=str(tmp_path), threads=2, device="cpu")
    plan, points = build_points(request)
    p = points[0]
    return WorkerSpec(run_id="r1", env=request.env, plan=plan, rung=p.rung, rung_index=p.rung_index, repeat=p.repeat,
                      sweep=p.sweep, workload=p.workload, flags=p.flags, out=request.out, rerun=rerun_command(request, p),
                      threads=request.threads)


def test_a_spec_round_trips_through_its_json(tmp_path):
    spec = a_spec(tmp_path)
    text = spec.to_json()
    assert WorkerSpec.from_json(text) == spec
    assert json.loads(text)["sweep"] == {"name": "batch_size", "field": "batch_size", "value": 2}
    minimal = WorkerSpec(run_id="m", env="local", plan="p", rung="r", workload={"device": "cpu"}, flags={})
    assert WorkerSpec.from_json(minimal.to_json()) == minimal
    assert WorkerSpec.from_json(replace(spec, threads=None).to_json()).threads is None


@pytest.mark.parametrize("text, message", [
    ("[1, 2]", "expected an object, got list"),
    ("{not json", "not JSON"),
    ('{"run_id": "r", "env": "local", "plan": "p", "rung": "r", "workload": {}, "flags": {}, "spec_version": 2}',
     "unknown field(s) spec_version"),
    ('{"run_id": "r", "env": "local", "plan": "p", "rung": "r", "workload": {}}', "missing field(s) flags"),
    ('{"run_id": "r", "rung": "r", "workload": {}, "flags": {}, "out": "o", "threads": 1, "gpu": 0}',
     "unknown field(s) gpu; missing field(s) env, plan"),
])
def test_what_is_not_a_spec_is_refused_in_one_line(text, message):
    with pytest.raises(WorkerSpecError, match=re.escape(message)):
        WorkerSpec.from_json(text)


def test_the_worker_and_the_failure_record_start_from_the_same_record(tmp_path):
    """Both sides of the boundary build their record from the spec: the same identity, workload, flags and hashes,
    and the rerun command; they differ only where the worker measures and the launcher says why there is nothing."""
    spec = a_spec(tmp_path)
    started = spec.new_record(started_at="2026-01-01T00:00:00+00:00")
    failed = validate(launcher.failure_record(spec, "worker exited with code -9"))
    same = ("run_id", "env", "plan", "rung", "rung_index", "repeat", "sweep", "workload", "workload_hash", "flags", "rerun")
    assert {k: started[k] for k in same} == {k: failed[k] for k in same}
    assert failed["flags"]["hash"] == flags_hash(spec.flags) and failed["rerun"]["command"] == spec.rerun
    assert failed["reason"] == "worker exited with code -9" and failed["environment"]["threads"]["torch"] == 2
    assert started["started_at"] and started["environment"] == {}


def test_the_worker_refuses_a_file_that_is_not_a_spec(tmp_path):
    bad = tmp_path / "spec.json"
    bad.write_text('{"run_id": "r"}')
    proc = subprocess.run([sys.executable, "-m", "harness.worker", str(bad)], capture_output=True, text=True, cwd=ROOT,
                          check=False, timeout=300)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"{bad}: " in proc.stderr and "missing" in proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["spec.json"]  # no record written


def test_a_spec_is_what_run_points_hands_the_worker(tmp_path, monkeypatch):
    """run_points makes one spec per point from the request; the worker gets it through run_point, as typed."""
    seen = []
    monkeypatch.setattr(launcher, "run_point", lambda spec, timeout_s, progress=None, python=None: seen.append(spec) or
                        validate(launcher.failure_record(spec, "stood in")))
    request = RunRequest(rungs="fp32", sweep="batch_size=2,4", out=str(tmp_path), timeout=5, device="cpu")
    plan, points = build_points(request)
    records = launcher.run_points(request, plan, points)
    assert [type(s) for s in seen] == [WorkerSpec, WorkerSpec] and [s.workload["batch_size"] for s in seen] == [2, 4]
    assert all(s.out == str(tmp_path) and s.rerun.startswith("python -m harness.run") for s in seen)
    assert [r["run_id"] for r in records] == [s.run_id for s in seen]

