"""The measured GEMM peak that MFU divides by (harness.evidence.calibration.calibrate_gemm_peak): several sizes, the best of
several bursts, short. A peak measured too low shows as an MFU above 100%, which harness.compare marks."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from harness.evidence import calibration

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
    monkeypatch.setattr(calibration, "_seconds_per_matmul", fake_timer(calls))
    result = calibration.calibrate_gemm_peak(torch.device("cpu"), "fp32")
    assert [s["n"] for s in result["sizes"]] == [256, 512, 1024]
    assert all(len(c) == 1 + calibration.CALIBRATION_BURSTS for c in calls.values())
    assert result["n"] == 512 and result["flops"] == pytest.approx(4 * RATE[512])
    assert result["sizes"][0]["flops"] == pytest.approx(4 * RATE[256])
    assert "the best of 7 bursts at n=256, 7 bursts at n=512, 7 bursts at n=1024" in result["method"]


def test_calibration_stays_short_on_a_slow_device(monkeypatch):
    # 2 x 256^3 at 1e10 FLOP/s x 400 = 1.3 s a matmul, 0.34 s in the fast burst: the next size (~8x that) would
    # pass CALIBRATION_MAX_S["cpu"], so it is not started
    calls: dict = {}
    monkeypatch.setattr(calibration, "_seconds_per_matmul", fake_timer(calls, slow_factor=400))
    result = calibration.calibrate_gemm_peak(torch.device("cpu"), "fp32")
    assert [s["n"] for s in result["sizes"]] == [256] and list(calls) == [256]
    # x30: 256 and 512 take 0.1 and 0.2 s a matmul (7 bursts each fit); 1024 is estimated at 8 x 0.05 s (512's fast
    # burst), so it is started, but takes 3.2 s a matmul: it gets the one burst that is left, not seven
    calls = {}
    monkeypatch.setattr(calibration, "_seconds_per_matmul", fake_timer(calls, slow_factor=30))
    result = calibration.calibrate_gemm_peak(torch.device("cpu"), "fp32")
    assert [(s["n"], s["bursts"]) for s in result["sizes"]] == [(256, 7), (512, 7), (1024, 1)]
    assert result["n"] == 512  # the best size's rate


def test_real_cpu_calibration():
    result = calibration.calibrate_gemm_peak(torch.device("cpu"), "fp32")
    assert result["available"] and result["flops"] > 0 and result["dtype"] == "fp32"
    assert result["flops"] == max(s["flops"] for s in result["sizes"])
    assert result["sizes"][0]["n"] == 256 and all(s["reps"] >= 1 for s in result["sizes"])
