"""The worker: honest statuses, invalid on flag drift, bit-identical fp32 losses, summaries."""

import pytest
import torch

from gpt import torch_compat
from gpt.config import make_config
from harness.record.validator import validate
from harness.runner.flags import flags_for
from harness.runner.worker_spec import WorkerSpec
from harness.worker import measure


def spec_for(tmp_path, run_id="t", **overrides):
    """A tiny eager run; no profiling after the steps unless asked (explain has its own tests): seconds, not tens."""
    workload = make_config("tiny", **{"steps": 6, "warmup_steps": 2, "profile_steps": 0, **overrides}).to_dict()
    return WorkerSpec(run_id=run_id, env="local", plan="test", rung="r", workload=workload,
                      flags=flags_for(workload).to_dict(), out=str(tmp_path), rerun="python -m harness.run ...")


def test_ok_record_has_per_step_series_and_summary(tmp_path):
    record = validate(measure(spec_for(tmp_path)))
    assert record["status"] == "ok", record["reason"]
    assert len(record["steps"]["ms"]) == 6 and len(record["steps"]["loss"]) == 6
    s = record["summary"]
    assert s["timed_steps"] == 4 and s["first_step_ms"] == record["steps"]["ms"][0]
    assert s["step_ms_q1"] <= s["step_ms_median"] <= s["step_ms_q3"]
    assert s["tokens_per_s"] == pytest.approx(4 * 64 / (s["step_ms_median"] / 1000))
    assert s["peak_rss_bytes"] > 0 and s["final_loss"] == record["steps"]["loss"][-1]
    assert record["flags"]["applied"] == record["flags"]["after"]
    assert record["environment"]["torch"]["version"] == torch.__version__
    assert record["steps"]["grad_norm"] == [None] * 6  # no clipping, so no norm is computed


@pytest.mark.parametrize("warmup", [0, 1, 2])
def test_the_summary_and_the_reader_time_the_same_steps(warmup):
    """One rule for the timed steps (gpt.config.timed_part): at warm-up 0 the summary's tokens/s (what the batch search
    reads) left in the compile step, which the reader (what compare reads) leaves out."""
    from harness.record.view import RecordView
    from harness.worker import summarize

    config = make_config("tiny", steps=5, warmup_steps=warmup)
    ms, losses = [900.0, 10.0, 12.0, 11.0, 13.0], [5.0, 4.0, 3.0, 2.0, 1.0]
    s = summarize(config, ms, losses)
    view = RecordView({"kind": "measured", "workload": config.to_dict(), "steps": {"ms": ms}, "summary": s})
    assert s["timed_steps"] == len(view.timed_ms) == 5 - max(1, warmup)
    assert s["step_ms_median"] == view.timed_median and s["first_step_ms"] == 900.0
    assert s["mean_loss"] == sum(losses[max(1, warmup):]) / (5 - max(1, warmup))


@pytest.mark.slow
def test_loss_falls_on_the_synthetic_corpus(tmp_path):
    record = measure(spec_for(tmp_path, steps=30, lr=3e-3))
    losses = record["steps"]["loss"]
    assert losses[-1] < losses[0] - 1.0, losses


def test_grad_norm_is_recorded_when_clipping(tmp_path):
    record = measure(spec_for(tmp_path, grad_clip=1.0))
    assert record["status"] == "ok" and all(n is not None and n > 0 for n in record["steps"]["grad_norm"])


def test_flag_flipped_during_the_run_marks_it_invalid(tmp_path):
    def flip(step):
        if step == 3:
            torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark

    try:
        record = measure(spec_for(tmp_path), step_hook=flip)
    finally:
        torch.backends.cudnn.benchmark = False
    assert record["status"] == "invalid"
    assert "after step 3: cudnn_benchmark: False -> True" in record["reason"]


def test_a_flag_flipped_and_restored_mid_run_marks_it_invalid(tmp_path):
    """Only the end state was compared once: tf32 for two steps and back again was `ok`."""
    def flip(step):
        if step == 2:
            torch_compat.set_matmul_precision("high")
        if step == 4:
            torch_compat.set_matmul_precision("highest")

    try:
        record = validate(measure(spec_for(tmp_path), step_hook=flip))
    finally:
        torch_compat.set_matmul_precision("highest")
    assert record["status"] == "invalid"
    assert record["flags"]["after"] == record["flags"]["applied"]  # back as applied by the end
    assert record["flags"]["changes"] == ["after step 2: matmul_precision: 'highest' -> 'high'",
                                          "after step 4: matmul_precision: 'high' -> 'highest'"]
    assert record["reason"] == "flags changed during the run: " + "; ".join(record["flags"]["changes"])


@pytest.mark.skipif(not torch_compat.NEW_FP32_API, reason="no separate oneDNN fp32 precision before torch 2.9")
def test_a_cpu_fp32_precision_change_mid_run_marks_it_invalid(tmp_path):
    original = torch.backends.mkldnn.matmul.fp32_precision

    def flip(step):
        if step == 1:
            torch.backends.mkldnn.matmul.fp32_precision = "bf16"
        if step == 2:
            torch.backends.mkldnn.matmul.fp32_precision = original

    try:
        record = measure(spec_for(tmp_path), step_hook=flip)
    finally:
        torch.backends.mkldnn.matmul.fp32_precision = original
    assert record["status"] == "invalid"
    assert f"after step 1: cpu_fp32_precision.mkldnn.matmul: {original!r} -> 'bf16'" in record["reason"]


def test_an_untouched_run_reads_the_flags_back_every_step_and_stays_ok(tmp_path):
    record = validate(measure(spec_for(tmp_path)))
    assert record["status"] == "ok" and record["flags"]["changes"] == []


def test_a_tf32_env_override_is_recorded_with_the_flags_and_noted(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")
    record = validate(measure(spec_for(tmp_path)))
    assert record["flags"]["applied"]["tf32_env_overrides"] == {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"}
    assert record["environment"]["env_vars"]["TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"] == "1"
    assert any(n.startswith("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 set") for n in record["notes"])


@pytest.mark.slow
def test_same_seed_fp32_on_cpu_gives_bit_identical_losses(tmp_path):
    first = measure(spec_for(tmp_path, run_id="a"))["steps"]["loss"]
    second = measure(spec_for(tmp_path, run_id="b"))["steps"]["loss"]
    assert first == second  # exact float equality, not approx
    other_seed = measure(spec_for(tmp_path, run_id="c", seed=7))["steps"]["loss"]
    assert other_seed != first


@pytest.mark.parametrize("overrides, status, reason", [
    ({"attention": "sdpa", "sdpa_backend": "efficient"}, "unsupported", "no CPU kernel"),
    ({"compile": "reduce-overhead"}, "unsupported", "CUDA graphs"),
    ({"device": "cuda"}, "unsupported", "no CUDA device"),
    ({"data": "tokens:/nonexistent/file.bin"}, "error", "data file not found"),
    ({"memory_budget_gib": 0.01}, "oom", "exceeded the memory budget"),
])
def test_statuses_are_honest(tmp_path, overrides, status, reason):
    if overrides.get("device") == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    record = validate(measure(spec_for(tmp_path, **overrides)))
    assert record["status"] == status and reason in record["reason"]


def test_tf32_on_cpu_says_it_has_no_effect(tmp_path):
    record = measure(spec_for(tmp_path, precision="tf32"))
    assert record["status"] == "ok" and any("on cpu this rung computes in fp32" in n for n in record["notes"])


def test_a_key_the_record_model_does_not_name_fails_the_run_loudly(tmp_path, monkeypatch):
    """The worker stores environment (and summary, contention, explain) through the model's types (Part.named): a
    capture that grew a key the model lacks makes an error record naming it, never a silent free object."""
    from harness.provenance import envinfo

    real = envinfo.capture
    monkeypatch.setattr(envinfo, "capture", lambda *a, **k: {**real(*a, **k), "gpu": {"name": "X", "clock_mhz": 1}})
    record = validate(measure(spec_for(tmp_path)))
    assert record["status"] == "error" and "Gpu.clock_mhz" in record["reason"], record["reason"]
    assert "not in the record model" in record["reason"]
