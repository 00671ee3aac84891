"""Comparing and reporting run where only the results are: these modules must not import torch, even
through another module. Each is imported in a fresh interpreter, so one module's imports cannot hide
another's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TORCH_FREE = ("harness.compare", "harness.report.__main__", "harness.stats", "harness.sweep", "harness.record", "harness.batch_search",
              "harness.cluster.__main__")


@pytest.mark.parametrize("module", TORCH_FREE)
def test_module_does_not_import_torch(module):
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"{module} imports {out.stdout.strip()}"
