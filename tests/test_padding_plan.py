"""The padding plan: Inductor's shape/comprehensive padding as frozen, hashed flags, A/B against torch's default.

The whole plan runs here for real on the CPU (compile off to keep it short: the CPU compiler does not pad
GEMMs anyway, so only a GPU run answers the questions); under torch 2.1.2, where Inductor has no
comprehensive_padding, the rungs that switch it off are recorded as unsupported."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from module_cli import run_module
from shipped import RESULTS

from harness.analysis import findings
from harness.analysis.context import Compare
from harness.analysis.dataset import load
from harness.analysis.tables import knobs as knob_tables
from harness.record.io import iter_records
from harness.runner.plan import load_plan

TORCH212_PYTHON = os.environ.get("HARNESS_TORCH212_PYTHON", "/tmp/v212/bin/python")
FAST = ["--preset", "tiny", "--device", "cpu", "--steps", "3", "--warmup-steps", "1", "--set", "compile=off",
        "--set", "profile_steps=0"]


def test_the_plan_pairs_every_rung_with_its_padding_twin():
    plan = load_plan("padding")
    by_name = {r.name: r for r in plan.rungs}
    assert len(plan.rungs) == 12
    for precision in ("tf32", "bf16"):
        for vocab in (50257, 50304):
            base = by_name[f"{precision}-{vocab}"]
            assert (base.settings["precision"], base.settings["vocab_size"], base.flags) == (precision, vocab, {})
            off = by_name[f"{precision}-{vocab}-no-pad"]
            assert off.settings == base.settings
            assert off.flags == {"inductor_shape_padding": "off", "inductor_comprehensive_padding": "off"}
        assert by_name[f"{precision}-50257-no-shape-pad"].flags == {"inductor_shape_padding": "off"}
    # the seed ladder's tf32/bf16 rungs otherwise: naive attention, foreach AdamW, no clipping, compiled
    assert {(r.settings["attention"], r.settings["optimizer"], r.settings["grad_clip"], r.settings["compile"])
            for r in plan.rungs} == {("naive", "foreach", 0.0, "default")}


def test_a_flag_a_record_does_not_name_reads_as_left_at_default_in_a_knob():
    """The seed ladder's records name no Inductor padding flag, the padding plan's name them all ('default' or 'off'):
    the flags hash reads both as the same where the value is 'default', and so do the knob names (they said
    'inductor_aggressive_fusion null -> default' and listed four flags beside the one SDPA change)."""
    root = RESULTS
    folders = ["gpu-h100-80gb-hbm3", "gpu-h100-80gb-hbm3-20261126-call1", "gpu-h200", "gpu-h200-20261126-call1"]
    cmp = Compare(load([root / d for d in folders], warn=lambda line: None))
    knobs = [k for k, _ctx in knob_tables.knob_effects(cmp)]
    assert not any("null" in k for k in knobs), knobs
    assert "sdpa_backend flash -> cudnn (flags: sdpa)" in knobs, knobs  # the H100's pooled ladder run beside the call's
    assert "flags: inductor_comprehensive_padding default -> off, inductor_shape_padding default -> off" in knobs


@pytest.mark.slow
def test_the_padding_plan_runs_on_cpu_and_its_ab_reaches_the_findings(tmp_path):
    proc = run_module("harness.run", "--plan", "padding", *FAST, "--out", str(tmp_path), timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    records = {r["rung"]: r for _p, r in iter_records([tmp_path])}
    assert len(records) == 12 and all(r["status"] == "ok" for r in records.values()), \
        {k: r["reason"] for k, r in records.items() if r["status"] != "ok"}
    off = records["bf16-50257-no-pad"]["flags"]
    assert off["requested"]["inductor_shape_padding"] == "off"
    assert off["applied"]["inductor_shape_padding"] is False and off["applied"]["inductor_comprehensive_padding"] is False
    assert off["after"] == off["applied"]
    assert records["bf16-50257"]["flags"]["applied"]["inductor_shape_padding"] is True  # torch's default, read back
    hashes = {name: r["flags"]["hash"] for name, r in records.items()}
    assert len({hashes["bf16-50257"], hashes["bf16-50257-no-shape-pad"], hashes["bf16-50257-no-pad"]}) == 3
    assert hashes["bf16-50257"] == hashes["bf16-50304"]  # padding left at default: same flags, another workload

    cmp = Compare(load([tmp_path], warn=lambda line: None, include_contended=True))  # about the A/B, not the load
    knobs = [k for k, _ctx in knob_tables.knob_effects(cmp)]
    assert any(k.startswith("flags: inductor_comprehensive_padding default -> off") for k in knobs), knobs
    ab = [f for f in findings.tf32_memory(cmp) + findings.vocab(cmp) if f.topic == "padding-ab"]
    texts = "\n".join(f.text for f in ab)
    assert "TF32's memory rise" in texts and "the vocab-padding speed-up" in texts, texts
    assert all(f.records for f in ab)


@pytest.mark.slow
@pytest.mark.skipif(not Path(TORCH212_PYTHON).exists(), reason=f"no torch 2.1.2 venv at {TORCH212_PYTHON}")
def test_comprehensive_padding_is_unsupported_in_torch_212(tmp_path):
    proc = run_module("harness.run", "--plan", "padding", "--rungs", "tf32-50257-no-shape-pad,tf32-50257-no-pad",
                      *FAST, "--out", str(tmp_path), python=TORCH212_PYTHON, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    records = {r["rung"]: r for _p, r in iter_records([tmp_path])}
    assert records["tf32-50257-no-pad"]["status"] == "unsupported"
    assert "comprehensive_padding" in records["tf32-50257-no-pad"]["reason"] and "2.4" in records["tf32-50257-no-pad"]["reason"]
    shape_only = records["tf32-50257-no-shape-pad"]
    assert shape_only["status"] == "ok" and shape_only["environment"]["torch"]["version"].startswith("2.1.2")
    assert shape_only["flags"]["applied"]["inductor_shape_padding"] is False
    assert shape_only["flags"]["applied"]["inductor_comprehensive_padding"] is None  # absent in 2.1.2
