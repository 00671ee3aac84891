"""The one place that checks what runs without torch. Comparing and reporting run where only the results are: these
modules must not import torch, even through another module. Each package's modules are imported one after another in
one fresh interpreter, which looks for torch after each import, so the first module that brings it in is the one
named (an interpreter per module: 81 starts, 14 s against 7 s on a 2-core machine); and a command a login node runs (a
cluster submission) is run without loading it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# every module of the layers that run where only results are (record, store, analysis, report, envs, cluster), the
# CLIs around them, and the runner side that never imports torch itself (one worker process per measurement does)
TORCH_FREE_PACKAGES = ("record", "store", "analysis", "report", "envs", "cluster", "bisect", "runner", "provenance",
                       "console", "cli")
TORCH_FREE = {"harness": ("harness.compare", "harness.batch_search", "harness.tune", "harness.run", "harness.calibrate",
                          "harness.lifeline", "harness.docker", "harness.image_entry", "harness.argtypes")} | {
    f"harness.{package}": tuple(".".join(p.relative_to(ROOT).with_suffix("").parts)
                                for p in sorted((ROOT / "harness" / package).rglob("*.py")) if p.name != "__init__.py")
    for package in TORCH_FREE_PACKAGES}
FIRST_WITH_TORCH = """
import importlib, sys
for module in sys.argv[1:]:
    importlib.import_module(module)
    if any(m == "torch" or m.startswith("torch.") for m in sys.modules):
        print(module)
        break
"""


@pytest.mark.parametrize("package", sorted(TORCH_FREE))
def test_no_module_imports_torch(package):
    modules = TORCH_FREE[package]
    assert modules, package
    out = subprocess.run([sys.executable, "-c", FIRST_WITH_TORCH, *modules], cwd=ROOT, capture_output=True, text=True,
                         check=True, timeout=300)
    assert out.stdout.strip() == "", f"{out.stdout.strip()} imports torch (the first of {package}'s modules that does)"


def test_submitting_a_cluster_matrix_never_imports_torch(tmp_path):
    """A login node may have no torch: building the matrix (plan, points, hashes) and the scripts must not need it."""
    code = ("import sys; from harness.cluster.__main__ import main; "
            f"main(['slurm', 'submit', '--envs', 'torch212,latest', '--gpus', 'a100', '--results', {str(tmp_path)!r}, "
            "'--dry-run']); print('torch loaded' if 'torch' in sys.modules else 'no torch')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120)
    assert proc.stdout.strip().splitlines()[-1] == "no torch" and "#SBATCH --array=0,1" in proc.stdout
