"""harness.report renders Markdown, a self-contained HTML page and PNG charts from records (no torch)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
from records_factory import constant_ms, make_record, rich_dataset, write
from shipped import RESULTS

from harness.report import __main__ as report

ROOT = Path(__file__).resolve().parent.parent
CHARTS = ("ladder-seed-ladder.png", "answer-vocab.png", "answer-versions.png", "answer-batch.png", "cross-version.png",
          "cross-gpu.png", "factors.png", "memory-split.png", "kernel-mix.png", "sweep-0.png", "sweep-1.png")
QUESTIONS = ("Does TF32 change memory, and why?", "Why did padding the vocabulary 50257 -> 50304 give 30-40% on an H100",
             "Why did torch nightly use 30 GB less and run faster than 2.1.2", "Should B go past 64",
             "How close to the hardware is this")


@pytest.fixture(scope="module")
def rich(tmp_path_factory):
    """The full report from a synthetic 2 GPUs x 2 envs set plus the user's reference records."""
    base = tmp_path_factory.mktemp("rich")
    records = write(base / "records", rich_dataset())
    out = base / "report"
    assert report.main([str(records), str(RESULTS / "reference"), "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def rich_cmp(rich):
    """The Compare the rich report is made from: its typed results, which the report's sentences word."""
    return compare_of(rich.parent / "records", RESULTS / "reference")


def compare_of(*paths):
    from harness.analysis.context import Compare
    from harness.analysis.dataset import load

    return Compare(load(list(paths), warn=lambda _line: None))


def test_all_outputs_written(rich):
    for name in ("report.md", "report.html", *CHARTS):
        assert (rich / name).is_file(), name


def test_charts_are_real_pictures(rich):
    for name in CHARTS:
        data = (rich / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", name
        pixels = matplotlib.image.imread(rich / name)
        assert pixels.shape[0] > 200 and pixels.shape[1] > 400, name
        # not an empty canvas: a good part of it is neither white nor one flat colour
        rgb = pixels[..., :3].reshape(-1, 3)
        assert (rgb.min(axis=1) < 0.9).mean() > 0.02, name
        packed = (rgb * 15).astype(int) @ np.array([256, 16, 1])
        assert len(np.unique(packed)) > 8, name


def test_html_is_self_contained(rich):
    text = (rich / "report.html").read_text()
    images = re.findall(r"<img [^>]*src='([^']+)'", text)
    assert len(images) == len(CHARTS)
    assert all(src.startswith("data:image/png;base64,") for src in images)
    # no link out of the page, in its text and markup: the images' base64 may hold "http" by chance (1.5 MB of it)
    markup = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]*", "", text)
    assert "<table>" in markup and "http" not in markup.replace("http-equiv", "")


def test_the_answers_come_first_and_the_appendix_is_folded(rich):
    """Key findings (at most 8, numbered), the seed ladder's chart, one section per user question (headed by the
    question, ending in '?'), the appendix folded, environments and method last."""
    md = (rich / "report.md").read_text()
    heads = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    assert heads[:2] == ["Key findings", "The seed ladder: the user's numbers beside ours"]
    for head, question in zip(heads[2:7], QUESTIONS, strict=True):
        assert head.startswith(question) and head.endswith("?"), head
    assert heads[-2:] == ["Environments", "Method"]
    assert md.index("ladder-seed-ladder.png") < md.index("## Does TF32")
    keys = md.split("## Key findings")[1].split("## ")[0]
    numbered = [line for line in keys.splitlines() if re.match(r"\d+\. ", line)]
    assert 1 <= len(numbered) <= 8
    appendix = md.split("<details><summary>Appendix")[1].split("## Environments")[0]
    assert appendix.rstrip().endswith("</details>") and "## A2. Findings" in appendix
    html = (rich / "report.html").read_text()
    assert "<meta name='viewport' content='width=device-width," in html and "initial-scale=1'>" in html
    assert "<details class='appendix'><summary>Appendix" in html


def test_a_question_the_records_cannot_answer_gives_the_command(rich):
    """rich has no padding A/B: the TF32 section says so and gives the command; the 2x2 exists, so the vocab section
    answers GPU-or-version with it."""
    md = (rich / "report.md").read_text()
    tf32 = md.split("## Does TF32 change memory, and why?")[1].split("\n## ")[0]
    assert "What would answer it: " in tf32 and "`python -m harness.run --plan padding --preset gpt2-124m`" in tf32
    vocab = md.split("## Why did padding the vocabulary")[1].split("\n## ")[0]
    assert "Split over 2 GPUs x 2 torch builds: " in vocab and "What would answer it" not in vocab
    assert "(all single sample)" in vocab  # the user's log: never a bare win


def test_markdown_sections_and_computed_findings(rich, rich_cmp):
    from harness.analysis import questions, stats
    from harness.analysis.group import estimate, run_ids
    from harness.analysis.tables.knobs import knob_effects, splits

    md = (rich / "report.md").read_text()
    for section in ("Findings", "The ladder", "Torch versions and GPUs", "Knob effects",
                    "Memory", "What changed underneath", "Sweeps", "Loss parity", "The user's own numbers", "Left out"):
        assert f". {section}" in md, section
    for chart in CHARTS:
        assert f"]({chart})" in md
    findings = _findings(md)
    # the knob effects and the 2x2 split are stated with numbers computed from the records
    vocab = {(rich_cmp.name(gpu), env): d for (knob, _ctx), e in knob_effects(rich_cmp).items()
             if knob == "vocab_size 50257 -> 50304" for (gpu, env), (_a, _b, d, _boot) in e["cells"].items()}
    assert vocab["a100-80g", "torch212"].value > 0 and vocab["a100-80g", "torch212"].beyond
    assert "- Knob vocab_size 50257 -> 50304 (at " in findings
    (split,) = [r for r in splits(rich_cmp).rows if r.knob == "vocab_size 50257 -> 50304"]
    assert split.gpu_factor.beyond and split.version_factor.beyond
    assert "GPU factor " in findings and "version factor " in findings
    # the user's two logged builds, found in the records (no statement about the seeds is written in): 2.1.2 ->
    # nightly, tokens/s 308,130 -> 443,161 (+43.8%, single sample), device used 77,425 -> 48,007 MiB (-38.0%)
    (logged,) = questions.versions(rich_cmp)
    (ta, ra), (tb, rb) = logged.builds
    d = stats.ratio(estimate(ra), estimate(rb))[0]
    assert (ta, tb, logged.rung, logged.batch_size, logged.gpu) == ("2.1.2", "nightly", "fused-adamw-clip", 64, "H100/H800 class")
    assert (round(estimate(ra).point), round(estimate(rb).point), round(d.value * 100, 1)) == (308130, 443161, 43.8)
    assert d.verdict == stats.SINGLE and ra.memory[0] == "device used"
    assert (round(ra.memory_bytes / 2**20), round(rb.memory_bytes / 2**20)) == (77425, 48007)
    assert round((rb.memory_bytes / ra.memory_bytes - 1) * 100, 1) == -38.0
    assert "torch 2.1.2 -> nightly: tokens/s 308,130 -> 443,161" in findings
    # each finding cites the records it rests on
    ((fp32, tf32),) = questions.tf32(rich_cmp).refs
    ids = run_ids(fp32, tf32)
    assert ids == ["ref-000-L005-fp32-b16", "ref-000-L011-tf32-b16"]
    line = next(x for x in findings.splitlines() if x.startswith("- TF32 on (fp32 -> tf32) in the user's log"))
    assert line.endswith(f" <sub>records: {', '.join(ids)}</sub>")
    assert "Significance:" in md and "the run is the unit of noise" in md
    assert "status oom: CUDA out of memory" in md  # the OOM sweep point is reported, not dropped


def test_cpu_only_report_skips_empty_charts(tmp_path):
    """CPU records have no memory split, kernel profile, second env or sweep: those charts are not drawn."""
    recs = [make_record(env="local", gpu=None, rung=rung, workload=w, ms=constant_ms(ms), memory=600 * 2**20,
                        torch_version="2.5.1+cpu") for rung, w, ms in
            (("fp32", {}, 200.0), ("tf32", {"precision": "tf32"}, 190.0), ("bf16", {"precision": "bf16"}, 120.0))]
    out = tmp_path / "out"
    assert report.main([str(write(tmp_path / "r", recs)), "-o", str(out)]) == 0
    assert sorted(p.name for p in out.glob("*.png")) == ["answer-tf32.png", "ladder-seed-ladder.png"]
    md = (out / "report.md").read_text()
    for sentence in ("No cross-version heatmap", "No cross-CPU chart", "No 2x2 chart", "No memory-split chart",
                     "No kernel-mix chart", "No sweep chart"):
        assert sentence in md
    assert "test / local" in md and "test = cpu: Test CPU @ 2GHz" in md and "peak RSS MiB" in md
    # 200 ms -> 120 ms, B=16, T=1024, one run each and no other run on this CPU: the spread is unknown, never a win
    from harness.analysis import stats
    from harness.analysis.tables.ladder import ladders

    (ladder,) = ladders(compare_of(tmp_path / "r"))
    first, last = ladder.steps[0], ladder.steps[-1]
    assert (first.rung, round(first.tokens_per_s), last.rung, round(last.tokens_per_s)) == ("fp32", 81920, "bf16", 136533)
    assert round(last.vs_first.value + 1, 2) == 1.67 and last.vs_first.verdict == stats.ONE_RUN
    assert "136,533 tokens/s (1.67x (one run a side, noise unknown))" in md


def test_report_with_every_run_contended(tmp_path):
    """Every run left out as contended: no device has a fastest table, and the report still renders (it raised
    KeyError 'fastest' on a CPU stand-in of harness.gpu_check)."""
    rec = make_record(env="local", gpu=None, rung="fp32", ms=constant_ms(200.0), torch_version="2.5.1+cpu")
    rec["contention"] = {"contended": True, "reason": "other processes kept 1.6 of the 2 usable CPU(s) busy"}
    out = tmp_path / "out"
    assert report.main([str(write(tmp_path / "r", [rec])), "-o", str(out)]) == 0
    assert "Fastest found vs the user's best vs the peer" in (out / "report.md").read_text()


def test_report_needs_an_output_dir(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        report.main([str(tmp_path)])
    assert exc.value.code == 2


def _findings(md: str) -> str:
    return md.split("## A2. Findings")[1].split("## A3.")[0]


def test_2x2_finding_says_when_the_interaction_is_larger_than_both_factors(rich, rich_cmp):
    """rich: vocab 50304 gives +54.7% on H100/torch212 and +2.6..+5.6% elsewhere: the interaction (-49 pp) is larger
    than the GPU (+27 pp) and version (-25 pp) factors. The old finding said 'the larger is the GPU'."""
    from harness.analysis.tables.knobs import splits

    (split,) = [r for r in splits(rich_cmp).rows if r.knob == "vocab_size 50257 -> 50304"]
    pp = [round(d.value * 100) for d in (split.interaction, split.gpu_factor, split.version_factor)]
    assert pp == [-49, 27, -25] and split.interaction_dominates
    assert (rich_cmp.name(split.standout[0]), split.standout[1]) == ("h100-80g", "torch212")
    here = split.cells[split.standout]
    others = sorted(d.value for cell, d in split.cells.items() if cell != split.standout)
    assert round(here.value * 100, 1) == 54.7 and here.beyond
    assert (round(others[0] * 100, 1), round(others[-1] * 100, 1)) == (2.6, 5.6)
    findings = _findings((rich / "report.md").read_text())
    line = next(x for x in findings.splitlines() if x.startswith("- vocab_size 50257 -> 50304 (at"))
    assert "the interaction is larger than both factors" in line and "h100-80g together with torch212" in line
    assert "the larger is" not in line
    sdpa = next(x for x in findings.splitlines() if x.startswith("- attention naive -> sdpa"))
    assert "both are beyond noise; the larger is the GPU" in sdpa  # there the GPU factor (+16.5 pp) is the larger


def test_report_2x2_uses_the_same_comparability_rule(tmp_path):
    """nightly's runs under another frozen flag: no 2x2 split in the report either; it says why."""
    recs = []
    for gpu, env, a, b in (("H100", "torch212", 150.0, 100.0), ("H100", "nightly", 105.0, 100.0),
                           ("A100", "torch212", 204.0, 200.0), ("A100", "nightly", 206.0, 200.0)):
        flags = {"matmul_precision": "high", "cudnn_benchmark": True} if env == "nightly" else None
        for rep in range(2):
            recs.append(make_record(env=env, gpu=gpu, rung="sdpa-flash", repeat=rep, ms=constant_ms(a), flags=flags,
                                    workload={"precision": "bf16", "attention": "sdpa", "sdpa_backend": "flash"}))
            recs.append(make_record(env=env, gpu=gpu, rung="vocab-50304", repeat=rep, ms=constant_ms(b), flags=flags,
                                    workload={"precision": "bf16", "attention": "sdpa", "sdpa_backend": "flash", "vocab_size": 50304}))
    out = tmp_path / "out"
    assert report.main([str(write(tmp_path / "r", recs)), "-o", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "GPU factor" not in _findings(md) and not (out / "factors.png").exists()
    from harness.analysis.tables.knobs import splits

    unsplit = splits(compare_of(tmp_path / "r"))
    assert unsplit.rows == []
    (note,) = [n for n in unsplit.notes if n.startswith("not split: ")]
    assert note.startswith("not split: vocab_size 50257 -> 50304 at sdpa-flash (B=16")
    assert "not split: vocab_size 50257 -> 50304" in md and "cudnn_benchmark=True" in md


def test_the_thousands_axis_tells_a_cpus_ticks_apart():
    """A CPU's ladder runs at 800-1,800 tokens/s: its ticks once all read 0, 1 or 2 (whole thousands)."""
    from harness.report.figures import THOUSANDS

    assert [THOUSANDS(v, 0) for v in (0, 200, 250, 1000, 1400, 150_000, 1_200_000)] == \
        ["0", "0.2", "0.25", "1", "1.4", "150", "1,200"]


def test_a_year_of_results_reads_as_a_report_not_a_log():
    """At a year's scale a table has thousands of rows and a section rests on thousands of runs: the report shows a
    table's first SHOWN_ROWS rows and SHOWN_NOTES notes, says how many more and which compare command lists them all,
    and cites a section's first CITED_IDS runs and how many more; a smaller table is shown whole."""
    from harness.analysis.cells import Table
    from harness.report import document

    big = Table("reference", "big", [("a", "a")], rows=[{"a": f"row{i}"} for i in range(250)],
                notes=[f"note {i}" for i in range(45)])
    small = Table("answer-x", "small", [("a", "a")], rows=[{"a": "only"}], notes=["one note"])
    doc = document.Doc(every_row=lambda name: f"python -m harness.compare 'my results' --table {name} --format csv")
    doc.table(big)
    doc.table(small)
    doc.cite([f"run{i}" for i in range(document.CITED_IDS + 7)])
    for text in (document.to_markdown(doc), document.to_html(doc)):
        assert "row99" in text and "row100" not in text and "only" in text and "one note" in text
        assert "note 29" in text and "note 30" not in text and "and 15 more notes" in text
        assert f"The first {document.SHOWN_ROWS} of its 250 rows" in text
        every_row = doc.every_row("reference")  # the command that lists them all, as Markdown or HTML writes it
        assert every_row in text or html.escape(every_row) in text
        assert f"run{document.CITED_IDS - 1}," not in text and "and 7 more" in text
    assert len(big.rows) == 250 and len(big.notes) == 45  # the table itself is left whole for its other readers


def test_a_rung_that_fails_every_night_is_one_row_of_a_ladder(tmp_path):
    """A ladder's runs of one rung that gave no number for one reason are one row and one note counting them; a cell
    of many pooled runs names its first LISTED_RUNS and counts the rest."""
    from harness.analysis.context import Compare
    from harness.analysis.dataset import load
    from harness.analysis.group import LISTED_RUNS
    from harness.analysis.tables.ladder import ladder_tables

    records = [make_record(rung="fp32", repeat=0) for _night in range(LISTED_RUNS + 4)]  # one repeat 0 a night
    records += [make_record(rung="bf16", repeat=0, status="error", reason="out of memory") for _night in range(5)]
    (table,) = ladder_tables(Compare(load([write(tmp_path, records)], warn=lambda _line: None)))
    bf16 = [row for row in table.rows if row["rung"] == "bf16"]
    assert len(bf16) == 1 and bf16[0]["runs"] == "error (5 runs)" and len(bf16[0]["run_ids"]) == 5
    assert [n for n in table.notes if n.startswith("bf16")] == ["bf16: error: out of memory (5 runs)"]
    pooled = next(n for n in table.notes if "pooled" in n)
    assert pooled.count("(plan seed-ladder repeat 0)") == LISTED_RUNS
    assert pooled.endswith("; and 4 more (--export-parquet lists every run)")


def test_a_ladder_chart_keeps_gpu_and_cpu_series_apart():
    """A GPU's hundreds of thousands of tokens/s and a CPU's few thousand in one part leave the CPU bars flat: the
    parts of a ladder chart hold the GPUs' series (the user's log with them) apart from the CPUs', each part its own
    scale, and say which series of all each holds."""
    from harness.analysis.series import LadderChart, Point, Series
    from harness.report import charts

    def series(label: str, tokens: float, on_cpu: bool = False, reference: bool = False) -> Series:
        return Series(label, reference, {"fp32": Point(tokens, None, None), "bf16": Point(2 * tokens, None, None)},
                      on_cpu=on_cpu)

    whole = LadderChart("seed-ladder", ["fp32", "bf16"], [
        series("h100 / local", 50_000), series("epyc / latest", 1_500, on_cpu=True), series("h200 / local", 52_000),
        series("xeon / latest", 1_200, on_cpu=True), series("user's log", 48_000, reference=True)])
    drawn = charts.ladder_charts([whole])
    assert [alt.split(") (")[1].split(")")[0] for _name, _png, alt, _narrow in drawn] == ["series 1-3 of 5",
                                                                                          "series 4-5 of 5"]
    assert all("GPUs apart from CPUs" in alt for _name, _png, alt, _narrow in drawn)


def test_a_long_rung_name_stays_clear_of_the_ladder_charts_legend(monkeypatch):
    """The legend stood at a fixed distance under the axes, and the H200's rotated 'compile-max-autotune-no-cudagraphs'
    reached below it (the report of 2026-11-27): the legend now starts under the lowest tick label."""
    from harness.analysis.series import LadderChart, Point, Series
    from harness.report import charts, figures

    closed = []
    monkeypatch.setattr(figures.plt, "close", closed.append)  # _png closes each figure once it is saved
    rungs = ["best-of-ladder", "compile-max-autotune-no-cudagraphs", "lm-head-cce-torch-compile"]
    lc = LadderChart("beyond-ladder", rungs, [Series(f"gpu{i} / local (B=64, T=1024)", False,
                                                     {r: Point(500_000.0, None, None) for r in rungs}) for i in (1, 2)])
    charts._ladder(lc, figures.WIDE)
    (fig,) = closed
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    lowest_label = min(t.get_window_extent(renderer).y0 for t in ax.get_xticklabels() if t.get_text())
    assert legend.y1 < lowest_label


def test_a_chart_is_the_png_bbox_inches_tight_gives(monkeypatch):
    """_png measures the tight bounding box without the draw savefig(bbox_inches="tight") makes first to find it:
    the same bytes (a legend under the axes, rotated names, a wrapped title), in a tenth less drawing time."""
    import io

    from harness.analysis.series import LadderChart, Point, Series
    from harness.report import charts, figures

    rungs = ["best-of-ladder", "compile-max-autotune-no-cudagraphs", "lm-head-cce"]
    lc = LadderChart("beyond-ladder", rungs, [Series(f"gpu{i} / local (B=64, T=1024)", False,
                                                     {r: Point(500_000.0 + i, 490_000.0, 510_000.0) for r in rungs},
                                                     failed={}) for i in (1, 2, 3)])
    ours = charts._ladder(lc, figures.WIDE)

    def tight(fig, before_save=None):
        before_save(fig)
        buf = io.BytesIO()
        fig.savefig(buf, bbox_inches="tight", **figures.PNG_OPTIONS)
        figures.plt.close(fig)
        return buf.getvalue()
    monkeypatch.setattr(charts, "_png", tight)
    assert ours == charts._ladder(lc, figures.WIDE)


def test_an_answer_charts_intervals_and_labels_stay_inside_its_frame():
    """docs/report-cpu's vocab chart: two CPU bars' intervals 30x their bars ran their whiskers off both ends and
    their labels outside the frame. An interval is cut one bar length past the bars, its cut end marked, and the axis
    widened until every label ends inside it."""
    import matplotlib.pyplot as plt

    from harness.analysis.answer_types import Bar
    from harness.analysis.series import Point
    from harness.report import answer_charts

    bars = [Bar("epyc / torch212 B=4 sdpa-flash", Point(17.8, -98.0, 520.0), hatched=True, note="within noise"),
            Bar("h200 B=16 bf16, padding off", Point(56.7), hatched=True, note="one run a side, noise unknown"),
            Bar("user's log B=64", Point(63.9), hatched=True)]
    fig, ax = plt.subplots(figsize=(10, 3))
    answer_charts._hbars(ax, bars, "change in tokens/s (%)", signed=True)
    fig.canvas.draw()
    lo, hi = ax.get_xlim()
    frame = ax.get_window_extent()
    for text in ax.texts:
        box = text.get_window_extent()
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1, text.get_text()
    whiskers = [x for line in ax.lines for x in line.get_xdata()] + \
        [x for coll in ax.collections for seg in coll.get_segments() for x, _y in seg]
    assert whiskers and all(lo <= x <= hi for x in whiskers)
    assert any(line.get_marker() == ">" for line in ax.lines) and any(line.get_marker() == "<" for line in ax.lines)
    assert "arrowhead" in ax.get_xlabel()
    plt.close(fig)
