"""What a user has run never changes what the tests see: the tests read the shipped records through tests/shipped.py
(a copy of the files git tracks under results/), never results/ itself, where the Quick start, --out and a compare's
index write. Proved by running the tests that read the shipped records most in a copy of this checkout that holds a
user's own records, on a device no shipped record has."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from shipped import RESULTS, tracked_files

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
MARK = "# the checkout's own:"  # a line that names results/ in the checkout on purpose says why after it
# The tests that would change with a user's records if they read results/: compare over every shipped record (its
# one-screen verdict, every table's width), the goldens of compare and report, the GPU call planner's default records.
BESIDE_USER_RECORDS = ["tests/test_verdict.py", "tests/test_golden.py::test_output_as_before[compare-all-text]",
                       "tests/test_golden.py::test_output_as_before[compare-all-json]",
                       "tests/test_gpu_check.py::test_dry_run_for_an_h100_reads_at_120_columns",
                       "tests/test_contention.py"]


def test_the_shipped_copy_holds_exactly_the_tracked_records():
    names = tracked_files()
    if names is None:
        pytest.skip("not a git checkout: the copy is results/ less what the harness writes there")
    written = (".harness-index", "__pycache__")  # what the tests' own compares and imports write into the copy
    copied = sorted(p.relative_to(RESULTS.parent).as_posix() for p in RESULTS.rglob("*")
                    if p.is_file() and not set(p.relative_to(RESULTS).parts) & set(written))
    assert copied == sorted(n for n in names if (ROOT / n).is_file())


def test_no_test_reads_the_results_folder_itself():
    """Records come from shipped.RESULTS. A line that names results/ in the checkout says why, after MARK: a script
    kept there (run, or read as code), or a path the harness itself fixes."""
    direct = re.compile(r'(ROOT|parent|DATA\.parent\.parent) / "results(?!" / "transcribe_peers\.py")|ROOT\.glob\("results')
    found = [f"{p.name}:{n}" for p in sorted((ROOT / "tests").glob("*.py")) if p.name not in ("shipped.py", "test_hermetic.py")
             for n, line in enumerate(p.read_text().splitlines(), 1) if direct.search(line)
             and not line.lstrip().startswith("#") and MARK not in line]
    allowed = {"test_record_boundary.py"}  # reads the .py files under results/ as source, not records
    assert [f for f in found if f.split(":")[0] not in allowed] == []


def _checkout_copy(into: Path) -> Path:
    """This checkout's files (tracked and untracked, as in the working tree; git-ignored ones left out) as a fresh
    git checkout of its own."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "-co", "--exclude-standard"], capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    git = ["git", "-C", str(into), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "copy"], check=True)
    return into


def test_the_suite_gives_the_same_result_beside_a_users_own_records(tmp_path):
    if shutil.which("git") is None or tracked_files() is None:
        pytest.skip("needs git and a git checkout to copy")
    checkout = _checkout_copy(tmp_path / "checkout")
    # a user's Quick start on a CPU no shipped record has, a run with --out under results/, and their compare's index
    runs = checkout / "results" / "runs"
    shutil.copytree(DATA / "aa-cpu-2t", runs, ignore=shutil.ignore_patterns("README*"))
    shutil.copytree(DATA / "contended-cpu", checkout / "results" / "mine")
    (checkout / "results" / ".harness-index").mkdir()
    (checkout / "results" / ".harness-index" / "records.idx").write_bytes(os.urandom(64))
    env = {**os.environ, "PYTHONPATH": str(checkout), "COLUMNS": "120"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *BESIDE_USER_RECORDS],
                          cwd=checkout, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert re.search(r"\d+ passed", proc.stdout) and "deselected" not in proc.stdout
