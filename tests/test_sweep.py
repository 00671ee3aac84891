"""Sweeps: --sweep parsing and errors, plan sweeps, the alignment plan's arithmetic, the sweep analysis
(harness.analysis.sweep: rows, knee; harness.compare's sweeps table) on hand-built records, and a real CPU sweep (one process and one
record per point, each tagged with its sweep)."""

from __future__ import annotations

import csv
import io
import json
import tempfile
from pathlib import Path

import pytest
from module_cli import assert_refused, run_module
from records_factory import make_record, write

from harness import run as runmod
from harness.analysis import sweep as sweepmod
from harness.analysis.context import Compare
from harness.analysis.dataset import load
from harness.analysis.tables import registry
from harness.record.io import iter_records
from harness.record.model import flags_hash
from harness.record.validator import validate
from harness.record.view import RecordView
from harness.runner import request
from harness.runner.plan import PlanError, load_plan

GIB = 2**30


def run_args(*argv):
    return runmod.parse_request(list(argv))


def pow2(n: int) -> int:
    """The largest power of two dividing n."""
    return n & -n


# ---------------------------------------------------------------- --sweep parsing


def test_parse_sweep_types_values_like_set():
    s = request.parse_sweep("batch_size=64, 80,96")
    assert (s.name, s.field, s.values) == ("batch_size", "batch_size", [64, 80, 96])
    assert all(type(v) is int for v in s.values)
    s = request.parse_sweep("grad_clip=0,0.5,1", name="clips")
    assert (s.name, s.values) == ("clips", [0.0, 0.5, 1.0]) and all(type(v) is float for v in s.values)
    assert request.parse_sweep("precision=fp32,bf16").values == ["fp32", "bf16"]
    assert request.parse_sweep("seq_len=128").values == [128]


@pytest.mark.parametrize("text, message", [
    ("batch_size", "expected FIELD=V1,V2"),
    ("=1,2", "expected FIELD=V1,V2"),
    ("batch_size=", "expected FIELD=V1,V2"),
    ("batch_size=8,,16", "empty value"),
    ("batch_size=8,", "empty value"),
    ("warp=1,2", "unknown workload field 'warp'"),
    ("batch_size=8,eight", "batch_size='eight': expected an integer"),
    ("batch_size=8,16,8", "given twice"),
    ("preset=tiny,small", "preset is a label"),
])
def test_parse_sweep_errors(text, message):
    with pytest.raises(request.ConfigError, match=message):
        request.parse_sweep(text)


@pytest.mark.parametrize("args, message", [
    (["--sweep", "batch_size"], "expected FIELD=V1,V2"),
    (["--sweep", "bogus=1,2"], "unknown workload field 'bogus'"),
    (["--sweep", "n_embd=64,65"], "n_embd=65 is not divisible by n_head=2"),  # each point's config is validated
    (["--sweep", "precision=fp32,fp8"], "precision='fp8'"),
    (["--sweep-name", "x"], "--sweep-name needs --sweep"),
])
def test_bad_sweep_on_the_command_line_is_exit_2_and_runs_nothing(tmp_path, args, message):
    proc = run_module("harness.run", "--out", str(tmp_path), *args)
    assert_refused(proc, tmp_path, message)


def test_cli_sweep_points_one_per_rung_value_and_repeat_and_the_value_wins():
    args = run_args("--rungs", "fp32,bf16", "--repeats", "2", "--set", "batch_size=3", "--batch-size", "5",
                    "--sweep", "batch_size=2,4,8")
    plan, points = request.build_points(args)
    assert plan == "seed-ladder" and len(points) == 2 * 3 * 2
    assert [(p.rung, p.workload["batch_size"], p.repeat) for p in points[:6]] == [
        ("fp32", 2, 0), ("fp32", 2, 1), ("fp32", 4, 0), ("fp32", 4, 1), ("fp32", 8, 0), ("fp32", 8, 1)]
    for p in points:
        assert p.sweep == {"name": "batch_size", "field": "batch_size", "value": p.workload["batch_size"]}
    assert {p.workload["precision"] for p in points if p.rung == "bf16"} == {"bf16"}  # rung settings kept
    # the rerun command makes just that point again, under the same sweep name
    named = request.build_points(run_args("--rungs", "fp32", "--sweep", "seq_len=32,64", "--sweep-name", "T"))[1]
    cmd = request.rerun_command(run_args("--rungs", "fp32"), named[1])
    assert "--sweep seq_len=64 --sweep-name T" in cmd and "--rungs fp32" in cmd
    again = request.build_points(run_args(*cmd.split()[3:]))[1]
    assert [(p.sweep, p.workload["seq_len"]) for p in again] == [(named[1].sweep, 64)]


def test_points_without_a_sweep_are_untagged():
    _, points = request.build_points(run_args("--rungs", "fp32"))
    assert [p.sweep for p in points] == [None]
    assert "--sweep" not in request.rerun_command(run_args("--rungs", "fp32"), points[0])


# ---------------------------------------------------------------- sweeps in plans


def write_plan(tmp_path, text: str) -> str:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return str(path)


def test_plan_sweep_applies_to_every_rung_and_a_rung_sweep_replaces_it(tmp_path):
    path = write_plan(tmp_path, (
        "name: p\nsweep: {field: batch_size, values: [2, 4]}\n"
        "rungs:\n  - name: a\n    set: {batch_size: 99}\n"
        "  - name: b\n    sweep: {name: tee, field: seq_len, values: [16, 32, 48]}\n"))
    plan = load_plan(path)
    assert plan.sweep.field == "batch_size" and plan.rungs[0].sweep is plan.sweep
    assert (plan.rungs[1].sweep.name, plan.rungs[1].sweep.values) == ("tee", [16, 32, 48])
    _, points = request.build_points(run_args("--plan", path))
    assert [(p.rung, p.sweep["name"], p.sweep["field"], p.sweep["value"]) for p in points] == [
        ("a", "batch_size", "batch_size", 2), ("a", "batch_size", "batch_size", 4),
        ("b", "tee", "seq_len", 16), ("b", "tee", "seq_len", 32), ("b", "tee", "seq_len", 48)]
    assert [p.workload["batch_size"] for p in points[:2]] == [2, 4]  # the sweep wins over the rung's set
    # a command-line sweep replaces the plan's
    _, points = request.build_points(run_args("--plan", path, "--sweep", "n_layer=1,3"))
    assert [(p.rung, p.workload["n_layer"]) for p in points] == [("a", 1), ("a", 3), ("b", 1), ("b", 3)]
    assert {p.workload["seq_len"] for p in points} == {64}


@pytest.mark.parametrize("sweep, message", [
    ("sweep: [1, 2]", "expected a mapping with field and values"),
    ("sweep: {field: batch_size}", "expected a mapping with field and values"),
    ("sweep: {field: batch_size, values: []}", "non-empty list"),
    ("sweep: {field: batch_size, values: 8}", "non-empty list"),
    ("sweep: {field: batch_size, values: [8, 1.5]}", "batch_size=1.5: expected an integer"),
    ("sweep: {field: batch_size, values: [8, null]}", "batch_size=None: expected an integer, got null"),
    ("sweep: {field: batch_size, values: [8, 8]}", "given twice"),
    ("sweep: {field: nope, values: [1]}", "unknown workload field 'nope'"),
    ("sweep: {field: batch_size, values: [8], step: 2}", "unknown key(s) step"),
])
def test_bad_plan_sweeps_are_plan_errors(tmp_path, sweep, message):
    with pytest.raises(PlanError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_plan(write_plan(tmp_path, f"name: p\n{sweep}\nrungs: [{{name: a}}]\n"))
    with pytest.raises(PlanError, match=r"rung a: .*" + message.replace("(", r"\(").replace(")", r"\)")):
        load_plan(write_plan(tmp_path, f"name: p\nrungs:\n  - name: a\n    {sweep}\n"))


# ---------------------------------------------------------------- the alignment plan

VOCAB_POW2 = {50257: 1, 50264: 8, 50272: 32, 50288: 16, 50304: 128, 50368: 64, 50432: 256, 50688: 512}
T_POW2 = {1024: 1024, 1023: 1, 1022: 2, 1020: 4, 1016: 8, 1008: 16}


def test_alignment_plan_is_the_seeds_best_rung_with_two_families():
    plan = load_plan("alignment")
    assert [r.name for r in plan.rungs] == ["vocab", "bt-b15", "bt-b16"]
    for r in plan.rungs:
        s = r.settings
        assert (s["precision"], s["attention"], s["sdpa_backend"], s["optimizer"], s["grad_clip"], s["compile"]) == \
            ("bf16", "sdpa", "flash", "fused", 1.0, "default")
    vocab, b15, b16 = plan.rungs
    assert (vocab.sweep.name, vocab.sweep.field) == ("alignment-vocab", "vocab_size")
    assert (b15.sweep.name, b15.sweep.field, b16.sweep.field) == ("alignment-bt", "seq_len", "seq_len")
    assert (b15.settings["batch_size"], b16.settings["batch_size"]) == (15, 16)
    _, points = request.build_points(run_args("--plan", "alignment", "--preset", "gpt2-124m"))
    assert len(points) == 8 + 6 + 6 and all(p.sweep for p in points)
    assert {p.workload["batch_size"] for p in points if p.rung == "vocab"} == {16}  # the preset's B
    assert {p.workload["seq_len"] for p in points if p.rung == "vocab"} == {1024}


def test_alignment_plan_divisibility_claims():
    """The arithmetic in harness/plans/alignment.yaml's comments, recomputed."""
    plan = load_plan("alignment")
    vocab, b15, b16 = plan.rungs
    assert {v: pow2(v) for v in vocab.sweep.values} == VOCAB_POW2
    assert min(vocab.sweep.values) == 50257  # GPT-2's token ids fit every point
    assert 50304 % 128 == 0 and 50304 // 128 == 393 and 50368 % 128 and 50368 % 64 == 0
    # family 1 covers: not a multiple of 8, exactly 8, 16, 32, 64, 128, and beyond
    assert sorted(VOCAB_POW2.values()) == [1, 8, 16, 32, 64, 128, 256, 512]
    # family 2: with B = 15 (odd) B*T has exactly T's power of two: 1 (odd), 2, 4, 8, 16, 1024
    assert {t: pow2(15 * t) for t in b15.sweep.values} == T_POW2
    assert 15 * 1016 % 8 == 0 and 15 * 1016 % 16 and 15 * 1008 % 16 == 0 and 15 * 1008 % 32 and (15 * 1023) % 2
    assert (15 * 1024) % 128 == 0
    # with B = 16 every B*T is a multiple of 16 (M aligned) while T is not: 1023 -> 2^4, 1016 -> 2^7
    assert b16.sweep.values == b15.sweep.values
    assert all(16 * t % 16 == 0 for t in b16.sweep.values)
    assert pow2(16 * 1023) == 16 and pow2(16 * 1016) == 128 and 16 * 1016 == 16256 == 128 * 127


# ---------------------------------------------------------------- the knee


def test_knee_is_the_smallest_value_within_tolerance_of_the_best():
    points = [(16, 100.0), (32, 180.0), (64, 196.0), (128, 199.0), (256, 200.0)]
    assert sweepmod.knee(points) == 64  # 196 >= 0.98 * 200 (exactly at the boundary counts)
    assert sweepmod.knee(points, tolerance=0.0) == 256
    assert sweepmod.knee(points, tolerance=0.01) == 128
    assert sweepmod.knee(points, tolerance=0.5) == 16
    assert sweepmod.knee(list(reversed(points))) == 64  # order of the input does not matter
    assert sweepmod.knee([(8, 50.0), (16, None), (24, 49.5)]) == 8  # points without throughput are ignored
    assert sweepmod.knee([(96, 300.0), (64, 310.0), (128, 290.0)]) == 64  # the best need not be the largest
    assert sweepmod.knee([]) is None and sweepmod.knee([(8, None)]) is None
    with pytest.raises(sweepmod.SweepError):
        sweepmod.knee(points, tolerance=1.0)
    assert "within 2% of the best tokens/s" in sweepmod.knee_definition()


# ---------------------------------------------------------------- rows and table on hand-built records


def point(value, ms, *, field="batch_size", name="bs", rung="fused-adamw-clip", env="nightly", gpu="H100", status="ok",
          used=None, kernel=None, repeat=0):
    w = {field: value} if field in ("batch_size", "seq_len", "vocab_size") else {}
    r = make_record(env=env, gpu=gpu, rung=rung, repeat=repeat, workload=w, status=status,
                    reason=None if status == "ok" else "CUDA out of memory",
                    ms=None if status != "ok" else [5000.0, ms * 1.5] + [ms] * 10,
                    sweep={"name": name, "field": field, "value": value},
                    explain={"kernels": {"available": True, "lm_head_gemm": {"name": kernel}}} if kernel else None)
    r["environment"]["gpu"] = {"name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "memory_bytes": 80 * GIB} if gpu else None
    if used is not None:
        r["summary"]["device_used_bytes" if gpu else "peak_rss_bytes"] = used
    return validate(r)


def test_sweep_rows_group_merge_order_and_mark():
    tokens = 1024  # per unit of B at T=1024
    records = [
        point(64, 105.0, used=40 * GIB), point(32, 60.0, used=22 * GIB), point(96, 146.0, used=58 * GIB),
        point(96, 148.0, used=59 * GIB, repeat=1),  # a repeat: merged (geometric mean tokens/s, largest memory)
        point(128, 0, status="oom"),
        point(32, 60.0, env="torch212", used=23 * GIB),  # another env: another curve
        make_record(env="nightly", gpu="H100"),  # no sweep: ignored
    ]
    rows = sweepmod.sweep_rows(records)
    assert [(r["env"], r["value"]) for r in rows] == [("nightly", 32), ("nightly", 64), ("nightly", 96), ("nightly", 128), ("torch212", 32)]
    r32, r64, r96, r128, other = rows
    assert r96["runs"] == 2 and r96["peak_memory_bytes"] == 59 * GIB and r96["memory_source"] == "device used"
    r96_tps = 96 * tokens / (0.146 * 0.148) ** 0.5  # stats' one rule: the geometric mean of both repeats' tokens/s
    assert r96["tokens_per_s"] == pytest.approx(r96_tps)
    assert r96["is_best"] and r96["is_knee"] and "knee" in r96["mark"] and "best" in r96["mark"]
    assert r64["vs_best"] == pytest.approx((64 * tokens / 0.105) / r96_tps) and not r64["is_knee"]  # 93% of the best
    assert r128["status"] == "oom" and r128["tokens_per_s"] is None and r128["reason"] == "CUDA out of memory"
    assert not r128["is_knee"] and r128["vs_best"] is None
    assert other["is_best"] and other["is_knee"] and other["peak_memory_bytes"] == 23 * GIB
    assert all(r["lm_head_kernel"] == "-" for r in rows)
    assert r32["usable_memory_bytes"] == 80 * GIB
    # a flat tail: the knee is the smallest value within 2% of the best, not the best itself
    flat = [point(b, ms) for b, ms in ((16, 40.0), (32, 70.0), (48, 95.0), (64, 126.0))]
    rows = sweepmod.sweep_rows(flat)
    knee = [r["value"] for r in rows if r["is_knee"]]
    best = [r["value"] for r in rows if r["is_best"]]
    assert best == [64] and knee == [48]  # 48*1024/0.095 = 517k vs 64*1024/0.126 = 520k: within 2%; 32: 468k is not
    assert [r["value"] for r in sweepmod.sweep_rows(flat, tolerance=0.001) if r["is_knee"]] == [64]


def test_sweep_rows_show_the_lm_head_kernel_and_when_it_changed(tmp_path, capsys):
    gemm_a, gemm_b = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1"
    records = [point(v, 50.0, field="vocab_size", name="alignment-vocab", kernel=k)
               for v, k in ((50257, gemm_a), (50264, gemm_a), (50304, gemm_b), (50368, None), (50432, gemm_b), (50688, gemm_a))]
    rows = sweepmod.sweep_rows(records)
    assert [r["value"] for r in rows] == [50257, 50264, 50304, 50368, 50432, 50688]
    assert [r["lm_head_kernel"] for r in rows] == [gemm_a, gemm_a, gemm_b, "-", gemm_b, gemm_a]
    assert [r["kernel_changed"] for r in rows] == [False, False, True, False, False, True]  # '-' neither changes nor resets
    text = compare_sweeps(capsys, tmp_path, records)
    assert text.count("kernel changed") == 3  # two rows and the footnote
    assert gemm_b[:57] in text and "alignment-vocab" in text  # the table shortens a kernel name to 60 characters


def test_runs_of_one_sweep_name_made_with_other_flags_are_another_curve_not_repeats():
    """The one 'same measurement' rule (harness.record.model): a repeat of a sweep value with other requested flags
    (here TF32 on) is not pooled into the value's median; it is a curve of its own."""
    plain = [point(32, 60.0), point(64, 100.0)]
    tf32 = point(32, 30.0, repeat=1)
    tf32["flags"]["requested"] = {"matmul_precision": "high"}
    tf32["flags"]["hash"] = flags_hash(tf32["flags"]["requested"])
    rows = sweepmod.sweep_rows([*plain, tf32])
    assert sorted((r["value"], r["runs"]) for r in rows) == [(32, 1), (32, 1), (64, 1)]
    assert len({r["measurement"] for r in rows}) == 2 and len(sweepmod.sweep_curves([*plain, tf32])) == 2
    assert all(r["runs"] == 1 for r in rows)  # the old key merged the two B=32 runs as repeats (runs == 2)


def test_sweep_curves_for_plots():
    records = [point(64, 100.0, used=40 * GIB), point(32, 60.0, used=22 * GIB), point(128, 0, status="oom")]
    (curve,) = sweepmod.sweep_curves(records)
    assert curve["values"] == [32, 64, 128] and curve["statuses"] == ["ok", "ok", "oom"]
    assert curve["peak_memory_bytes"][:2] == [22 * GIB, 40 * GIB] and curve["tokens_per_s"][2] is None
    assert curve["knee"] == 64 and curve["field"] == "batch_size" and curve["lm_head_kernels"] == [None] * 3
    assert sweepmod.sweep_curves([make_record()]) == []


def compare_sweeps(capsys, tmp_path, records, fmt: str = "text", *extra: str) -> str:
    """What a user sees of these records' sweeps: `python -m harness.compare DIR --table sweeps --format FMT`."""
    from harness import compare

    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    write(folder, records)
    capsys.readouterr()
    assert compare.main([str(folder), "--table", "sweeps", "--format", fmt, *extra]) == 0
    return capsys.readouterr().out


def test_the_sweeps_table_in_every_format(tmp_path, capsys):
    records = [point(64, 100.0, used=40 * GIB), point(32, 60.0, used=22 * GIB), point(128, 0, status="oom")]
    text = compare_sweeps(capsys, tmp_path, records)
    # 13 columns do not fit 120 characters even wrapped: the text lists each row as "column: value; ..."
    rows = [line for line in text.replace("\n  ", " ").splitlines() if line.startswith("- sweep: ")]
    assert [r.split("; ")[4] for r in rows] == ["value: 32", "value: 64", "value: 128"]  # empty cells are left out
    assert [item.split(": ")[0] for item in rows[1].split("; ")] == [
        "- sweep", "rung", "GPU", "env", "value", "status", "runs", "tokens/s", "vs best", "peak MiB", "memory",
        "lm_head kernel", "note"]
    assert "40,960" in text and "655,360" in text and "knee = the smallest value" in text  # 40 GiB; 64*1024/0.1 s
    md = compare_sweeps(capsys, tmp_path, records, "markdown")
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert table[0].startswith("| sweep") and table[1].startswith("|--")
    rows = list(csv.DictReader(io.StringIO(compare_sweeps(capsys, tmp_path, records, "csv"))))
    assert [r["value"] for r in rows] == ["32", "64", "128"] and rows[1]["memory_bytes"] == str(40 * GIB)
    assert rows[2]["tokens_per_s"] == "" and rows[2]["status"] == "oom"
    (table,) = json.loads(compare_sweeps(capsys, tmp_path, records, "json"))["tables"]
    assert [r["value"] for r in table["rows"]] == [32, 64, 128] and table["rows"][1]["mark"] == "best, knee"
    assert "no sweep records" in compare_sweeps(capsys, tmp_path, [make_record()], "markdown")


def test_peak_and_usable_memory_per_device():
    """The one peak-memory rule (RecordView.peak_memory(widest=True)) the sweeps, the batch search and the fastest
    table all read: CUDA device used, else the allocator's peak reserved; CPU peak RSS."""
    cuda = point(64, 100.0)
    cuda["summary"].update(peak_reserved_bytes=30 * GIB)
    assert RecordView(cuda).peak_memory(widest=True) == (30 * GIB, "peak reserved")
    cuda["summary"]["device_used_bytes"] = 31 * GIB
    assert RecordView(cuda).peak_memory(widest=True) == (31 * GIB, "device used")
    assert RecordView(cuda).usable_memory_bytes == 80 * GIB
    cuda["workload"]["memory_budget_gib"] = 40.0
    assert RecordView(cuda).usable_memory_bytes == 40 * GIB
    cpu = point(8, 100.0, gpu=None, used=700 * 2**20)
    cpu["environment"]["host_ram_bytes"] = 16 * GIB
    assert RecordView(cpu).peak_memory(widest=True) == (700 * 2**20, "peak RSS")
    assert RecordView(cpu).usable_memory_bytes == 16 * GIB
    assert RecordView(cpu).device_label.startswith("cpu: ")


# ---------------------------------------------------------------- a real sweep on CPU


@pytest.mark.slow
def test_real_cpu_sweep_one_process_and_record_per_point(tmp_path, capsys):
    out = tmp_path / "results"
    proc = run_module("harness.run", "--rungs", "fp32", "--set", "compile=off", "--set", "profile_steps=0", "--steps", "3",
                       "--warmup-steps", "1", "--sweep", "batch_size=2,6", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "fp32 batch_size=2" in proc.stdout and "fp32 batch_size=6" in proc.stdout
    records = sorted((r for _, r in iter_records([out])), key=lambda r: r["workload"]["batch_size"])
    assert len(records) == 2 and len({r["run_id"] for r in records}) == 2
    assert len(list(out.glob("*.json"))) == 2
    for r, b in zip(records, (2, 6)):
        assert r["status"] == "ok", r["reason"]
        assert r["sweep"] == {"name": "batch_size", "field": "batch_size", "value": b}
        assert r["workload"]["batch_size"] == b and r["summary"]["tokens_per_step"] == b * 64
        assert f"--sweep batch_size={b}" in r["rerun"]["command"]
        assert f"batch_size{b}" in r["run_id"]
    rows = sweepmod.sweep_rows(records)
    assert [(r["value"], r["status"], r["memory_source"]) for r in rows] == [(2, "ok", "peak RSS"), (6, "ok", "peak RSS")]
    assert sum(r["is_knee"] for r in rows) == 1 and all(r["tokens_per_s"] > 0 for r in rows)
    # what the user reads of them (a run this shared machine timed under contention counts too: this is about sweeps)
    text = compare_sweeps(capsys, tmp_path, records, "text", "--include-contended")
    assert "batch_size (batch_size)" in text and "knee" in text and "peak RSS" in text


def test_compare_sweeps_table_keeps_rungs_of_one_sweep_apart_with_knee_and_kernel(tmp_path, capsys):
    """The alignment plan's bt-b15 and bt-b16 share the sweep `alignment-bt`: compare must not merge them,
    and its table shows the knee and the lm_head kernel (and when it changed) per point."""
    from harness import compare

    gemm_a, gemm_b = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "nvjet_tst_128x256_64x4_2x1_v_bz_TNT"
    records = [point(t, ms, field="seq_len", name="alignment-bt", rung=rung, kernel=k)
               for rung, pts in (("bt-b15", ((1008, 90.0, gemm_a), (1016, 80.0, gemm_a), (1024, 79.5, gemm_b))),
                                 ("bt-b16", ((1008, 60.0, gemm_b), (1016, 61.0, gemm_b), (1024, 62.0, gemm_b))))
               for t, ms, k in pts]
    write(tmp_path, records)
    cmp = Compare(load([tmp_path], warn=lambda _line: None))
    table = registry.one(cmp, "sweeps")
    rows = [(r["rung"], r["value"]) for r in table.rows]
    assert rows == [("bt-b15", 1008), ("bt-b15", 1016), ("bt-b15", 1024), ("bt-b16", 1008), ("bt-b16", 1016), ("bt-b16", 1024)]
    marks = {(r["rung"], r["value"]): r["mark"] for r in table.rows}
    # tokens/s is proportional to T / ms: b15 at 1016 (12.70) is within 2% of 1024 (12.88), so the knee is 1016
    assert marks[("bt-b15", 1016)] == "knee" and marks[("bt-b15", 1024)] == "best, kernel changed"
    assert {r["lm_head"] for r in table.rows if r["rung"] == "bt-b16"} == {gemm_b}
    assert any("knee = the smallest value" in n for n in table.notes)
    assert compare.main([str(tmp_path), "--table", "sweeps"]) == 0
    out = capsys.readouterr().out
    assert "bt-b15" in out and "bt-b16" in out and "kernel changed" in out
