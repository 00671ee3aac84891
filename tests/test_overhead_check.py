"""scripts/overhead_check.py: the verdict rule, bad use, the call in gpu_check.sh parses, and a real round on
CPU (harness record + bare loop of the same workload, summary written, exit code from the tolerance)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import overhead_check

from harness import run as runmod
from harness.runner.request import build_points


def test_verdict_is_the_median_ratio_against_the_tolerance():
    v = overhead_check.verdict([(99.5, 100.0), (101.0, 100.0), (95.0, 100.0)], 0.01)
    assert v["ratios"] == pytest.approx([0.995, 1.01, 0.95]) and v["median_ratio"] == pytest.approx(0.995)
    assert v["overhead"] == pytest.approx(0.005) and v["passed"]
    assert not overhead_check.verdict([(98.0, 100.0)], 0.01)["passed"]
    assert not overhead_check.verdict([(103.0, 100.0)], 0.01)["passed"]  # faster than bare is suspicious too


@pytest.mark.parametrize("argv, message", [
    (["--rung", "fp32", "--rungs", "fp32"], "--rungs/--repeats/--sweep are set by the check"),
    (["--rung", "fp32", "--rounds", "0"], "argument --rounds: '0': expected a number of rounds from 1"),
    (["--rung", "fp32", "--tolerance", "1.5"], "argument --tolerance: '1.5': expected a finite fraction from 0 to below 1"),
])
def test_bad_use_exits_2(argv, message, capsys):
    try:
        code = overhead_check.main(argv)
    except SystemExit as exc:  # argparse's usage error (harness.argtypes)
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_the_gpu_check_call_parses():
    text = (ROOT / "scripts" / "gpu_check.sh").read_text()
    (line,) = [x for x in text.splitlines() if "scripts/overhead_check.py" in x and not x.lstrip().startswith("#")]
    words = shlex.split(line.split("scripts/overhead_check.py", 1)[1])
    argv = ["1" if "$" in w else w for w in words]
    args, run_args = overhead_check.make_parser().parse_known_args(argv)
    assert args.rung == "fused-adamw-clip" and args.rounds == 3 and args.tolerance == 0.01
    _plan, points = build_points(runmod.parse_request([*run_args, "--rungs", args.rung]))
    assert len(points) == 1 and points[0].workload["batch_size"] == 64 and points[0].workload["seq_len"] == 1024


@pytest.mark.slow
def test_a_real_round_on_cpu(tmp_path):
    out = tmp_path / "check"
    cmd = [sys.executable, "scripts/overhead_check.py", "--rung", "fp32", "--preset", "tiny", "--set", "compile=off",
           "--set", "profile_steps=0", "--steps", "8", "--warmup-steps", "2", "--device", "cpu", "--rounds", "1",
           "--tolerance", "0", "--out", str(out)]
    proc = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # tolerance 0: no real pair of timings is equal
    assert re.search(r"round 1/1: harness [\d,]+ tokens/s .* bare loop [\d,]+ tokens/s", proc.stdout)
    assert "FAIL" in proc.stdout
    (summary_path,) = out.glob("overhead-*-fp32.yaml")
    summary = yaml.safe_load(summary_path.read_text())
    (record_path,) = out.glob("*.json")  # the harness run's record, a normal record
    (rnd,) = summary["rounds"]
    assert rnd["harness_record"] == record_path.stem and rnd["bare_tokens_per_s"] > 0 and rnd["harness_tokens_per_s"] > 0
    assert summary["passed"] is False and summary["tolerance"] == 0 and summary["torch"] and summary["device"]
    assert summary["median_ratio"] == pytest.approx(rnd["harness_tokens_per_s"] / rnd["bare_tokens_per_s"])
