"""The README's GPU section is generated from the committed GPU records: a number that disagrees fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "readme_gpu.py"


def run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], check=False, capture_output=True, text=True, cwd=ROOT)


def test_the_readme_gpu_section_matches_the_records():
    proc = run("--check")
    assert proc.returncode == 0, proc.stderr


def test_a_changed_number_is_caught(tmp_path):
    readme = (ROOT / "README.md").read_text()
    assert "463,975 (48,571 MiB)" in readme  # H100 B=64 best rung: tokens/s and device used, from the ladder record
    wrong = tmp_path / "README.md"
    wrong.write_text(readme.replace("463,975 (48,571 MiB)", "464,975 (48,571 MiB)", 1))
    proc = run("--check", "--readme", str(wrong))
    assert proc.returncode == 1 and "differs from the records" in proc.stderr
    assert run("--write", "--readme", str(wrong)).returncode == 0
    assert run("--check", "--readme", str(wrong)).returncode == 0


def test_a_changed_number_in_the_gpu_page_is_caught(tmp_path):
    """docs/gpu.md holds the rest of the GPU numbers (batch search, SDPA, overhead, peer): checked the same way."""
    page = (ROOT / "docs" / "gpu.md").read_text()
    assert "| 96 | 471,396 (71,819 MiB) |" in page  # H100 batch search B=96, from its record
    wrong = tmp_path / "gpu.md"
    wrong.write_text(page.replace("| 96 | 471,396 (71,819 MiB) |", "| 96 | 471,397 (71,819 MiB) |", 1))
    proc = run("--check", "--gpu-doc", str(wrong))
    assert proc.returncode == 1 and "gpu.md" in proc.stderr and "differs from the records" in proc.stderr
