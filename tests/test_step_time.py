"""Where the fastest run's step goes, per kernel class, and how far its GEMMs run from the measured matmul peak
(harness.analysis.kernel_split.step_time, harness.analysis.tables.fastest.step_table), on the committed H100/H200
records: each number recomputed here from the record's JSON, not through the code under test."""

from __future__ import annotations

import json

import pytest
from shipped import RESULTS

from harness.analysis import fastest
from harness.analysis.context import Compare
from harness.analysis.dataset import load
from harness.analysis.kernel_split import kernel_split, step_time
from harness.analysis.tables import fastest as fastest_tables

H200_CUDNN = "20261126T203237Z-local-beyond-ladder-sdpa-cudnn-r0-bb3fd1"
H200_CCE = "20261127T130833Z-local-beyond-ladder-lm-head-cce-r0-4ed0ef"  # the lm_head matmuls inside the fused loss
GPU_FOLDERS = sorted(p.name for p in RESULTS.iterdir() if p.name.startswith(("gpu-h200", "gpu-h100")))


def compare(*folders) -> Compare:
    return Compare(load([RESULTS / f if isinstance(f, str) else f for f in folders], warn=lambda line: None))


def raw(run_id: str) -> dict:
    return json.loads(next(RESULTS.glob(f"gpu-*/**/{run_id}.json")).read_text())


def table_of(cmp: Compare, run_id: str):
    g = next(g for g in cmp.ds.groups if run_id in g.ids)
    return fastest_tables.step_table("t", g)


def rows(t) -> dict:
    return {r["what"]: r for r in t.rows}


def value(cell):
    return getattr(cell, "value", cell)


def test_h200_gemms_against_the_measured_peak():
    """The issue's check: 66.0 ms of GEMMs per step for 6 x N x 64 x 1024 FLOPs is ~737 TFLOP/s, ~94% of the H200's
    measured bf16 matmul peak (7.857e14)."""
    r = raw(H200_CUDNN)
    mfu, cats = r["explain"]["mfu"], r["explain"]["kernels"]["by_category"]
    gemm_s = cats["gemm"]["per_step_us"] / 1e6
    flops = 6 * mfu["n_params"] * r["workload"]["batch_size"] * r["workload"]["seq_len"]
    rate, peak = flops / gemm_s, mfu["measured_peak"]["flops"]
    assert round(gemm_s * 1e3, 2) == 65.99 and round(rate / 1e12) == 737 and round(rate / peak, 3) == 0.938

    t = table_of(compare("gpu-h200-20261126-call1"), H200_CUDNN)
    gemm = rows(t)["GEMMs"]
    assert value(gemm["ms"]) == pytest.approx(gemm_s * 1e3)
    assert value(gemm["tflops"]) == pytest.approx(rate) and gemm["tflops"].text() == "737"
    assert value(gemm["of_peak"]) == pytest.approx(rate / peak)
    assert gemm["of_peak"].text() == "93.8% of 786 TFLOP/s (bf16)"
    step = rows(t)[fastest_tables.STEP_ROW]
    assert value(step["ms"]) == pytest.approx(r["summary"]["step_ms_median"])  # 40 timed steps: the summary's median
    assert value(gemm["share"]) == pytest.approx(gemm_s * 1e3 / r["summary"]["step_ms_median"])
    assert any("attention: ms and share only" in n for n in t.notes)
    assert "tflops" not in rows(t)["attention kernels"] and "of_peak" not in rows(t)["attention kernels"]


def test_fused_lm_head_loss_leaves_the_lm_heads_flops_out_of_the_gemms():
    """CCE runs the lm_head matmuls in its own kernels (no lm_head GEMM in the profile): counting them in the GEMMs
    would put the GEMMs at 135% of the peak; without them they run at ~93%."""
    r = raw(H200_CCE)
    w, mfu = r["workload"], r["explain"]["mfu"]
    assert not r["explain"]["kernels"]["vocab_gemms"]
    gemm_s = r["explain"]["kernels"]["by_category"]["gemm"]["per_step_us"] / 1e6
    rate = 6 * (mfu["n_params"] - w["vocab_size"] * w["n_embd"]) * w["batch_size"] * w["seq_len"] / gemm_s
    t = table_of(compare("gpu-h200-20261127-call2"), H200_CCE)
    gemm = rows(t)["GEMMs"]
    assert value(gemm["tflops"]) == pytest.approx(rate) and value(gemm["of_peak"]) == pytest.approx(
        rate / mfu["measured_peak"]["flops"]) and 0.9 < value(gemm["of_peak"]) < 0.95
    assert "fused lm_head loss kernels (Liger/CCE)" in rows(t)
    assert any("left out of the GEMMs' count" in n for n in t.notes)


@pytest.mark.parametrize("folder", GPU_FOLDERS)
def test_rows_add_up_to_the_step(folder):
    """Every profiled GPU group: the classes and the idle row (the lm_head GEMMs aside: part of the GEMMs) add up to
    the run's median timed step, in ms and in shares; the idle row is the step less the record's own kernel sum."""
    cmp = compare(folder)
    profiled = [g for g in cmp.ds.groups if g.profiled_run is not None]
    assert profiled
    for g in profiled:
        t = fastest_tables.step_table("t", g)
        run = raw(g.profiled_run.run_id)
        by_row = rows(t)
        step = value(by_row.pop(fastest_tables.STEP_ROW)["ms"])
        lm_head = by_row.pop("GEMMs: of which the lm_head's")
        assert value(lm_head["ms"]) <= value(by_row["GEMMs"]["ms"])
        assert sum(value(r["ms"]) for r in by_row.values()) == pytest.approx(step)
        assert sum(value(r["share"]) for r in by_row.values()) == pytest.approx(1.0)
        kernel_ms = sum(c["per_step_us"] for c in run["explain"]["kernels"]["by_category"].values()) / 1e3
        assert value(by_row[fastest_tables.IDLE_ROW]["ms"]) == pytest.approx(step - kernel_ms)


def test_the_report_tables_per_gpu():
    """All GPU folders: the H200's fastest found (sdpa-cudnn, 3 runs pooled) is shown from its newest profile, which
    captured the Inductor kernels; the H100's (sdpa-auto) has no profile: 'not measured', no number."""
    cmp = compare(*GPU_FOLDERS, "reference")
    tables = {t.title: t for t in fastest_tables.fastest_tables(cmp)}
    h200 = tables[f"{fastest_tables.STEP_TITLE}h200: sdpa-cudnn (B=64, T=1024), per kernel class"]
    newest = max((r for g in cmp.ds.groups if g.gpu == "NVIDIA H200" and g.label == "sdpa-cudnn" for r in g.records),
                 key=lambda r: r.started_at)
    assert newest.run_id in h200.notes[0] and value(rows(h200)["Inductor-generated (Triton) kernels"]["ms"]) > 30
    h100 = tables[f"{fastest_tables.STEP_TITLE}h100-80g: sdpa-auto (B=64, T=1024), per kernel class"]
    assert rows(h100)["kernel classes"]["ms"] == fastest_tables.NOT_MEASURED
    assert all("tflops" not in r and "of_peak" not in r for r in h100.rows)


def test_the_seed_ladders_best_where_nothing_is_found_beyond_it():
    """gpu-h200 alone: nothing found beyond the seed ladder, whose best run has a kernel profile: the table is its."""
    cmp = compare("gpu-h200", "reference")
    [ov] = [ov for ov in fastest.overviews(cmp) if ov.gpu == "NVIDIA H200"]
    assert ov.shown is None and ov.seed.kernels
    last = fastest_tables.overview_tables(cmp, ov)[-1]
    assert last.title == f"{fastest_tables.STEP_TITLE}h200: {ov.seed.label} ({ov.seed.batch}), per kernel class"
    assert rows(last)["GEMMs"]["of_peak"].value > 0.9


def test_no_measured_peak_says_not_measured(tmp_path):
    """A record whose peak was not measured: the rate is shown, its share of the peak is 'not measured', and why."""
    folder = tmp_path / "h200"
    folder.mkdir()
    r = raw(H200_CUDNN)
    r["explain"]["mfu"].update(measured_peak=None, mfu_measured=None, measured_peak_reason="calibration skipped here")
    (folder / f"{H200_CUDNN}.json").write_text(json.dumps(r))
    t = table_of(compare(folder), H200_CUDNN)
    gemm = rows(t)["GEMMs"]
    assert gemm["of_peak"] == fastest_tables.NOT_MEASURED and gemm["tflops"].text() == "737"
    assert any("not measured (calibration skipped here)" in n for n in t.notes)


def test_no_table_for_a_cpu_run():
    """CPU op self times from several threads neither add up to the step nor leave its idle time: no table, and
    the kernel split says why."""
    cmp = compare("cpu-amd-epyc-2core")
    profiled = [g for g in cmp.ds.groups if g.profiled_run is not None]
    assert profiled and all(fastest_tables.step_table("t", g) is None for g in profiled)
    assert not any(t.title.startswith(fastest_tables.STEP_TITLE) for t in fastest_tables.fastest_tables(cmp))
    split = fastest_tables.split_table("s", profiled[0], profiled[0])
    assert any("no table of where the step's time goes for a CPU run" in n for n in split.notes)


def test_tunes_answer_ends_with_the_step_table(tmp_path):
    """harness.tune's answer shows the table for its best run (hand-built records: no kernel profile)."""
    from test_fastest import analyse, session


    cmp, s = analyse(tmp_path, session())
    tables, _lines = fastest_tables.tune_answer(cmp, s)
    assert tables[-1].title.startswith("Where the step's time goes: ")
    assert rows(tables[-1])["kernel classes"]["ms"] == fastest_tables.NOT_MEASURED



def test_the_mfu_answer_splits_the_same_run_as_the_fastest_section():
    """The report's "how close to the hardware" answer and its fastest section read one split of one run: the same
    run id, the same shares, the GEMMs at the same % of the measured peak (recomputed from the record's JSON)."""
    from harness.analysis import answers_batch
    from harness.analysis.fastest import overviews
    from harness.analysis.kernel_split import step_time

    cmp = compare(*GPU_FOLDERS)
    answer = " ".join(answers_batch.mfu(cmp).sentences)
    for ov in overviews(cmp):
        g = ov.split_group
        st = step_time(g) if g is not None else None
        if st is None:
            continue
        r = raw(st.run.run_id)
        cats, mfu = r["explain"]["kernels"]["by_category"], r["explain"]["mfu"]
        step_us = r["summary"]["step_ms_median"] * 1000
        gemm_share = cats["gemm"]["per_step_us"] / step_us
        rate = 6 * mfu["n_params"] * r["workload"]["batch_size"] * r["workload"]["seq_len"] / (cats["gemm"]["per_step_us"] / 1e6)
        expected = (f"Of its step: GEMMs {gemm_share * 100:.0f}% (at {rate / mfu['measured_peak']['flops'] * 100:.1f}% of the "
                    "measured GEMM peak), ")
        assert expected in answer and f"(run {st.run.run_id}; the fastest section splits it)" in answer
        if "triton" not in cats:  # a profile from before the capture fix: said so, not "0%"
            assert "Inductor's kernels not captured" in answer


def test_one_profiled_run_stands_for_its_group_everywhere():
    """All GPU folders: where a group has several profiled runs, the kernel split ("what explains it") and the
    step-time table read the same run, its newest with a profile, and the split's step time is that run's own
    median (never the group's pooled step beside one run's kernels)."""
    cmp = compare(*GPU_FOLDERS, "reference")
    several = [g for g in cmp.ds.groups if sum(r.kernels_reason == "available" for r in g.records) > 1]
    assert several, "the committed GPU records have a group with several profiled runs"
    for g in several:
        split, st = kernel_split(g), step_time(g)
        newest = max((r for r in g.records if r.kernels_reason == "available"), key=lambda r: r.started_at)
        assert split["run"] is st.run is g.profiled_run and st.run.run_id == newest.run_id
        assert split["step_ms"] == pytest.approx(st.step_us / 1000.0)
        assert split["gemm"] == pytest.approx(st.classes["gemm"])
        k = raw(newest.run_id)["explain"]["kernels"]
        assert g.kernel_categories["gemm"].per_step_us == pytest.approx(k["by_category"]["gemm"]["per_step_us"])


def test_a_group_never_mixes_two_runs_profiles(tmp_path):
    """Two profiled runs of one configuration, the newer without lm_head GEMMs in its profile: the group's lm_head
    GEMMs are the newer run's (none), not the older run's borrowed beside the newer one's categories."""
    folder = tmp_path / "h200"
    folder.mkdir()
    old = raw(H200_CUDNN)
    new = json.loads(json.dumps(old))
    new["run_id"] = H200_CUDNN[:-6] + "aaaaaa"
    new["started_at"] = "2026-11-28T00:00:00Z"
    new["explain"]["kernels"]["vocab_gemms"] = []
    new["explain"]["kernels"]["by_category"]["gemm"]["per_step_us"] *= 0.5
    for r in (old, new):
        (folder / f"{r['run_id']}.json").write_text(json.dumps(r))
    g = next(g for g in compare(folder).ds.groups if len(g.records) == 2)
    assert g.profiled_run.run_id == new["run_id"]
    assert g.vocab_gemms == () and kernel_split(g)["lm_head_gemm"] == 0.0
    assert kernel_split(g)["gemm"] == pytest.approx(new["explain"]["kernels"]["by_category"]["gemm"]["per_step_us"])


def test_the_kernel_mix_marks_bars_whose_profile_missed_inductors_kernels():
    """The kernel-mix chart's bars from profiles taken before the capture fix (compiled on a GPU, no Triton kernel
    in the profile) are marked, and only those: their shares are of the rest."""
    from harness.analysis.series import MISSED_MARK, kernel_mix

    cmp = compare(*GPU_FOLDERS)
    mix = kernel_mix(cmp)
    marked = [shares for _t, bars in mix.cells for label, shares in bars if label.endswith(MISSED_MARK)]
    unmarked = [shares for _t, bars in mix.cells for label, shares in bars if not label.endswith(MISSED_MARK)]
    assert mix.missed == len(marked) > 0 and unmarked
    assert all(not s.get("triton") for s in marked)
    assert all(s.get("triton") for s in unmarked)  # every committed GPU rung is compiled
