"""The fused lm_head losses (workload field lm_head_loss): loss parity with the plain path on CPU, and `unsupported`
with its reason where a library cannot run (CPU for Liger and CCE's kernel, an env without the library)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest
from shipped import RESULTS

from gpt import torch_compat
from gpt.config import ConfigError, make_config
from harness.analysis.context import DEFAULT_LOSS_TOL
from harness.record.io import iter_records, read_json
from harness.record.model import workload_hash
from harness.runner import flags as flagmod
from harness.runner.plan import load_plan
from harness.runner.request import RunRequest, build_points
from harness.runner.worker_spec import WorkerSpec
from harness.worker import measure

ROOT = Path(__file__).resolve().parent.parent
HAS_CCE = importlib.util.find_spec("cut_cross_entropy") is not None
HAS_LIGER = importlib.util.find_spec("liger_kernel") is not None


def losses(lm_head_loss: str, steps: int = 5, **overrides) -> tuple[list[float], object]:
    from gpt.train import build

    config = make_config("tiny", compile="off", precision="bf16", steps=steps, warmup_steps=1, device="cpu",
                         lm_head_loss=lm_head_loss, **overrides)
    flagmod.apply(flagmod.flags_for(config.to_dict()))
    trainer = build(config)
    out = [float(trainer.step()[0]) for _ in range(steps)]
    x, y = trainer.batches.next()
    with trainer.autocast():
        logits, _loss = trainer.forward(x, y)
    return out, logits


@pytest.mark.skipif(not HAS_CCE, reason="cut-cross-entropy is not installed in this env (the latest spec pins it)")
def test_cce_torch_compile_matches_the_plain_loss_on_cpu():
    """Same seed, same data, bf16 autocast, several optimizer steps: every step's loss within the project's loss
    tolerance of the plain path (harness.compare's rule), and no logits are returned on the fused path."""
    plain, logits = losses("plain")
    fused, fused_logits = losses("cce-torch-compile")
    assert logits is not None and fused_logits is None  # the fused path never materialises (B*T x vocab) logits
    assert len(plain) == len(fused) == 5
    for a, b in zip(plain, fused, strict=True):
        assert abs(b - a) / abs(a) <= DEFAULT_LOSS_TOL, (plain, fused)
    assert plain[-1] != plain[0]  # the optimizer stepped: parity over a trajectory, not one forward pass


def test_lm_head_loss_is_a_checked_workload_field():
    assert make_config("tiny").lm_head_loss == "plain"
    assert make_config("tiny", lm_head_loss="liger").lm_head_loss == "liger"
    with pytest.raises(ConfigError, match="lm_head_loss='fused'"):
        make_config("tiny", lm_head_loss="fused")


def test_plain_keeps_every_earlier_record_comparable():
    """lm_head_loss=plain is left out of the workload hash: records written before the field existed (the GPU records)
    hash the same as new runs that leave it alone, and a fused loss hashes differently."""
    folder = RESULTS / "gpu-h200" / "ladder"
    on_disk = [r for _p, r in iter_records([folder], read=read_json) if r["status"] == "ok"]
    assert on_disk and all("lm_head_loss" not in r["workload"] for r in on_disk)  # version 1: before the field
    records = [r for _p, r in iter_records([folder]) if r["status"] == "ok"]
    assert all(r["workload"]["lm_head_loss"] == "plain" for r in records)  # read as version 2: what they ran with
    for r in records:
        assert workload_hash(dict(r["workload"], lm_head_loss="plain")) == r["workload_hash"]
        assert workload_hash(dict(r["workload"], lm_head_loss="liger")) != r["workload_hash"]


def test_reasons_on_cpu_and_without_the_library(monkeypatch):
    if HAS_LIGER:
        reason = torch_compat.lm_head_loss_unsupported("liger", "cpu")
        assert "Liger-Kernel" in reason and "Triton has no cpu backend" in reason
    if HAS_CCE:
        reason = torch_compat.lm_head_loss_unsupported("cce", "cpu")
        assert "CCE's fused kernel" in reason and "cce-torch-compile" in reason
        assert torch_compat.lm_head_loss_unsupported("cce-torch-compile", "cpu") is None
    assert torch_compat.lm_head_loss_unsupported("plain", "cpu") is None
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("liger_kernel", "cut_cross_entropy") else real(name, *a))
    for kind, package in (("liger", "liger-kernel"), ("cce", "cut-cross-entropy"), ("cce-torch-compile", "cut-cross-entropy")):
        reason = torch_compat.lm_head_loss_unsupported(kind, "cuda")
        assert f"needs {package}, which is not installed in this env" in reason


def _beyond_point(rung: str) -> WorkerSpec:
    request = RunRequest(plan="beyond-ladder", preset="tiny", sets=("compile=off",), steps=3, warmup_steps=1, device="cpu",
                         rungs=rung, repeats=1)
    _plan, points = build_points(request)
    p = points[0]
    return WorkerSpec(run_id=f"test-{rung}", env="local", plan="beyond-ladder", rung=p.rung, rung_index=p.rung_index,
                      repeat=0, workload=p.workload, flags=p.flags)


@pytest.mark.skipif(not HAS_LIGER, reason="liger-kernel is not installed in this env (the latest spec pins it)")
def test_liger_on_cpu_is_recorded_unsupported_with_its_reason():
    """The beyond-ladder rung lm-head-liger through the worker on a CPU: status unsupported, the reason says why."""
    assert {r.name for r in load_plan("beyond-ladder").rungs} >= {"lm-head-liger", "lm-head-cce", "lm-head-cce-torch-compile"}
    record = measure(_beyond_point("lm-head-liger"))
    assert record["workload"]["lm_head_loss"] == "liger"
    assert record["status"] == "unsupported", record["reason"]
    assert "Liger-Kernel's fused linear cross-entropy is Triton code, and Triton has no cpu backend" in record["reason"]
    json.dumps(record)  # a record like any other


def test_a_missing_library_is_recorded_unsupported(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cut_cross_entropy" else real(name, *a))
    record = measure(_beyond_point("lm-head-cce-torch-compile"))
    assert record["status"] == "unsupported"
    assert "lm_head_loss=cce-torch-compile needs cut-cross-entropy, which is not installed in this env" in record["reason"]


TORCH212_PYTHON = os.environ.get("HARNESS_TORCH212_PYTHON", "/tmp/v212/bin/python")
OLD_TORCH_SCRIPT = """
import json, torch
from gpt import torch_compat
with torch.autocast("cpu", dtype=torch.bfloat16):
    inside = str(torch_compat.autocast_dtype("cpu"))
print(json.dumps({"torch": torch.__version__, "inside": inside, "outside": torch_compat.autocast_dtype("cpu"),
                  "liger": torch_compat.lm_head_loss_unsupported("liger", "cuda")}))
"""


@pytest.mark.skipif(not Path(TORCH212_PYTHON).is_file(), reason=f"no torch 2.1.2 interpreter at {TORCH212_PYTHON}")
def test_torch_212_reads_autocast_through_its_own_api_and_lacks_the_libraries():
    """torch 2.1.2 has no device-generic autocast getters (2.4+), and its env does not install the libraries
    (liger-kernel would replace the triton 2.1.0 it needs): the fused losses are unsupported there, saying why."""
    out = subprocess.run([TORCH212_PYTHON, "-c", OLD_TORCH_SCRIPT], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["torch"].startswith("2.1.2")
    assert got["inside"] == "torch.bfloat16" and got["outside"] is None
    assert "needs liger-kernel, which is not installed in this env (torch 2.1.2" in got["liger"]
