"""What the report says, in which order: the key findings, the seed ladder beside the user's numbers, one section per
user question (harness.analysis.answers), then an appendix (folded) with every finding, table and chart
harness.compare has, and the environments and the method last; and what it says where a chart has nothing to draw."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from harness.analysis import answers, findings, series, stats
from harness.analysis.cells import Table
from harness.analysis.context import COMPARABLE_RULE, Compare
from harness.analysis.tables import cross, knobs, registry
from harness.analysis.verdict import verdict
from harness.console.verdict_text import VERDICT_HOW, VERDICT_TITLE, verdict_blocks
from harness.report import drawing
from harness.report.document import Doc
from harness.report.drawing import Draw

if TYPE_CHECKING:
    from harness.report.figures import Chart

# the charts' modules, each imported where a chart is drawn (harness.report.drawing.Draw)
CHARTS, DELTA_CHARTS = "harness.report.charts", "harness.report.delta_charts"
VERSIONS_CHART, ANSWER_CHARTS = "harness.report.versions_chart", "harness.report.answer_charts"
CHART_MODULES = (CHARTS, DELTA_CHARTS, VERSIONS_CHART, ANSWER_CHARTS)  # what a chart worker imports before its first chart

TITLE = "GPT-2 training on {word}s: the users' questions, answered from the records"
FINDING_TOPICS = (  # harness.analysis.findings topics, in the order the report shows them
    ("ladder", "Ladders"), ("tf32-memory", "Memory with TF32 on against IEEE fp32"),
    ("vocab", "Vocab padding 50257 -> 50304"), ("padding-ab", "The compiler's own padding (A/B)"),
    ("versions", "Torch builds: memory and speed"), ("batch", "How far B grows"), ("sdpa", "Which SDPA backend"),
    ("fastest", "Fastest found vs the user's best vs the peer"),
    ("knobs", "Knob effects"), ("factors", "The GPU or the torch version?"), ("cross", "Cross-version and cross-GPU"),
    ("loss", "Loss parity"),
)
METHOD = (
    ("Workload: a GPT-2 style decoder trained on the configured data: this project's (gpt/model.py) unless a record "
     "names another model (Hugging Face's GPT2LMHeadModel, or a user's own: gpt/models.py); each rung of a plan is one "
     "workload configuration, each measurement a fresh worker process with flags frozen before the model is built."),
    ("Timing: per-step CUDA events (CPU: perf_counter) around each optimizer step, read after one synchronisation "
     "at the end; the first workload.warmup_steps steps are warm-up and excluded; step 0 (which includes "
     "compilation) is reported separately as the first-step time."),
    ("Throughput: a run's tokens per step / its median timed step time; a group's, the geometric mean of its "
     "runs' (harness.analysis.stats)."),
)
FASTEST_INTRO = (
    "Per device: the seed ladder's best run, the fastest loss-equivalent run found beyond it (plan beyond-ladder, "
    "and `python -m harness.tune`, plan fastest), the user's best logged number and the peer's, each with tokens/s, "
    "MFU and memory; then the kernel time per step that explains the gain, against its start at the same B and T, "
    "and where the fastest found's step goes, kernel class by class, with its GEMMs' FLOP rate against the matmul "
    "peak measured on the device (harness.analysis.fastest; docs/beyond.md).")


def environment_table(cmp: Compare) -> Table:
    """One row per (env, device) with measured runs: the library and driver versions its records name."""
    t = Table("environments", "Environments (from the records; one row per env and device)", [
        ("env", "env"), ("device", "device"), ("torch", "torch"), ("cuda", "CUDA"), ("cudnn", "cuDNN"), ("triton", "triton"),
        ("driver", "driver"), ("python", "python"), ("cpu", "CPU"), ("runs", "ok runs")])
    seen: dict[tuple, dict] = {}
    for g in cmp.ds.groups:
        row = seen.setdefault((g.env, g.gpu), {"env": g.env, "device": cmp.name(g.gpu), **g.first.versions, "runs": 0})
        row["runs"] += len(g.records)
    t.rows = [row for _key, row in sorted(seen.items(), key=lambda kv: (cmp.gpu_rank[kv[0][1]], cmp.env_rank[kv[0][0]]))]
    if not t.rows:
        t.notes.append("no measured runs")
    return t


def tables_by_name(cmp: Compare) -> dict[str, list[Table]]:
    """Every table harness.compare makes (harness.analysis.tables.registry), by table name, in compare's order."""
    out: dict[str, list[Table]] = {name: [] for name in registry.TABLES}  # a builder may make none (fastest: no device)
    for t in registry.build(cmp):
        out.setdefault(t.name, []).append(t)
    return out


def _charts(doc: Doc, drawn: list[Chart], missing: str) -> None:
    """The charts, or the sentence that says why there is none."""
    for chart in drawn:
        doc.img(*chart)
    if not drawn:
        doc.p(missing)


def _tables(doc: Doc, tables: list[Table]) -> None:
    for t in tables:
        doc.table(t)


def chart_jobs(cmp: Compare) -> Iterator[tuple[str, tuple]]:
    """Every chart the report has but the answers': (key, (the function that draws it, what it draws)). What each
    shows is computed here, over the runs (harness.report.drawing sends it to a worker process, which draws it while
    the text is written), one at a time: a worker starts drawing the first while the next is computed. The costliest
    first: the workers take them in this order."""
    names = {label: cmp.name(label) for label in cmp.ds.gpus()}
    yield "ladder", (Draw(CHARTS, "ladder_charts"), series.ladder_charts(cmp))
    yield "cross-version", (_listed, Draw(DELTA_CHARTS, "heatmap_chart"),
                            series.cross_version_cells(cross.cross(cmp, "env"), cmp.name))
    yield "cross-gpu", (_listed, Draw(DELTA_CHARTS, "cross_gpu_chart"),
                        series.cross_gpu_items(cross.cross(cmp, "gpu"), cmp.name))
    yield "kernel-mix", (_listed, Draw(CHARTS, "kernel_mix_chart"), series.kernel_mix(cmp))
    # one rung under 3+ torch builds (harness.bisect --landscape)
    yield "versions", (Draw(VERSIONS_CHART, "versions_charts"), series.landscapes(cmp))
    yield "factors", (_listed, Draw(DELTA_CHARTS, "factors_chart"), knobs.splits(cmp), names.__getitem__)
    yield "memory", (_listed, Draw(CHARTS, "memory_chart"), series.memory_bars(cmp))
    yield "sweeps", (Draw(CHARTS, "sweep_charts"), series.sweep_lines(cmp))


def _listed(draw, *data) -> list[Chart]:
    """draw(*data)'s chart as a list: none where it had nothing to draw."""
    return _some(draw(*data))


def build(cmp: Compare, paths, command: str, drawn: drawing.Drawings | None = None) -> Doc:
    """The answers first: key findings, the seed ladder beside the user's numbers, one section per user question;
    then every other finding and table folded in an appendix; environments and method last. The charts are drawn
    meanwhile, by `drawn`'s workers (harness.report.drawing; forked before the records were read) or, without, by
    workers forked here."""
    if drawn is None:
        with drawing.Drawings(preload=CHART_MODULES) as workers:
            return build(cmp, paths, command, workers)
    for key, (draw, *data) in chart_jobs(cmp):
        drawn.add(key, draw, *data)
    answered = answers.compute(cmp)
    for a in answered:
        drawn.add(f"answer-{a.key}", Draw(ANSWER_CHARTS, "charts_of"), a.key, a.chart)
    return _document(cmp, paths, command, answered, drawn)


def _document(cmp: Compare, paths, command: str, answered: list[answers.Answer], drawn: drawing.Drawings) -> Doc:
    every = " ".join(shlex.quote(str(p)) for p in paths)
    doc = Doc(every_row=lambda name: f"python -m harness.compare {every} --table {name} --format csv")
    ds = cmp.ds
    tables = tables_by_name(cmp)
    doc.h(1, TITLE.format(word=cmp.word))
    doc.p(f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by `{command}` from {', '.join(map(str, paths))}: "
          f"{ds.valid_records} valid records, {sum(len(g.records) for g in ds.groups)} ok measured runs in {len(ds.groups)} "
          f"comparable groups, {len(ds.references)} reference records (the user's log), {len(ds.failed)} runs not ok. "
          f"Every number below is computed from those records.")

    doc.h(2, "Key findings")
    keys = answers.key_findings(cmp)
    doc.findings([findings.Finding("key", k.text, k.records) for k in keys], numbered=True)
    if not keys:
        doc.p("No measured runs yet: nothing to find.")

    ladder = drawn.take("ladder")
    seed = [c for c in ladder if c[0].startswith("ladder-seed-ladder")]
    users = any(s.reference for lc in series.ladder_charts(cmp) if lc.plan == "seed-ladder" for s in lc.series)
    doc.h(2, "The seed ladder: the user's numbers beside ours" if users else
          "The seed ladder (the user's log has no run at these B and T to put beside it)")
    _charts(doc, seed, "No seed-ladder chart: no measured run of plan seed-ladder.")

    for a in answered:
        doc.h(2, a.question)
        doc.p(" ".join(a.sentences))
        if a.command:
            doc.p(f"What would answer it: `{a.command}`")
        for chart in drawn.take(f"answer-{a.key}"):
            doc.img(*chart)
        if a.table:
            t = Table(f"answer-{a.key}", "", [(k, k) for k in a.table[0]])
            t.rows = a.table
            doc.table(t, folded=False)
        doc.cite(a.records)

    doc.fold("Appendix: every other finding, chart and table")
    _appendix(doc, cmp, tables, [c for c in ladder if c not in seed], drawn)
    doc.unfold()

    doc.h(2, "Environments")
    doc.table(environment_table(cmp))
    _tables(doc, tables["libraries"])

    doc.h(2, "Method")
    doc.ul([
        *METHOD,
        stats.rule_text(cmp.floor),
        (COMPARABLE_RULE + " The same rule makes the comparison sets of every table, the 2x2 split and these findings. "
         "Baselines: the oldest torch for cross-version deltas, the lowest compute capability for cross-GPU deltas, "
         "unless chosen with --baseline-env / --baseline-gpu."),
        f"Loss parity: tolerance {cmp.loss_tol:.1%} (relative) on the final and mean loss over common steps.",
        ("Reference records (results/reference/) are the user's logged numbers, one 'Step 49' line each: single samples "
         "without a noise estimate, never merged with measured runs."),
    ])
    doc.ul(cmp.footer()[1:])
    return doc


def _appendix(doc: Doc, cmp: Compare, tables: dict, ladder: list, drawn: drawing.Drawings) -> None:
    ds = cmp.ds
    doc.h(2, "A1. The verdict per pair")
    title = VERDICT_TITLE.format(word=cmp.word).removeprefix("Verdict: ")
    doc.p(f"{title[0].upper()}{title[1:]} ({VERDICT_HOW}).")
    doc.answer(verdict_blocks(verdict(cmp), cmp.name, cmp.word, ds.env_versions))

    doc.h(2, "A2. Findings")
    doc.p("Computed from the records above, each with the run ids it rests on (file names are <run id>.json).")
    found = findings.compute(cmp)
    for topic, title in FINDING_TOPICS:
        items = [f for f in found if f.topic == topic]
        if items:
            doc.h(3, title)
            doc.findings(items)

    doc.h(2, "A3. The ladder")
    _charts(doc, ladder, "No other ladder chart.")
    _tables(doc, tables["ladder"])

    doc.h(2, "A4. Fastest found vs the user's best vs the peer")
    doc.p(FASTEST_INTRO)
    _tables(doc, tables["fastest"])

    doc.h(2, f"A5. Torch versions and {cmp.word}s")
    versions, gpus = tables["versions"][0], tables["gpus"][0]
    _charts(doc, drawn.take("cross-version"), "No cross-version heatmap: no rung ran under two envs on the same GPU.")
    doc.table(versions)
    for chart in drawn.take("versions"):
        doc.img(*chart)
    _charts(doc, drawn.take("cross-gpu"),
            f"No cross-{cmp.word} chart: no rung ran on two {cmp.word}s under the same env.")
    doc.table(gpus)
    _tables(doc, tables["models"])  # where the records hold two models: what the model costs beside what torch does

    doc.h(2, "A6. Knob effects: the GPU or the torch version?")
    _tables(doc, tables["knobs"])
    factors = tables["factors"][0]
    _charts(doc, drawn.take("factors"), "No 2x2 chart: no knob was measured with comparable runs on 2 GPUs x 2 envs.")
    doc.table(factors)

    doc.h(2, "A7. Memory")
    _charts(doc, drawn.take("memory"),
            "No memory-split chart: no record has explain.memory_split (it needs a CUDA run).")

    doc.h(2, "A8. What changed underneath")
    _charts(doc, drawn.take("kernel-mix"), "No kernel-mix chart: no record has a kernel profile (explain.kernels).")
    _tables(doc, tables["underneath"])

    doc.h(2, "A9. Sweeps")
    _charts(doc, drawn.take("sweeps"), "No sweep chart: no record has a sweep field.")
    _tables(doc, tables["sweeps"])

    doc.h(2, "A10. Loss parity")
    _tables(doc, tables["loss"])

    doc.h(2, "A11. The user's own numbers (reference)")
    _tables(doc, tables["reference"])  # not a record: the tables by name

    doc.h(2, "A12. Left out")
    _tables(doc, tables["left-out"])


def _some(chart: Chart | None) -> list[Chart]:
    return [] if chart is None else [chart]
