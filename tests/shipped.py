"""The records this project ships, as the tests read them: a copy of exactly the files git tracks under results/,
made once per test process. Never results/ itself: a user's own runs land there (results/runs/ from the Quick start,
results/bisect/, an unpacked GPU call, any --out under it, a compare's .harness-index/), and what a user has run
must not change what the tests see (tests/test_hermetic.py runs tests beside such records to prove it).

    from shipped import RESULTS, SHIPPED_ROOT   # RESULTS = SHIPPED_ROOT / "results"

Outside a git checkout (an unpacked archive), the copy is results/ less what the harness writes there by default.
"""

from __future__ import annotations

import atexit
import shutil
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What the harness writes under results/ by default (git-ignored): left out where git cannot say what is tracked
WRITTEN_THERE = ("runs", "bisect", ".harness-index")


def tracked_files(root: Path = ROOT) -> list[str] | None:
    """The paths git tracks under results/ (relative to root), or None outside a git checkout."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", "results"], capture_output=True,
                             check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [name for name in out.decode().split("\0") if name]


def _copy() -> Path:
    into = Path(tempfile.mkdtemp(prefix="harness-shipped-"))
    atexit.register(shutil.rmtree, into, ignore_errors=True)
    names = tracked_files()
    if names is None:
        shutil.copytree(ROOT / "results", into / "results", ignore=lambda folder, entries: [
            e for e in entries if e in WRITTEN_THERE or e == "__pycache__"])
        return into
    for name in names:
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is not shipped
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


SHIPPED_ROOT = _copy()  # holds results/ only; run commands here with PYTHONPATH=ROOT to read it as a checkout would
RESULTS = SHIPPED_ROOT / "results"
