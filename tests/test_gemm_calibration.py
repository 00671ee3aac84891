"""The measured GEMM peak that MFU divides by (harness.explain.calibrate_gemm_peak): several sizes, the best of
several bursts, short. A peak measured too low shows as an MFU above 100%, which harness.compare marks."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from harness import explain

RATE = {256: 1e10, 512: 4e10, 1024: 2e10}  # FLOP/s of the fake device per size: 512 is its best


def fake_timer(calls: dict, slow_factor: float = 1.0):
    """_seconds_per_matmul on a fake device whose 5th timed burst of every size runs 4x faster than the others
    (as when other load on a shared machine lets up for a moment)."""

    def seconds(a, _b, reps, _device):
        n = a.shape[0]
        calls.setdefault(n, []).append(reps)
        per_matmul = slow_factor * 2.0 * n**3 / RATE[n]
        return per_matmul / 4 if len(calls[n]) == 1 + 5 else per_matmul  # call 1 is the single-matmul probe

    return seconds


def test_peak_is_the_best_size_at_its_best_burst(monkeypatch):
    calls: dict = {}
    monkeypatch.setattr(explain, "_seconds_per_matmul", fake_timer(calls))
    result = explain.calibrate_gemm_peak(torch.device("cpu"), "fp32")
    assert [s["n"] for s in result["sizes"]] == [256, 512, 1024]
    assert all(len(c) == 1 + explain.CALIBRATION_BURSTS for c in calls.values())
    assert result["n"] == 512 and result["flops"] == pytest.approx(4 * RATE[512])
    assert result["sizes"][0]["flops"] == pytest.approx(4 * RATE[256])
    assert "n = 256, 512, 1024, best of 7 bursts each" in result["method"]


def test_calibration_stays_short_on_a_slow_device(monkeypatch):
    calls: dict = {}
    # 2 x 256^3 at 1e10 FLOP/s x 30 = 0.1 s a matmul: the next size would take ~8x that per matmul, 8 times: skipped
    monkeypatch.setattr(explain, "_seconds_per_matmul", fake_timer(calls, slow_factor=30))
    result = explain.calibrate_gemm_peak(torch.device("cpu"), "fp32")
    assert [s["n"] for s in result["sizes"]] == [256] and list(calls) == [256]


def test_real_cpu_calibration():
    result = explain.calibrate_gemm_peak(torch.device("cpu"), "fp32")
    assert result["available"] and result["flops"] > 0 and result["dtype"] == "fp32"
    assert result["flops"] == max(s["flops"] for s in result["sizes"])
    assert result["sizes"][0]["n"] == 256 and all(s["reps"] >= 1 for s in result["sizes"])
