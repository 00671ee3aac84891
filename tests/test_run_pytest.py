"""tests/run_pytest.py, which `nox -s tests` runs: the run ends on pytest's summary line. Triton's exit-time nanobind
leak report (tests/data/nanobind-leak-report.txt, as torch 2.15's triton 3.9 printed it after the suite on
2026-11-29) is kept off the screen; every other line and the exit status are pytest's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from run_pytest import LeakFilter

ROOT = Path(__file__).resolve().parent.parent
REPORT = (ROOT / "tests" / "data" / "nanobind-leak-report.txt").read_bytes()


def _filtered(data: bytes) -> bytes:
    leaks = LeakFilter()
    return b"".join(leaks.line(line) for line in data.splitlines(keepends=True))


def test_the_leak_report_goes_and_every_other_line_stays():
    assert not REPORT.endswith(b"\n") and REPORT.count(b"\n") == 30  # its last line has no newline, as printed
    before, after = b"==== 1 passed in 0.1s ====\n", b"Exception ignored in atexit callback: real\n"
    assert _filtered(before + REPORT) == before
    assert _filtered(before + REPORT + b"\n" + after) == before + after
    assert _filtered(REPORT + after) == after  # a line glued to its unterminated last line is kept
    # a real error inside what looks like the report ends it and is shown
    broken = REPORT.replace(b" - leaked type \"ATOMIC_OP\"\n", b"Segmentation fault\n")
    assert b"Segmentation fault\n" in _filtered(broken)
    # the same lines outside a report are not touched
    lone = b" - leaked function \"x\"\nSee https://nanobind.readthedocs.io/en/latest/refleaks.html\n"
    assert _filtered(lone) == lone


def test_pytest_through_it_keeps_its_exit_status_and_its_real_errors(tmp_path):
    report = tmp_path / "report.txt"
    report.write_bytes(REPORT)
    (tmp_path / "test_x.py").write_text(
        "import atexit, os, sys\n"
        "def _exit_noise():\n"
        f"    sys.stderr.write('real error at exit\\n'); sys.stderr.flush()\n"
        f"    os.write(2, open({str(report)!r}, 'rb').read())\n"
        "atexit.register(_exit_noise)\n"
        "def test_fails():\n    assert False\n")
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "run_pytest.py"), "-q", "-p", "no:cacheprovider",
                           str(tmp_path / "test_x.py")], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 1
    assert "1 failed" in proc.stdout.strip().splitlines()[-1]
    assert proc.stderr == "real error at exit\n"
