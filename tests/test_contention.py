"""A run measured on a busy machine says so: the record's contention window, the runner's warning, compare's flag.
The real test runs a rung beside CPU hogs; it holds however busy the machine is otherwise (more load only adds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from module_cli import run_module
from records_factory import make_record, write
from shipped import RESULTS

from harness.analysis.cells import CONTENDED_NOTE
from harness.analysis.context import Compare
from harness.analysis.dataset import load
from harness.analysis.tables import registry
from harness.provenance import contention

STAT = """cpu  900 0 300 5000 10 0 0 0 0 0
cpu0 100 0 50 2000 5 0 0 {steal0} 0 0
cpu1 {user1} 0 100 2000 5 0 0 0 0 0
cpu2 500 0 150 1000 0 0 0 0 0 0
intr 1 2 3
"""


def stat(user1=200, steal0=0):
    return STAT.format(user1=user1, steal0=steal0)


def test_cpu_times_sum_only_the_workers_cpus():
    tick = os.sysconf("SC_CLK_TCK")
    busy, steal = contention.cpu_times({0, 1}, stat(steal0=7))
    assert busy == pytest.approx((150 + 300) / tick) and steal == pytest.approx(7 / tick)
    assert contention.cpu_times({5}, stat()) is None


def sample(at, busy, own, steal=0.0, load=(1.0, 1.0, 1.0), gpu=None):
    return contention.Sample(at, busy, steal, own, list(load), gpu or {})


def test_window_counts_other_processes_beyond_the_free_cpus():
    quiet = contention.window(sample(0, 100.0, 10.0), sample(10, 119.9, 29.8), threads=2, usable=2)
    assert quiet["others_busy_cpus"] == pytest.approx(0.01) and not quiet["contended"] and quiet["reason"] is None
    busy = contention.window(sample(0, 100.0, 10.0), sample(10, 125.0, 20.0, load=(3.1, 2, 1)), threads=2, usable=2)
    assert busy["contended"] and busy["others_busy_cpus"] == pytest.approx(1.5)
    assert busy["reason"] == "other processes kept 1.50 of the 2 usable CPU(s) busy (2 thread(s) measuring)"
    assert contention.describe(busy).endswith("load 3.10, over 10.0 s of timed steps")
    # on 8 CPUs with 2 threads measuring, 1.5 busy CPUs elsewhere leave the worker's cores alone
    assert not contention.window(sample(0, 100.0, 10.0), sample(10, 145.0, 30.0), threads=2, usable=8)["contended"]
    stolen = contention.window(sample(0, 100.0, 10.0, steal=0.0), sample(10, 120.0, 30.0, steal=2.0), threads=2, usable=2)
    assert stolen["contended"] and "stole 10%" in stolen["reason"]
    assert contention.describe(quiet) is None and contention.describe(None) is None


def test_window_names_other_gpu_processes():
    me = os.getpid()
    alone = contention.window(sample(0, 1.0, 0.5, gpu={me: 100}), sample(1, 2.0, 1.5, gpu={me: 100}), 2, 2)
    assert not alone["contended"] and alone["gpu_other_processes"] == []
    shared = contention.window(sample(0, 1.0, 0.5, gpu={me: 100, 4242: 2**30}), sample(1, 2.0, 1.5, gpu={me: 100}), 2, 2)
    assert shared["contended"] and shared["gpu_other_processes"] == [{"pid": 4242, "used_memory_bytes": 2**30}]
    # in a container NVML's pids are the host's: ours is not among them, one of them is taken to be us
    boxed = contention.window(sample(0, 1.0, 0.5, gpu={77: 100}), sample(1, 2.0, 1.5, gpu={77: 100}), 2, 2, own_pid=5)
    assert not boxed["contended"] and "another pid namespace" in boxed["gpu_note"]


def test_a_contended_run_counts_nowhere_unless_asked_back_and_a_clean_rerun_replaces_it(tmp_path):
    records = [make_record(env="latest", gpu=None, rung=rung, workload={"precision": rung}, ms=[900.0] + [ms] * 11)
               for rung, ms in (("fp32", 140.0), ("bf16", 65.0))]
    records[1]["contention"] = contention.window(sample(0, 100.0, 10.0), sample(10, 125.0, 20.0), threads=2, usable=2)
    records[1]["rerun"] = {"command": "nox -s bench-latest -- --rungs bf16"}
    write(tmp_path, records)
    # by default: left out, listed with its reason and rerun command; its cell shows that instead of a number
    ds = load([tmp_path], warn=lambda line: None)
    assert [r.run_id for _p, r in ds.contended] == [records[1]["run_id"]]
    left = [x for x in ds.left_out if x.kind == "contended"]
    assert len(left) == 1 and "1.50 of the 2 usable CPU(s)" in left[0].why and "nox -s bench-latest -- --rungs bf16" in left[0].why
    table = registry.build(Compare(ds), ["ladder"])[0]
    assert [(r["rung"], r["runs"], r.get("tokens_s")) for r in table.rows] == [("fp32", "1x10", table.rows[0]["tokens_s"]),
                                                                               ("bf16", "contended", None)]
    assert any(n.startswith("bf16: contended") and "rerun: nox -s bench-latest" in n for n in table.notes)
    # --include-contended: back in its group, marked next to its numbers
    table = registry.build(Compare(load([tmp_path], warn=lambda line: None, include_contended=True)), ["ladder"])[0]
    assert [r["runs"] for r in table.rows] == ["1x10", "1x10 contended"]
    assert any(n.startswith("contended: bf16") and "1.50 of the 2 usable CPU(s)" in n for n in table.notes)
    assert CONTENDED_NOTE in table.notes
    # a clean rerun of the same rung: it alone is the cell, never pooled with the contended one
    rerun = make_record(env="latest", gpu=None, rung="bf16", workload={"precision": "bf16"}, ms=[900.0] + [60.0] * 11)
    write(tmp_path, [rerun])
    ds = load([tmp_path], warn=lambda line: None)
    (bf16,) = [g for g in ds.groups if g.label == "bf16"]
    assert [r.run_id for r in bf16.records] == [rerun["run_id"]] and len(ds.contended) == 1


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/stat")
def test_a_rung_beside_a_cpu_hog_is_recorded_warned_and_flagged_as_contended(tmp_path):
    out = tmp_path / "runs"
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(len(os.sched_getaffinity(0)))]
    try:
        proc = run_module("harness.run", "--out", out, "--rungs", "fp32", "--set", "compile=off", "--steps", "25",
                          "--warmup-steps", "2", "--set", "profile_steps=0", "--env", "local", timeout=600)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert proc.returncode == 0, proc.stderr
    record = json.loads(next(out.glob("*.json")).read_text())
    busy = record["contention"]
    assert busy["contended"] and busy["others_busy_cpus"] >= 0.3 and busy["window"] == "timed steps", busy
    assert busy["threads"] == record["environment"]["threads"]["torch"]
    assert any(n.startswith("measured under contention: other processes kept") for n in record["notes"])
    assert "CONTENDED" in proc.stdout
    warning = [line for line in proc.stderr.splitlines() if line.startswith("warning: 1 of 1 run(s) measured under contention")]
    assert len(warning) == 1 and "fp32 #0: other processes kept" in warning[0] and "load " in warning[0]
    table = registry.build(Compare(load([out], warn=lambda line: None)), ["ladder"])[0]
    assert table.rows[0]["runs"].endswith("contended")


def test_every_key_the_window_writes_is_a_field_of_the_records_contention_type():
    """The record model names all of it (harness.record.sections.Contention; the schema is held equal to it): the
    CPU part unmeasured, a GPU shared in another pid namespace, and a measured CPU part."""
    from harness.record.sections import Contention

    unread = contention.Sample(0, None, None, 0.5, [1.0, 1.0, 1.0], {77: 100, 78: 2**30})
    boxed = contention.window(unread, contention.Sample(1, None, None, 1.5, [2.0, 1.0, 1.0], {77: 100}), 2, 2,
                              own_pid=5)
    assert {"cpu", "gpu_note", "gpu_other_processes"} <= set(boxed)
    measured = contention.window(sample(0, 100.0, 10.0), sample(10, 125.0, 20.0), threads=2, usable=2)
    for window in (boxed, measured):
        read = Contention.of(window)
        assert read.extra == {} and read.to_dict() == {**dict.fromkeys(Contention.names()), **window}
        assert Contention.named(window).to_json() == window  # what the worker writes: the window, key for key


def test_the_verdicts_rerun_lines_name_each_command_once_and_count_every_run():
    """A year of runs contended in one cell repeats one rerun command: the verdict names each (cell, command) once
    with its count, and what it counts plus "and N more" is every contended run (results/ has 34, two pairs alike)."""
    import re

    from harness.analysis.options import CompareOptions, analyse
    from harness.analysis.verdict import verdict
    from harness.console.verdict_text import _left_out_blocks

    results = RESULTS
    ds, cx = analyse(CompareOptions((results,)), lambda line: None)
    (lines,) = [lines for head, lines in _left_out_blocks(verdict(cx), cx.name) if head.startswith("Left out as")]
    named = [line for line in lines if not line.startswith("... and")]
    assert len(named) == 3 and len(set(named)) == 3
    counted = sum(int(m.group(1)) if (m := re.search(r"\((\d+) runs\):", line)) else 1 for line in named)
    more = int(re.search(r"and (\d+) more", lines[-1]).group(1))
    assert counted > 3 and counted + more == len(ds.contended) > 3
