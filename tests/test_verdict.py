"""The answer first (issue 21): compare's default output is a verdict per pair of envs on one device and pair of devices
under one env, on one screen; devices by short names with one legend line; words that fit the device."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from records_factory import constant_ms, make_record, noisy_ms, write
from shipped import RESULTS, SHIPPED_ROOT

from harness import compare
from harness.analysis import cell_values, noise, noise_model, stats
from harness.analysis.devices import aliases, device_alias, device_word
from harness.analysis.options import CompareOptions, analyse
from harness.analysis.verdict import verdict
from harness.console.render import WIDTH
from harness.console.verdict_text import _times

ROOT = Path(__file__).resolve().parent.parent
SDPA = {"precision": "bf16", "attention": "sdpa", "sdpa_backend": "flash"}
VOCAB = dict(SDPA, vocab_size=50304)


def test_geomean_of_ratios_and_its_interval():
    """Two rungs on one device, every cell 3 runs of one invocation per env: the cells share one pooled spread, so
    the geometric mean's interval is one t with that spread's degrees of freedom, on the mean of the log ratios."""
    runs = {("a", 0): [100, 102, 98], ("b", 0): [200, 205, 197],  # rung 1's runs differ as rung 0's do: no
            ("a", 1): [80, 81.6, 78.4], ("b", 1): [90, 92.25, 88.65]}  # configuration noisier than the other
    cells = {k: noise_model.CellRuns.of(v, [k[0]] * 3) for k, v in runs.items()}
    device = noise.fit({rung: [cells["a", rung], cells["b", rung]] for rung in (0, 1)})
    assert device.alike and device.pooled.df == 8
    est = {k: cell_values.memory(v, device, [k[0]] * 3, config=k[1]) for k, v in runs.items()}
    parts = [stats.ratio(est["a", rung], est["b", rung]) for rung in (0, 1)]
    d = stats.geomean(parts)
    logs = [cells["b", r].mean - cells["a", r].mean for r in (0, 1)]
    se = math.sqrt(device.pooled.var * (4 * (1 / 3)) / 4)  # (1/2)^2 * (1/3 + 1/3) * s^2, twice
    assert d.value == pytest.approx(math.expm1(sum(logs) / 2), rel=1e-12)
    assert d.low == pytest.approx(math.expm1(sum(logs) / 2 - stats.t_critical(8) * se), rel=1e-12)
    assert d.high == pytest.approx(math.expm1(sum(logs) / 2 + stats.t_critical(8) * se), rel=1e-12)
    assert d.beyond and d.low < d.value < d.high
    assert stats.geomean([(stats.Delta(0.5), None)]).verdict == stats.FEW  # no form: no noise estimate
    assert stats.geomean([]).value is None


def test_device_aliases_are_short_unique_and_named_for_what_they_are():
    assert device_alias("NVIDIA H100 80GB HBM3") == "h100-80g" and device_alias("NVIDIA H200") == "h200"
    assert device_alias("NVIDIA A100-SXM4-80GB") == "a100-80g" and device_alias("NVIDIA GeForce RTX 4090") == "rtx-4090"
    assert device_alias("cpu: Intel(R) Xeon(R) Processor @ 2.80GHz [AVX512+avx512_bf16+avx512_fp16; 2 threads]") == \
        "xeon-avx512bf16-2t"
    assert device_alias("cpu: AMD EPYC 7763 64-Core Processor [AVX2, no native bf16; 8 threads]") == "epyc-7763-avx2-8t"
    names = aliases(["cpu: X Gold [AVX2, no native bf16; 2 threads]", "cpu: X Platinum [AVX2, no native bf16; 2 threads]"])
    assert len(set(names.values())) == 2  # two labels never share a name
    assert device_word(["cpu: A", "cpu: B"]) == "CPU" and device_word(["NVIDIA H200"]) == "GPU"
    assert device_word(["cpu: A", "NVIDIA H200"]) == "device"


@pytest.fixture
def two_envs_two_gpus(tmp_path):
    """Known ratios: nightly vs torch212 on the H100 is 2x at sdpa-flash and 1.125x at vocab-50304."""
    ms = {("H100", "torch212"): (200.0, 90.0), ("H100", "nightly"): (100.0, 80.0),
          ("A100", "torch212"): (300.0, 290.0), ("A100", "nightly"): (300.0, 290.0)}
    records = []
    for (gpu, env), (a, b) in ms.items():
        for rep in range(2):
            records.append(make_record(env=env, gpu=gpu, rung="sdpa-flash", repeat=rep, workload=SDPA,
                                       ms=noisy_ms(a, 0.01, seed=rep), memory=(20 if env == "torch212" else 16) * 2**30))
            records.append(make_record(env=env, gpu=gpu, rung="vocab-50304", repeat=rep, workload=VOCAB,
                                       ms=noisy_ms(b, 0.01, seed=rep + 2), memory=(20 if env == "torch212" else 16) * 2**30))
    return write(tmp_path / "runs", records)


def test_the_verdict_pairs_envs_per_device_and_devices_per_env(two_envs_two_gpus):
    _ds, cx = analyse(CompareOptions((two_envs_two_gpus,)), lambda line: None)
    v = verdict(cx)
    envs = {(cx.name(p.same), p.base, p.other): p for p in v.pairs if p.across == "env"}
    h100 = envs[("h100-80g", "torch212", "nightly")]
    assert len(h100.rows) == 2 and h100.speed.value == pytest.approx(math.sqrt(2.0 * 90 / 80) - 1, rel=0.02)
    assert h100.speed.beyond and h100.changed == 2 and h100.most.label == "sdpa-flash"
    assert h100.memory.value == pytest.approx(-0.2) and h100.memory_metric == "peak alloc"
    a100 = envs[("a100-80g", "torch212", "nightly")]
    assert a100.speed.verdict == stats.WITHIN and "(within noise: could detect" in _times(a100.speed)
    devices = {(p.same, cx.name(p.base), cx.name(p.other)) for p in v.pairs if p.across == "gpu"}
    assert devices == {("torch212", "a100-80g", "h100-80g"), ("nightly", "a100-80g", "h100-80g")}


def _default_output(*paths, cwd=ROOT) -> tuple[list[str], str]:
    proc = subprocess.run([sys.executable, "-m", "harness.compare", *map(str, paths)], cwd=cwd, capture_output=True,
                          text=True, check=True, env={"PATH": "/usr/bin:/bin", "COLUMNS": "120", "PYTHONPATH": str(ROOT)})
    return proc.stdout.splitlines(), proc.stderr


def test_compare_on_the_shipped_records_fits_one_screen_verdict_first():
    lines, _err = _default_output("results", cwd=SHIPPED_ROOT)  # as at a checkout's root, the shipped records only
    # every shipped folder at once (six devices, 24 envs, two models): 76 lines since the models' records came
    assert len(lines) <= 80, "\n".join(lines)
    assert [line for line in lines if len(line) > WIDTH] == []
    verdict_at = next(i for i, line in enumerate(lines) if line.startswith("Verdict:"))
    assert lines[verdict_at - 1] == "" and "" not in lines[:verdict_at - 1]  # after the counts and the envs only
    assert not any(line.startswith("==") for line in lines)  # no table unless asked for
    assert any(line.startswith("Devices: ") and "h100-80g = NVIDIA H100 80GB HBM3" in line for line in lines)
    assert lines[-2].startswith("More: every table with --detail")
    # the cross-GPU verdict is shown, not pushed into "... and N more" by the CPU landscape measured at two thread
    # counts, whose 14 per-env device pairs are one block
    assert any(line.startswith("local (torch 2.11.0+cu130): h200 vs h100-80g: 1.13x faster") for line in lines)
    assert sum(line.startswith("xeon-avx512bf16-2t vs xeon-avx512bf16-1t under 14 envs") for line in lines) == 1
    assert not any(line.startswith("... and") for line in lines if "more pair(s)" in line)


def test_every_table_fits_the_width_on_the_shipped_records(capsys):
    """--detail on every shipped record: each line fits WIDTH (cells wrap; a table with too many columns is listed
    row by row), and no record's number is cut: every tokens/s of the H100 ladder is still there, whole."""
    assert compare.main([str(RESULTS), "--detail"]) == 0
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if len(line) > WIDTH] == []
    assert all(n in out for n in ("50,131", "148,286", "277,331", "384,851", "414,290", "431,878"))  # B=16: the first three pool the padding calls
    # the sweeps table, too wide for its columns, is listed row by row: a row's fields on one line
    assert any(line.startswith("- sweep: batch-search (batch_size); rung: fused-adamw-clip")
               and "; device: h100-80g;" in line for line in out.splitlines())


def test_many_builds_on_one_device_are_one_series_block(tmp_path):
    """A bisect's or landscape's folder (one rung under many torch builds on one device) is said in one block: the
    newest, the fastest and the slowest build against the oldest, not a block per build."""
    ms = {"2.1.2": 100, "2.2.2": 99, "2.3.1": 80, "2.4.1": 60, "2.5.1": 62, "2.6.0": 70}
    recs = [make_record(env=f"torch{v.replace('.', '')}", gpu="H100", rung="bf16", workload={"precision": "bf16"},
                        torch_version=v, repeat=i, ms=noisy_ms(m, 0.01, seed=i + int(m)))
            for v, m in ms.items() for i in range(2)]
    lines, _err = _default_output(write(tmp_path / "r", recs))
    head = next(i for i, line in enumerate(lines) if "5 torch builds against torch212 (torch 2.1.2)" in line)
    assert "newest torch260 (torch 2.6.0) 1.44x faster" in lines[head]
    assert "fastest torch241 (torch 2.4.1) 1.67x faster" in " ".join(lines[head + 1:head + 3])
    assert "slowest torch222 (torch 2.2.2) 1.01x faster" in " ".join(lines[head + 1:head + 3])
    assert sum(line.startswith("h100-80g: torch") for line in lines) == 0  # no block per build


def test_fit_widths_narrows_the_widest_and_keeps_words_whole():
    from harness.analysis.cells import Table
    from harness.console.render import fit_widths, render_text

    headers = ["rung", "why"]
    rows = [["fused-adamw-clip", "status oom: " + "CUDA out of memory, tried to allocate 12.27 GiB " * 5]]
    assert fit_widths(headers, [["bf16", "fine"]]) is None
    cells, heads = fit_widths(headers, rows)
    assert cells[0] is None and 16 + 2 + cells[1] <= WIDTH and heads[1] == cells[1] - 2
    assert fit_widths([f"column {i}" for i in range(20)], [["x" * 30] * 20]) == []  # cannot fit: row by row
    text = render_text([Table("t", "t", [("rung", "rung"), ("why", "why")], [dict(zip(["rung", "why"], rows[0]))])], [], [])
    assert max(map(len, text.splitlines())) <= WIDTH and "fused-adamw-clip" in text and text.count("CUDA out of") == 5


def test_a_name_too_long_for_its_column_breaks_after_an_underscore_not_inside_a_word():
    """A knob's flag names (inductor_comprehensive_padding: 30 characters) in a column narrowed to 20 broke anywhere
    ('inductor_compreh' / 'ensive_padding'); a number's '+' and a name that fits stay whole."""
    from harness.console.render import _fill

    knob = "flags: inductor_comprehensive_padding null -> off, cudnn_allow_tf32 on"
    lines = _fill(knob, 20).splitlines()
    assert lines == ["flags: inductor_", "comprehensive_", "padding null -> off,", "cudnn_allow_tf32 on"], lines
    assert _fill("best-of-ladder+fused-adamw-clip (B=64, T=1024)", 20).splitlines()[:2] == ["best-of-ladder+", "fused-adamw-clip"]
    # an interval is read whole: never broken at its inner space, its column not narrowed below it
    assert _fill("+599.4% [+547.7%, +655.3%] (beyond noise; noise borrowed)", 18).splitlines()[:2] == \
        ["+599.4%", "[+547.7%, +655.3%]"]
    assert _fill("x" * 25, 20).splitlines() == ["x" * 20, "x" * 5]  # a piece with no place to break is still cut


def test_detail_and_table_are_one_flag_away(two_envs_two_gpus, capsys):
    assert compare.main([str(two_envs_two_gpus), "--table", "versions"]) == 0
    out = capsys.readouterr().out
    assert "== Cross-version" in out and "Verdict:" not in out
    assert compare.main([str(two_envs_two_gpus), "--detail"]) == 0
    out = capsys.readouterr().out
    assert out.index("Verdict:") < out.index("== Ladder") < out.index("== Cross-version") < out.index("Significance:")


def test_words_fit_the_device(tmp_path, capsys):
    """CPU-only records: 'CPU' in headers, no CUDA library rows, Inductor's C++ kernels not called triton."""
    top = [{"name": "cpp_fused_add_0", "category": "triton", "per_step_us": 50.0, "share": 0.5}]
    explain = {"kernels": {"available": True, "device": "cpu", "by_category": {"triton": {"per_step_us": 50.0, "share": 0.5},
                                                                               "gemm": {"per_step_us": 50.0, "share": 0.5}},
                           "top": top}}
    recs = []
    for env, version in (("torch212", "2.1.2+cu121"), ("latest", "2.15.0+cu132")):
        r = make_record(env=env, gpu=None, rung="fp32", ms=constant_ms(100.0), torch_version=version,
                        explain={**explain, "libraries": {"mapped": {"cublas": {"version": version[-3:]}}}})
        recs.append(r)
    path = write(tmp_path / "cpu", recs)
    assert compare.main([str(path), "--table", "versions", "--table", "libraries", "--table", "underneath"]) == 0
    out = capsys.readouterr().out
    assert "same CPU and rung" in out and "GPU" not in out
    assert "cublas" not in out and "torch.cuda" not in out
    _ds, cx = analyse(CompareOptions((path,)), lambda line: None)
    assert set(cx.ds.groups[0].kernel_categories) == {"inductor-cpp", "gemm"}


def test_a_device_pair_under_many_envs_is_one_block_and_nothing_else_is_not_nothing_compared():
    """Only device pairs, one pair of devices under 6 envs: one series block, and no "Nothing compared" beside it
    (the check once looked at the env series only)."""
    from collections import Counter

    from harness.analysis.verdict import Pair, Verdict
    from harness.console.verdict_text import verdict_blocks

    pairs = []
    for i in range(6):
        p = Pair("gpu", f"env{i}", "cpu-1t", "cpu-2t", rows=[object()])
        p.speed = stats.Delta(0.5 + i / 10, 0.2, 0.9, stats.BEYOND)
        pairs.append(p)
    v = Verdict(pairs, 0, [], Counter(), [], Counter(), [("cpu-1t", "cpu 1t"), ("cpu-2t", "cpu 2t")])
    heads = [head for head, _details in verdict_blocks(v, lambda d: d, "CPU", {})]
    (block,) = [h for h in heads if h.startswith("cpu-2t vs cpu-1t under 6 envs (env0 .. env5)")]
    assert "from 1.50x faster" in block  # the slowest of the six, p.speed 0.5: named first
    assert not any(h.startswith("Nothing compared") for h in heads)


def test_the_key_findings_say_a_pair_of_devices_under_many_envs_once():
    """The two CPU landscapes (1 and 2 threads, 14 builds both measured): one key finding for the thread counts, not a
    finding per build crowding the other findings out."""
    from harness.analysis.answers import key_findings
    from harness.analysis.options import CompareOptions, analyse

    results = RESULTS
    _ds, cx = analyse(CompareOptions((results / "cpu-bisect" / "records", results / "cpu-bisect-2t" / "records")),
                      lambda line: None)
    texts = [k.text for k in key_findings(cx)]
    about_threads = [t for t in texts if "against xeon-avx512bf16-1t" in t]
    assert len(about_threads) == 1 and "under 14 envs" in about_threads[0] and "beyond noise under 14 of 14" in about_threads[0]
