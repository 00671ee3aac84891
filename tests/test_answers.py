"""harness.analysis.answers: the users' questions answered from typed results, in the Delta's own words; and the
report's charts compute nothing (no interval, no matching, no worker-side import in harness/report/)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest
from shipped import RESULTS

from harness.analysis import cell_values, questions, stats
from harness.analysis.answer_types import moves, said, span
from harness.analysis.context import Compare
from harness.analysis.dataset import load
from harness.analysis.group import estimate
from harness.analysis.series import throughput_point

ROOT = Path(__file__).resolve().parent.parent
REPORT = sorted((ROOT / "harness" / "report").glob("*.py"))
RUNNER_SIDE = ("harness.evidence", "harness.worker", "harness.runner", "harness.run")


def test_words_come_from_the_delta_verdict():
    assert said(stats.Delta(0.075, 0.072, 0.082, stats.BEYOND)) == "+7.5% [+7.2%, +8.2%] (beyond noise)"
    assert said(stats.Delta(0.438, verdict=stats.SINGLE)) == "+43.8% (single sample)"
    assert said(stats.Delta(0.008, 0.001, 0.018, stats.WITHIN)) == "+0.8% [+0.1%, +1.8%] (within noise)"
    # a verdict the noise rule adds later (issue 27) is written as it is, never dropped
    assert said(stats.Delta(0.03, 0.0, 0.05, "undecided")) == "+3.0% [+0.0%, +5.0%] (undecided)"
    assert said(stats.Delta(0.5, 0.4, 0.6, stats.BEYOND, bounds="range")) == "+50.0% [range +40.0%, +60.0%] (beyond noise)"
    # the same words as compare's tables and verdict (cells.Cell), a tokens/s ratio as pyperf says it
    assert said(stats.Delta(-0.2, -0.25, -0.15, stats.BEYOND, borrowed=True), "faster") == \
        "1.25x slower [1.18x, 1.33x] (beyond noise; noise borrowed)"
    assert span([stats.Delta(0.059, 0.05, 0.06, stats.BEYOND), stats.Delta(0.079, 0.07, 0.08, stats.BEYOND)]) == \
        "+5.9% to +7.9% (all beyond noise)"


def test_a_title_claims_a_direction_only_beyond_noise():
    beyond = [stats.Delta(0.1, 0.09, 0.11, stats.BEYOND)]
    within = [stats.Delta(0.1, -0.01, 0.2, stats.WITHIN)]
    single = [stats.Delta(0.1, verdict=stats.SINGLE)]
    assert moves(beyond, "raises", "lowers") == "raises"
    assert moves(within, "raises", "lowers") == "does not move beyond noise"
    assert moves(single, "raises", "lowers") == "raises (no noise estimate)"
    assert moves(beyond + within, "raises", "lowers") == "changes"


def test_chart_intervals_use_the_stats_rule():
    est = cell_values.throughput([[100.0 + i % 7 for i in range(40)], [103.0 + i % 5 for i in range(40)]], tokens_per_step=1000)
    p = throughput_point(est)
    assert (p.low, p.high) == est.bounds() and p.low < p.value < p.high
    assert throughput_point(cell_values.throughput([[100.0]], 1000)).low is None  # one sample: no interval
    assert throughput_point(cell_values.throughput([[100.0] * 40], 1000)).low is None  # one run, no device spread: none


@pytest.mark.parametrize("path", REPORT, ids=[p.name for p in REPORT])
def test_the_report_renders_and_computes_nothing(path):
    """Rendering reads typed results: no runner-side module, no percentile of its own (stats.interval is the rule)."""
    tree = ast.parse(path.read_text())
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module] + \
               [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if any(m == side or m.startswith(side + ".") for side in RUNNER_SIDE)], path.name
    assert "percentile" not in path.read_text(), path.name


def test_the_gpu_records_answer_with_their_numbers():
    """The committed GPU records: TF32 raises the allocator peak on every measured pair (one run a side: beyond noise on
    the H100, whose three repeated configurations agree exactly and lend their spread; undecided on the H200, where one
    configuration alone was repeated), vocab padding is +5.9..+7.9% here against +56..+64% in the user's log, and the
    questions these records cannot settle give the command that would."""
    from harness.analysis import answers

    cmp = Compare(load([RESULTS / d for d in ("gpu-h100-80gb-hbm3", "gpu-h200", "reference")], warn=lambda line: None))
    by_key = {a.key: a for a in answers.compute(cmp)}
    assert list(by_key) == ["tf32", "vocab", "versions", "batch", "mfu"]
    assert all(a.question.endswith("?") for a in by_key.values())
    # TF32: +9.3% to +19.1% over the three measured pairs, two one run a side and the H100's beyond noise
    tf32 = questions.tf32(cmp)
    deltas = [cmp.mem_delta(a, b) for _c, a, b in tf32.default]
    assert sorted(round(d.value * 100, 1) for d in deltas) == [9.3, 9.3, 19.1]
    assert Counter(d.verdict for d in deltas) == {stats.ONE_RUN: 2, stats.BEYOND: 1}
    assert answers._split_change(tf32.default)[0][0] == "live tensors"  # the part the answer says it is mostly in
    assert "mostly in live tensors" in " ".join(by_key["tf32"].sentences)
    assert by_key["tf32"].command == "python -m harness.run --plan padding --preset gpt2-124m"
    # the title claims "raises" with the caveat (not every pair beyond noise), sized 9-19%, on both GPUs
    assert moves(deltas, "raises", "lowers") == "raises (no noise estimate)"
    assert by_key["tf32"].chart.title.startswith("TF32 raises peak alloc 9-19% (no noise estimate)")
    assert by_key["tf32"].chart.title.endswith(" on h100-80g and h200")
    # vocab: +5.9% to +7.9% here (2 beyond noise, 2 one run a side) against +56.1% to +63.9% in the user's log
    vocab = questions.vocab(cmp)
    here = [cmp.delta(a, b) for _c, a, b in vocab.default]
    assert (round(min(d.value for d in here) * 100, 1), round(max(d.value for d in here) * 100, 1)) == (5.9, 7.9)
    assert Counter(d.verdict for d in here) == {stats.BEYOND: 2, stats.ONE_RUN: 2}
    logged = [stats.ratio(estimate(a), estimate(b), cmp.floor)[0] for a, b in vocab.refs]
    assert (round(min(d.value for d in logged) * 100, 1), round(max(d.value for d in logged) * 100, 1)) == (56.1, 63.9)
    assert {d.verdict for d in logged} == {stats.SINGLE}
    assert by_key["vocab"].command.startswith("nox -s bench-torch212 bench-nightly")
    assert by_key["versions"].command.startswith("python -m harness.bisect")
    assert by_key["batch"].command is None and "the fastest B is 104" in by_key["batch"].sentences[0]
    # the H200: the seed ladder's best (cuDNN attention's one run is +3%, within noise of it, so not the fastest found)
    assert [r["MFU, datasheet"] for r in by_key["mfu"].table] == ["40.9%", "44.8%"]
    keys = answers.key_findings(cmp)
    assert 1 <= len(keys) <= answers.MAX_KEY_FINDINGS and keys == sorted(keys, key=lambda k: -k.size)


def test_the_batch_answer_rests_on_the_sweep_it_reads():
    """The batch answer and its key finding name the H100 batch search's numbers: they cite its runs (they cited the
    user's log alone: the curve's key was matched against one field short, so no run ever matched)."""
    from harness.analysis import answers, findings

    cmp = Compare(load([RESULTS / d for d in ("gpu-h100-80gb-hbm3", "reference")], warn=lambda line: None))
    sweep = {r.run_id for g in cmp.ds.groups for r in g.records if r.sweep and r.sweep.field == "batch_size"}
    sweep |= {r.run_id for r, _gpu, _env in cmp.failed_runs() if r.sweep and r.sweep.field == "batch_size"}
    assert len(sweep) == 5  # B=64, 96, 104 ran; 112 and 128 oom
    batch = next(a for a in answers.compute(cmp) if a.key == "batch")
    assert "the fastest B is 104" in batch.sentences[0] and sweep <= set(batch.records)
    assert sweep == set(batch.headline.records)
    (finding,) = [f for f in findings.batch(cmp) if f.text.startswith("Batch size, ")]
    assert set(finding.records) == sweep


def test_the_h100_padding_calls_say_how_much_is_the_compilers_padding():
    """The budgeted H100 calls of 2026-11-26 ran the padding A/B: TF32's +2.7 GiB is all Inductor's padding (none with
    it off), and the vocab pad's +4.8% at torch's default is +49.4% with the compiler's padding off. Both answers and
    their key findings say so, and the key findings cite the runs with the padding off."""
    from harness.analysis import answers

    folders = ["gpu-h100-80gb-hbm3", *(f"gpu-h100-80gb-hbm3-20261126-call{n}" for n in (1, 2, 3)), "reference"]
    cmp = Compare(load([RESULTS / d for d in folders], warn=lambda line: None))
    by_key = {a.key: a for a in answers.compute(cmp)}
    off = "inductor_shape_padding off, inductor_comprehensive_padding off"
    (tf32,) = questions.tf32(cmp).effects  # +2,782.2 MiB at torch's default, +0.0 MiB with the padding off
    assert tf32.label == "h100-80g B=16" and tf32.setting == off
    assert tf32.default == pytest.approx(2782.2, abs=0.05) and tf32.off == pytest.approx(0.0, abs=0.05)
    assert tf32.sentence("TF32's memory rise", " MiB") in by_key["tf32"].sentences  # the answer says it
    assert by_key["tf32"].command is None  # the A/B is here: no command to get it
    (vocab,) = questions.vocab(cmp).effects  # +4.8% at torch's default, +49.4% off: -44.7 pp is the padding's
    assert vocab.label == "h100-80g B=16" and vocab.setting == off
    assert (round(vocab.default, 1), round(vocab.off, 1), round(vocab.default - vocab.off, 1)) == (4.8, 49.4, -44.7)
    assert vocab.sentence("The vocab-padding speed-up in tokens/s", "%", " pp") in by_key["vocab"].sentences
    heads = {k.text.split(" ")[0]: k for k in answers.key_findings(cmp)}  # the key findings say it too
    assert f"; with {off}: +0 MiB against +2,782 MiB" in heads["TF32"].text
    assert "+49.4% against +4.8% at torch's default on h100-80g B=16" in heads["Vocab"].text
    assert set(tf32.records) <= set(heads["TF32"].records)
    chart = by_key["vocab"].chart  # the gain the compiler's padding hides is a bar of its own, named so
    assert chart.title.startswith("Vocab 50304 speeds up tokens/s 5-8% here")
    assert ", +49% with Inductor's padding off;" in chart.title
    bars = {b.label: b for b in chart.panels[""]}
    assert round(bars["h100-80g B=16 bf16, padding off"].value.value, 1) == 49.4
    assert {"h100-80g B=16 bf16", "h100-80g B=16 sdpa-flash"} <= set(bars)  # one cell's two pairs told apart
    no_pad = {"20261126T102016Z-local-padding-bf16-50257-no-pad-r0-646a3e", "20261126T102055Z-local-padding-bf16-50304-no-pad-r0-808cad"}
    assert no_pad <= set(heads["Vocab"].records) and no_pad <= set(by_key["vocab"].records)


def test_padding_ab_on_two_gpus_is_told_per_gpu():
    """With the H200 calls beside the H100's, each GPU's padding A/B is its own sentence in the answer, and the key
    findings name the cell of each (two unnamed '+0 MiB against ...' clauses could not be told apart)."""
    from harness.analysis import answers

    folders = ["gpu-h100-80gb-hbm3", *(f"gpu-h100-80gb-hbm3-20261126-call{n}" for n in (1, 2, 3)),
               "gpu-h200", *(f"gpu-h200-20261126-call{n}" for n in (1, 2))]
    cmp = Compare(load([RESULTS / d for d in folders], warn=lambda line: None))
    by_key = {a.key: a for a in answers.compute(cmp)}
    tf32 = " ".join(by_key["tf32"].sentences)
    assert "TF32's memory rise on h100-80g / local" in tf32 and "TF32's memory rise on h200 / local" in tf32, tf32
    assert "+5,731.0 MiB with the compiler's padding at torch's default" in tf32  # the H200's: 30,071 -> 35,802 MiB
    effects = {"tf32": questions.tf32(cmp).effects, "vocab": questions.vocab(cmp).effects}  # one A/B per GPU
    assert {k: [(e.label, round(e.default, 1), round(e.off, 1)) for e in v] for k, v in effects.items()} == {
        "tf32": [("h100-80g B=16", 2782.2, 0.0), ("h200 B=16", 5731.0, 0.0)],
        "vocab": [("h100-80g B=16", 4.8, 49.4), ("h200 B=16", 3.9, 56.7)]}
    heads = {k.text.split(" ")[0]: k for k in answers.key_findings(cmp)}  # each clause names its cell
    assert "against +2,782 MiB at torch's default on h100-80g B=16" in heads["TF32"].text
    assert "+0 MiB against +5,731 MiB at torch's default on h200 B=16" in heads["TF32"].text
    assert "+49.4% against +4.8% at torch's default on h100-80g B=16" in heads["Vocab"].text
    assert "+56.7% against +3.9% at torch's default on h200 B=16" in heads["Vocab"].text


def test_a_batch_size_logged_many_times_is_one_point_with_its_median_and_range(tmp_path):
    """A year of the user's log holds one B many times: the batch answer, its chart and the finding give each B once,
    the median of its lines with their count and range (a B logged once reads as before)."""
    import json
    import shutil

    from harness.analysis import answers_batch, findings

    refs = shutil.copytree(RESULTS / "reference", tmp_path / "reference", ignore=shutil.ignore_patterns("*.py"))
    line = json.loads((refs / "ref-000-L061-fused-adamw-clip-b96.json").read_text())
    logged = line["summary"]["tokens_per_s"]
    for i, factor in enumerate((0.98, 1.02)):  # two more lines of B=96, either side of the first
        copy = dict(line, run_id=f"{line['run_id']}-again{i}", summary=dict(line["summary"], tokens_per_s=logged * factor))
        (refs / f"again{i}.json").write_text(json.dumps(copy))
    cmp = Compare(load([refs], warn=lambda _line: None))
    expected = f"B=96 {logged:,.0f} (median of 3 lines, {logged * 0.98:,.0f}-{logged * 1.02:,.0f})"
    answer = answers_batch.batch(cmp)
    (sentence,) = [s for s in answer.sentences if s.startswith("The user's log")]
    assert f"B=64 443,161, {expected}, B=104 448,431 tokens/s." in sentence
    (curve,) = [c for curves in answer.chart.panels.values() for c in curves if getattr(c, "reference", False)]
    assert [p[0] for p in curve.points] == [64, 96, 104] and curve.points[1][1] == pytest.approx(logged)
    (finding,) = [f for f in findings.batch(cmp) if f.text.startswith("Batch size in the user's log")]
    assert f"B=96 {logged:,.0f} tokens/s (median of 3 lines, {logged * 0.98:,.0f}-{logged * 1.02:,.0f}; " in finding.text
    assert "B=64 443,161 tokens/s (48,007 MiB)" in finding.text and finding.text.endswith("best B=96 (single samples).")


def test_a_knob_that_changes_memory_says_so_in_its_finding():
    """The fused lm_head losses on the H200 (2026-11-27) leave tokens/s within noise and cut the allocator's peak by
    about 44%: the knob's finding gives both (it gave tokens/s alone, so the reason to use such a knob was missing)."""
    from harness.analysis import findings
    from harness.analysis.tables.knobs import knob_effects

    cmp = _h200_calls()
    effects = {knob: next(iter(e["cells"].values())) for (knob, _ctx), e in knob_effects(cmp).items()}
    a, b, speed, _boot = effects["lm_head_loss plain -> cce"]  # tokens/s +1.5% within noise, peak alloc -43.8% beyond
    memory = cmp.mem_delta(a, b)
    assert round(speed.value * 100, 1) == 1.5 and speed.verdict == stats.WITHIN and speed.borrowed
    assert round(memory.value * 100, 1) == -43.8 and memory.beyond and memory.borrowed and a.memory[0] == "peak alloc"
    knobs = {f.text.split(" (at ")[0]: f.text for f in findings.compute(cmp) if f.topic == "knobs"}
    cce = knobs["Knob lm_head_loss plain -> cce"]
    assert "tokens/s +1.5% (within noise" in cce and "; peak alloc -43.8% (beyond noise" in cce, cce
    assert "; peak alloc -43.8%" in knobs["Knob lm_head_loss plain -> liger"]
    assert "; peak alloc" not in knobs["Knob sdpa_backend flash -> cudnn (flags: sdpa)"]  # the same peak either way


def _h200_calls() -> Compare:
    folders = ["gpu-h200", *(f"gpu-h200-2026112{d}-call{n}" for d, n in ((6, 1), (6, 2), (7, 1), (7, 2)))]
    return Compare(load([RESULTS / d for d in folders], warn=lambda line: None))


def test_a_plan_of_knobs_against_a_base_is_not_read_as_a_ladder():
    """beyond-ladder and padding are `cumulative: false`: each rung changes one thing against the first. With the
    H200's 2026-11-27 calls in one folder set, neighbouring rungs were paired as knobs ('lm_head_loss liger -> plain
    (flags: inductor_coordinate_descent_tuning)': two changes, named as one) and the ladder finding gave a 'largest
    single step vs the rung before'. Now each rung is read against the base alone."""
    from harness.analysis import findings
    from harness.analysis.series import ladder_charts
    from harness.analysis.tables.ladder import ladder_tables, ladders

    cmp = _h200_calls()
    texts = [f.text for f in findings.compute(cmp)]
    assert not [t for t in texts if t.startswith("Knob lm_head_loss liger -> plain")]
    assert not [t for t in texts if t.startswith("Knob compile reduce-overhead -> default, lm_head_loss")]
    (lad,) = [la for la in ladders(cmp) if la.plan == "beyond-ladder"]  # every rung against the base, none vs its neighbour
    assert not lad.cumulative and lad.steps[0].rung == "best-of-ladder" and lad.batch_size == 64
    assert all(s.vs_previous is None for s in lad.steps)
    against_base = {s.rung: round(s.vs_first.value * 100) for s in lad.steps if s.vs_first is not None}
    assert (min(against_base.values()), max(against_base.values())) == (-5, 4)
    assert max(against_base, key=against_base.get) == "sdpa-auto"
    (beyond,) = [t for t in texts if t.startswith("plan beyond-ladder on h200 / local (B=64")]
    assert ", each rung against best-of-ladder" in beyond
    assert "vs the rung before" not in beyond and "; largest change: " in beyond
    (seed,) = [t for t in texts if t.startswith("plan seed-ladder on h200 / local (B=16")]
    assert "vs the rung before" in seed  # a cumulative ladder keeps its steps
    headers = {t.title: [c[1] for c in t.columns] for t in ladder_tables(cmp)}
    assert "vs previous rung" not in headers["Ladder: plan beyond-ladder on h200 / local (B=64, T=1024)"]
    assert "vs previous rung" in headers["Ladder: plan seed-ladder on h200 / local (B=16, T=1024)"]
    titles = {c.plan: c.title for c in ladder_charts(cmp)}  # the chart's title was 'best-of-ladder -> (last rung)'
    assert titles["beyond-ladder"].startswith("Each rung against best-of-ladder: -5% to +4%")
    assert titles["beyond-ladder"].endswith("(fastest: sdpa-auto)")
    assert titles["seed-ladder"].startswith("fp32 -> fused-adamw-clip: ")
