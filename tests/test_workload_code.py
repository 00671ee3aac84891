"""The workload's code identity (harness.provenance.workload_code, record.workload_code): what it covers, that new records carry
it, that the committed ones got their commit's from git history, and that compare marks runs of different code."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from records_factory import make_record
from shipped import RESULTS

from harness.analysis.group import Group
from harness.provenance import workload_code
from harness.record.io import read_record
from harness.record.model import HISTORY_PATH
from harness.record.view import RecordView
from harness.runner.worker_spec import WorkerSpec

ROOT = Path(__file__).resolve().parent.parent


def files_here() -> dict[str, str]:
    paths = [p.relative_to(ROOT).as_posix() for p in (ROOT / "gpt").rglob("*.py") if "__pycache__" not in p.parts]
    return {p: (ROOT / p).read_text() for p in [*paths, workload_code.WORKER]}


def test_the_identity_covers_gpt_and_the_timed_loop_not_the_rest_of_the_worker():
    files = files_here()
    base = workload_code.identity_of(files, files.__getitem__)
    assert base == workload_code.identity() and len(base) == workload_code.DIGITS
    changed_model = dict(files, **{"gpt/model.py": files["gpt/model.py"] + "\n# a comment\n"})
    assert workload_code.identity_of(changed_model, changed_model.__getitem__) != base
    worker = files[workload_code.WORKER]
    outside = dict(files, **{workload_code.WORKER: worker.replace("def main(", "def main_renamed(")})
    assert workload_code.identity_of(outside, outside.__getitem__) == base  # the CLI part of the worker: not in it
    loop = dict(files, **{workload_code.WORKER: worker.replace("class StepTimer:", "class StepTimer:  # changed")})
    assert workload_code.identity_of(loop, loop.__getitem__) != base
    gone = dict(files, **{workload_code.WORKER: "def measure():\n    pass\n"})
    with pytest.raises(workload_code.CodeIdentityError, match="StepTimer"):
        workload_code.identity_of(gone, gone.__getitem__)


def test_a_new_record_carries_the_identity_of_the_code_that_makes_it():
    spec = WorkerSpec(run_id="x", env="local", plan="p", rung="fp32", workload={"batch_size": 1}, flags={})
    assert spec.new_record()["workload_code"] == workload_code.identity()


def test_the_committed_records_carry_their_commits_identity_where_git_history_gives_it():
    history = json.loads(HISTORY_PATH.read_text())
    assert len(history["records"]) >= 100
    run_id, made_at = next(iter(history["commit"].items()))
    commit = made_at.split()[0]
    have = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"], check=False,
                          capture_output=True)
    if have.returncode:
        pytest.skip("a clone without that history")
    paths = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", commit], capture_output=True,
                           text=True, check=True).stdout.split()
    show = lambda p: subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{p}"], capture_output=True, text=True,
                                    check=True).stdout
    assert workload_code.identity_of(paths, show) == history["records"][run_id]
    path = next(RESULTS.glob(f"**/{run_id}.json"), None) or next(ROOT.glob(f"tests/data/**/{run_id}.json"))
    assert RecordView(read_record(path)).workload_code == history["records"][run_id]


def test_a_pool_of_runs_made_by_different_code_is_marked_not_pooled_silently():
    a, b = make_record(repeat=0), make_record(repeat=1)
    a["workload_code"], b["workload_code"] = "1111", "2222"
    g = Group("measured", a["workload_hash"], a["flags"]["hash"], "torch212", "h100", [RecordView(a), RecordView(b)])
    assert g.mixed_code and g.n_text.endswith(" mixed") and "2 versions of the workload code" in g.code_note
    b["workload_code"] = "1111"  # a group is made of its records once loaded (it reads them once): a new one
    g = Group("measured", a["workload_hash"], a["flags"]["hash"], "torch212", "h100", [RecordView(a), RecordView(b)])
    assert not g.mixed_code and g.code_note is None and "mixed" not in g.n_text


def test_the_history_script_refuses_a_folder_that_is_not_there_and_writes_nothing():
    """`--help` once read as a folder and wrote an empty history (every committed record's identity "unknown")."""
    import sys

    root = Path(__file__).resolve().parent.parent
    before = HISTORY_PATH.read_bytes()
    for argv, code in ((["--help"], 0), (["no-such-folder"], 2)):
        proc = subprocess.run([sys.executable, "scripts/workload_code_history.py", *argv], cwd=root, check=False,
                              capture_output=True, text=True, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
        assert proc.returncode == code, proc.stderr
    assert "no-such-folder: no such folder" in proc.stderr and HISTORY_PATH.read_bytes() == before
