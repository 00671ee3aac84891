"""record["explain"] from real CPU runs of harness.worker.measure: every part filled, or unavailable with
its reason. The same under torch 2.1.2 when its venv is there (HARNESS_TORCH212_PYTHON, default
/tmp/v212/bin/python); CI runs the full version matrix separately."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TORCH212_PYTHON = os.environ.get("HARNESS_TORCH212_PYTHON", "/tmp/v212/bin/python")
PARTS = ("kernels", "libraries", "memory_split", "power", "mfu")
VERSION = re.compile(r"^\d+\.\d+\.\d+$")

# A small workload that still has an lm_head GEMM with an odd vocabulary (4099) and SDPA attention.
WORKLOAD = {"steps": 4, "warmup_steps": 1, "profile_steps": 2, "vocab_size": 4099, "attention": "sdpa", "device": "cpu"}

MEASURE_SCRIPT = """
import json, sys
from gpt.config import make_config
from harness.runner.flags import flags_for
from harness.worker import measure
from harness.runner.worker_spec import WorkerSpec
w = make_config("tiny", **json.loads(sys.argv[1])).to_dict()
spec = WorkerSpec(run_id="explain-test", env="local", plan="test", rung="r", workload=w, flags=flags_for(w).to_dict())
print("RECORD " + json.dumps(measure(spec)))
"""


def measure_here(**overrides):
    from gpt.config import make_config
    from harness.runner.flags import flags_for
    from harness.runner.worker_spec import WorkerSpec
    from harness.worker import measure

    w = make_config("tiny", **{**WORKLOAD, **overrides}).to_dict()
    spec = WorkerSpec(run_id="explain-test", env="local", plan="test", rung="r", workload=w, flags=flags_for(w).to_dict())
    return measure(spec)


def check_cpu_explain(record: dict, cuda_build: bool) -> None:
    """What a CPU record's explain must hold, whichever torch wrote it."""
    assert record["status"] == "ok", record["reason"]
    explain = record["explain"]
    assert set(explain) == set(PARTS)
    for part in PARTS:
        assert isinstance(explain[part]["available"], bool) and "reason" in explain[part], part
        if not explain[part]["available"]:
            assert explain[part]["reason"], part

    k = explain["kernels"]
    assert k["available"] and k["device"] == "cpu" and k["profiled_steps"] == 2
    assert k["by_category"]["gemm"]["share"] > 0 and k["by_category"]["attention"]["calls"] > 0
    assert sum(c["share"] for c in k["by_category"].values()) == pytest.approx(1.0)
    for entry in k["top"]:
        assert set(entry) >= {"name", "category", "precision", "calls", "total_us", "per_step_us", "share"}
    lm = k["lm_head_gemm"]
    assert lm["name"] == "aten::mm" and lm["precision"] == "fp32" and lm["per_step_us"] > 0
    B, T = 4, 64  # the tiny preset
    assert lm["shape"] == [B * T, 4099, 64]
    assert {g["role"] for g in k["vocab_gemms"]} == {"forward", "backward-input", "backward-weight"}
    assert k["sdpa_backend"] == "flash"  # CPU SDPA runs its flash kernel for fp32
    assert any("flash_attention" in name for name in k["attention_kernels"])

    for part in ("power", "memory_split"):
        assert not explain[part]["available"] and explain[part]["reason"].startswith("not available on cpu"), part
    assert "CUBLAS_WORKSPACE_CONFIG" in explain["memory_split"] and "PYTORCH_CUDA_ALLOC_CONF" in explain["memory_split"]

    libs = explain["libraries"]
    if cuda_build:  # a CUDA wheel maps its libraries even when the run is on CPU: they are reported as they are
        assert libs["available"], libs["reason"]
        for key in ("cublas", "cublasLt", "cudnn", "nccl"):
            assert VERSION.match(libs["mapped"][key]["version"]), (key, libs["mapped"][key])
            assert os.path.isabs(libs["mapped"][key]["path"])
        assert libs["mapped"]["cudnn"]["version"] == libs["torch_reports"]["cudnn"]
        assert libs["mapped"]["nccl"]["version"] == libs["torch_reports"]["nccl"]
        assert libs["disagreements"] == []
    else:
        assert not libs["available"] and libs["reason"].startswith("not available on cpu")

    m = explain["mfu"]
    assert m["available"] and m["datasheet"] is None and m["mfu_datasheet"] is None
    assert m["datasheet_reason"].startswith("not available on cpu")
    assert m["measured_peak"]["flops"] > 0 and m["measured_peak"]["dtype"] == "fp32"
    assert m["mfu_measured"] > 0  # no upper bound: on a shared CPU the 0.1 s calibration and the steps see different load
    assert m["achieved_flops"] == pytest.approx(m["flops_per_token"] * record["summary"]["tokens_per_s"])
    assert record["summary"]["mfu"] == m["mfu_measured"]


def test_cpu_record_fills_every_explain_part(tmp_path):
    import torch

    from harness.record.io import read_record, write_record

    record = measure_here()
    check_cpu_explain(record, cuda_build=torch.version.cuda is not None)
    assert read_record(write_record(record, tmp_path))["explain"]["kernels"]["available"]  # schema-valid, JSON-safe


def test_profiling_off_and_a_failing_part_keep_the_measurement(monkeypatch):
    from harness.evidence import calibration, profiling

    record = measure_here(profile_steps=0)
    assert record["status"] == "ok"
    assert record["explain"]["kernels"] == {"available": False, "reason": "profiling off (profile_steps=0)"}
    assert record["explain"]["mfu"]["available"]

    def broken(*args, **kwargs):
        raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    monkeypatch.setattr(profiling, "profile_kernels", broken)
    monkeypatch.setattr(calibration, "calibrate_gemm_peak", broken)
    record = measure_here()
    assert record["status"] == "ok" and record["summary"]["tokens_per_s"] > 0
    assert record["explain"]["kernels"]["reason"] == "error: RuntimeError: CUPTI_ERROR_NOT_INITIALIZED"
    m = record["explain"]["mfu"]
    assert not m["available"] and m["measured_peak"] is None and "CUPTI" in m["measured_peak_reason"]
    assert record["summary"]["mfu"] is None


def test_naive_attention_has_no_sdpa_backend():
    record = measure_here(attention="naive", steps=2, warmup_steps=0)
    k = record["explain"]["kernels"]
    assert k["sdpa_backend"] is None and k["attention_kernels"] == []
    assert k["lm_head_gemm"]["shape"][1] == 4099


@pytest.mark.skipif(not Path(TORCH212_PYTHON).exists(), reason=f"no torch 2.1.2 venv at {TORCH212_PYTHON}")
def test_cpu_record_under_torch_212():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([TORCH212_PYTHON, "-c", MEASURE_SCRIPT, json.dumps(WORKLOAD)], check=False, cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RECORD "))
    record = json.loads(line[len("RECORD "):])
    assert record["environment"]["torch"]["version"].startswith("2.1.2")
    check_cpu_explain(record, cuda_build=record["environment"]["torch"]["cuda"] is not None)
