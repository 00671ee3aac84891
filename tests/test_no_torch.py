"""The one place that checks what runs without torch. Comparing and reporting run where only the results are: these
modules must not import torch, even through another module. Each is imported in a fresh interpreter, so one module's
imports cannot hide another's; and a command a login node runs (a cluster submission) is run without loading it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# every module of the layers that run where only results are (record, analysis, report, envs, cluster), the CLIs
# around them, and the runner side that never imports torch itself (one worker process per measurement does)
TORCH_FREE_PACKAGES = ("record", "analysis", "report", "envs", "cluster", "bisect")
TORCH_FREE = ("harness.compare", "harness.render", "harness.analysis.sweep", "harness.batch_search", "harness.tune",
              "harness.run", "harness.request", "harness.launcher", "harness.progress", "harness.lifeline",
              "harness.dockerfiles", "harness.docker", "harness.image_entry", "harness.plan", "harness.flags",
              "harness.worker_spec", "harness.workload_code", "harness.output", "harness.textsafe") + tuple(
    ".".join(p.relative_to(ROOT).with_suffix("").parts)
    for package in TORCH_FREE_PACKAGES for p in sorted((ROOT / "harness" / package).rglob("*.py"))
    if p.name != "__init__.py")


@pytest.mark.parametrize("module", TORCH_FREE)
def test_module_does_not_import_torch(module):
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"{module} imports {out.stdout.strip()}"


def test_submitting_a_cluster_matrix_never_imports_torch(tmp_path):
    """A login node may have no torch: building the matrix (plan, points, hashes) and the scripts must not need it."""
    code = ("import sys; from harness.cluster.__main__ import main; "
            f"main(['slurm', 'submit', '--envs', 'torch212,latest', '--gpus', 'a100', '--results', {str(tmp_path)!r}, "
            "'--dry-run']); print('torch loaded' if 'torch' in sys.modules else 'no torch')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120)
    assert proc.stdout.strip().splitlines()[-1] == "no torch" and "#SBATCH --array=0,1" in proc.stdout
