"""Running a harness module's command line from the tests, and the bad-usage contract every CLI keeps."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_module(module: str, *args, timeout: float = 600, python: str | None = None) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS...` from the repository root, output captured (python: another interpreter)."""
    return subprocess.run([python or sys.executable, "-m", module, *map(str, args)], check=False, capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout)


def assert_refused(proc: subprocess.CompletedProcess, out_dir: Path, message: str) -> None:
    """Bad input: exit 2, the reason on the last stderr line, and nothing run (out_dir stays empty)."""
    assert proc.returncode == 2
    assert message in proc.stderr.strip().splitlines()[-1]
    assert not list(Path(out_dir).iterdir())
