"""harness.batch_search: the stepping-then-bisecting logic on a known edge, the fit rule (status, peak
memory, headroom, budget), option errors, and a REAL search on CPU under a memory budget: tiny preset,
each try a worker process, the budget checked against the worker's peak RSS, the tries past it `oom`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from module_cli import assert_refused, run_module
from records_factory import make_record

from harness import batch_search as bs
from harness.analysis.fit import Fit
from harness.record.io import iter_records
from harness.record.validator import validate
from harness.record.view import RecordView

GIB = 2**30


def parse(*argv):
    return bs.make_parser().parse_args(["--rung", "fp32", *argv])


def fake_try(b: int, fits: bool, status: str = "ok") -> Fit:
    return Fit(batch_size=b, status=status, tokens_per_s=1000.0 * b if fits else None, peak_bytes=b * 2**20,
               memory_source="peak RSS", usable_bytes=2**30, headroom_bytes=0,
               why=None if fits else f"status {status}", record=RecordView({"workload": {}}))


def searched(edge: int, argv=(), status="oom"):
    """Run the search against an edge: B fits iff B <= edge. Returns (result, B's in the order tried)."""
    order = []

    def attempt(b):
        order.append(b)
        return fake_try(b, b <= edge, "ok" if b <= edge else status)

    return bs.search(parse(*argv), attempt), order


# ---------------------------------------------------------------- the search logic


def test_next_bisect_picks_a_multiple_strictly_inside():
    assert bs.next_bisect(64, 128, 8) == 96
    assert bs.next_bisect(96, 128, 8) == 112
    assert bs.next_bisect(96, 104, 8) is None  # already `multiple` apart
    assert bs.next_bisect(0, 16, 8) == 8
    assert bs.next_bisect(0, 8, 8) is None
    assert bs.next_bisect(12, 24, 8) == 16  # lo not a multiple: still a multiple between
    assert bs.next_bisect(9, 15, 8) is None
    assert bs.next_bisect(1, 3, 1) == 2


def test_search_doubles_then_bisects_to_the_edge():
    result, order = searched(100)  # --start 16 --multiple 8 --max 1024
    assert order == [16, 32, 64, 128, 96, 112, 104]
    assert (result["best"], result["first_bad"], result["stopped"]) == (96, 104, None)
    result, order = searched(100, ["--multiple", "1"])
    assert result["best"] == 100 and result["first_bad"] == 101 and order[:4] == [16, 32, 64, 128]
    assert len(order) == 4 + 6  # bisection of 64..128 to resolution 1 takes log2(64) tries


def test_search_when_the_start_does_not_fit_bisects_down():
    result, order = searched(12, ["--start", "64"])
    assert order == [64, 32, 16, 8] and result["best"] == 8 and result["first_bad"] == 16
    result, order = searched(3, ["--start", "16"])
    assert order == [16, 8] and result["best"] is None  # nothing at resolution 8


def test_search_stops_at_max_and_tries_max_itself():
    result, order = searched(10**6, ["--max", "100"])
    assert order == [16, 32, 64, 100] and result["best"] == 100 and result["first_bad"] is None
    result, order = searched(90, ["--max", "100"])
    assert order == [16, 32, 64, 100, 80, 88, 96] and result["best"] == 88


def test_search_stops_on_a_failure_that_is_not_about_memory():
    result, order = searched(40, status="unsupported")
    assert order == [16, 32, 64] and result["best"] == 32 and "not a memory limit" in result["stopped"]
    result, order = searched(0, ["--start", "8"], status="unsupported")
    assert order == [8] and result["best"] is None


# ---------------------------------------------------------------- the fit rule


def cuda_record(b, used, status="ok", budget=None):
    r = make_record(env="nightly", gpu="H100", workload={"batch_size": b, "memory_budget_gib": budget}, status=status,
                    reason=None if status == "ok" else "CUDA out of memory", sweep={"name": "batch-search", "field": "batch_size", "value": b})
    r["environment"]["gpu"]["memory_bytes"] = 80 * GIB
    if status == "ok":
        r["summary"].update(device_used_bytes=used, peak_reserved_bytes=used - GIB)
    return validate(r)


def cpu_record(b, rss, status="ok", budget=None):
    r = make_record(env="local", gpu=None, workload={"batch_size": b, "memory_budget_gib": budget}, status=status,
                    sweep={"name": "batch-search", "field": "batch_size", "value": b})
    r["environment"]["host_ram_bytes"] = 16 * GIB
    r["summary"]["peak_rss_bytes"] = rss
    return validate(r)


def test_fits_needs_ok_and_peak_plus_headroom_within_usable_memory():
    args = parse()
    assert bs.judge(args, cuda_record(96, 74 * GIB)).fits  # 74 + 5 <= 80
    t = bs.judge(args, cuda_record(112, 76 * GIB))  # ok, but 76 + 5 > 80
    assert not t.fits and "headroom 5.00 GiB" in t.why and t.memory_source == "device used"
    assert not bs.judge(args, cuda_record(128, None, status="oom")).fits
    assert bs.judge(parse("--headroom-gib", "0"), cuda_record(112, 76 * GIB)).fits
    # a budget emulates a smaller card: usable = the budget
    t = bs.judge(args, cuda_record(48, 36 * GIB, budget=40.0))
    assert t.usable_bytes == 40 * GIB and not t.fits
    assert bs.judge(args, cuda_record(32, 30 * GIB, budget=40.0)).fits
    # no NVML: the allocator's reserved peak stands in
    r = cuda_record(96, 74 * GIB)
    del r["summary"]["device_used_bytes"]
    assert bs.judge(args, r).peak_bytes == 73 * GIB and bs.judge(args, r).memory_source == "peak reserved"
    # CPU: no headroom by default; usable = host RAM, or the budget
    assert bs.judge(args, cpu_record(8, 15 * GIB)).fits and bs.judge(args, cpu_record(8, 15 * GIB)).headroom_bytes == 0
    assert not bs.judge(args, cpu_record(8, 17 * GIB)).fits
    assert not bs.judge(args, cpu_record(8, 2 * GIB, budget=1.0)).fits


@pytest.mark.parametrize("args, message", [
    ([], "the following arguments are required: --rung"),
    (["--rung", "warp"], "no rung 'warp' in plan seed-ladder"),
    (["--rung", "fp32", "--start", "0"], "argument --start: '0': expected a batch size from 1 to 65,536"),
    (["--rung", "fp32", "--multiple", "0"], "argument --multiple: '0': expected a batch size from 1"),
    (["--rung", "fp32", "--start", "64", "--max", "32"], "--start 64 is above --max 32"),
    (["--rung", "fp32", "--headroom-gib", "-1"], "argument --headroom-gib: '-1': expected a finite number of GiB from 0"),
    (["--rung", "fp32", "--memory-budget-gib", "0"], "argument --memory-budget-gib: '0': expected a finite number of GiB above 0"),
    (["--rung", "fp32", "--knee-tolerance", "1.5"], "argument --knee-tolerance: '1.5': expected a finite fraction from 0 to below 1"),
    (["--rung", "fp32", "--set", "bogus=1"], "unknown workload field 'bogus'"),
    (["--rung", "fp32", "--plan", "no-such-plan"], "no plan 'no-such-plan'"),
    (["--rung", "fp32", "--start", "lots"], "argument --start: 'lots': expected a batch size"),
])
def test_bad_options_are_argparse_errors_and_run_nothing(tmp_path, args, message):
    proc = run_module("harness.batch_search", "--out", str(tmp_path), *args)
    assert_refused(proc, tmp_path, message)


def test_each_try_is_a_harness_run_sweep_point():
    ns = bs.run_args(parse("--memory-budget-gib", "0.9", "--set", "compile=off", "--steps", "2", "--warmup-steps", "1"), 24)
    from harness.runner import request as runmod

    plan, points = runmod.build_points(ns)
    assert plan == "seed-ladder" and len(points) == 1
    (p,) = points
    assert p.sweep == {"name": "batch-search", "field": "batch_size", "value": 24}
    assert (p.workload["batch_size"], p.workload["memory_budget_gib"], p.workload["compile"], p.workload["steps"]) == (24, 0.9, "off", 2)
    cmd = runmod.rerun_command(ns, p)
    assert "--sweep batch_size=24 --sweep-name batch-search" in cmd and "--rungs fp32" in cmd


# ---------------------------------------------------------------- a real search on CPU


TINY = ["--preset", "tiny", "--rung", "fp32", "--set", "compile=off", "--set", "profile_steps=0", "--steps", "2",
        "--warmup-steps", "1", "--device", "cpu"]


def peak_rss_mib(out: Path, batch_sizes: str) -> dict[int, float]:
    """Unbudgeted tiny fp32 runs at the given B's (one worker each): their peak RSS in MiB."""
    proc = run_module("harness.run", "--preset", "tiny", "--rungs", "fp32", "--set", "compile=off", "--set", "profile_steps=0",
                      "--steps", "2", "--warmup-steps", "1", "--device", "cpu", "--sweep", f"batch_size={batch_sizes}", "--out", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {r["workload"]["batch_size"]: r["summary"]["peak_rss_bytes"] / 2**20 for _, r in iter_records([out])}


@pytest.mark.slow
def test_real_batch_search_on_cpu_finds_the_edge_of_a_memory_budget(tmp_path):
    """The budget is calibrated from two unbudgeted runs, because the worker's peak RSS depends on the torch
    build (measured on this repo's 2-core CI machine, tiny, T=64, vocab 50257: torch 2.13.0+cpu ~600 MiB at
    B=4; torch 2.15.0+cu132 1,064 / 1,244 / 1,407 / 1,645 MiB at B=4 / 8 / 12 / 16, the [B*T, 50257] fp32
    logits and their gradients adding ~45 MiB per unit of B). Budget = peak(4) + 45% of peak(16) - peak(4),
    i.e. near B=9-10, ~80 MiB from both B=8 and B=12. Tries: 4, 8, 16 (oom), then bisection 12 (oom)."""
    peaks = peak_rss_mib(tmp_path / "calibration", "4,16")
    budget = round((peaks[4] + 0.45 * (peaks[16] - peaks[4])) / 1024, 3)
    out = tmp_path / "results"
    proc = run_module("harness.batch_search", *TINY, "--memory-budget-gib", str(budget), "--start", "4", "--multiple", "4", "--max", "64", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    m = re.search(r"answer: largest B that fits = (\d+) \(resolution 4; B=(\d+) does not\); knee = (\d+)", proc.stdout)
    assert m, proc.stdout
    edge, first_bad, knee = map(int, m.groups())
    assert "knee = the smallest B whose tokens/s is within 2% of the best tokens/s among the fitting B's" in proc.stdout

    records = {r["workload"]["batch_size"]: r for _, r in iter_records([out])}
    assert len(list(out.glob("*.json"))) == len(records) >= 3  # one record per try, each its own process
    for b, r in records.items():
        assert r["sweep"] == {"name": "batch-search", "field": "batch_size", "value": b}
        assert r["workload"]["memory_budget_gib"] == budget and r["environment"]["device"] == "cpu"
    # the edge lies between an ok record and an oom record, at the search's resolution
    assert records[edge]["status"] == "ok" and records[edge]["summary"]["peak_rss_bytes"] <= budget * GIB
    assert records[first_bad]["status"] == "oom" and first_bad - edge <= 4
    assert all(r["status"] == "ok" for b, r in records.items() if b <= edge)
    assert all(r["status"] == "oom" for b, r in records.items() if b > edge)
    assert 4 <= knee <= edge
    # the oom records are on disk, saying why
    ooms = [json.loads(p.read_text()) for p in out.glob("*.json") if json.loads(p.read_text())["status"] == "oom"]
    assert ooms and all(first_bad <= r["workload"]["batch_size"] for r in ooms)
    for r in ooms:
        assert r["summary"]["peak_rss_bytes"] > budget * GIB
        assert f"exceeded the memory budget {budget} GiB" in r["reason"]
    # peak memory grows with B, and the printed table has every try
    oks = sorted(b for b, r in records.items() if r["status"] == "ok")
    assert [records[b]["summary"]["peak_rss_bytes"] for b in oks] == sorted(records[b]["summary"]["peak_rss_bytes"] for b in oks)
    for b, r in records.items():  # table rows start with B (progress lines with "try" or "[1/1]")
        assert re.search(rf"^{b}\s+{r['status']}\s", proc.stdout, re.MULTILINE), proc.stdout


@pytest.mark.slow
def test_real_batch_search_exits_1_when_nothing_fits(tmp_path):
    out = tmp_path / "results"
    proc = run_module("harness.batch_search", *TINY, "--memory-budget-gib", "0.25", "--start", "4", "--max", "4", "--multiple", "4", "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "answer: no B fits" in proc.stdout
    (record,) = [r for _, r in iter_records([out])]
    assert record["status"] == "oom" and record["sweep"]["value"] == 4
