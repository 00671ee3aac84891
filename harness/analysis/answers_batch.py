"""Two of the users' questions (harness.analysis.answers): how far B should grow, from the batch searches and the
user's B sweep; and how close to the hardware the fastest run is, from explain.mfu. No torch import.
"""

from __future__ import annotations

from harness.analysis import questions
from harness.analysis import sweep as sweepmod
from harness.analysis.answer_types import (
    GIB,
    Answer,
    BatchCurve,
    Chart,
    KeyFinding,
    said,
    title_range,
)
from harness.analysis.context import Compare
from harness.analysis.fastest import Overview, overviews
from harness.analysis.group import Group, run_ids
from harness.analysis.kernel_split import step_time

BATCH_SEARCH = "python -m harness.batch_search --preset gpt2-124m --rung fused-adamw-clip"

def batch(cmp: Compare) -> Answer:
    q = "Should B go past 64, to a size that is not a power of two, and how far?"
    sentences, records, curves, head, title = [], [], [], None, None
    question = questions.batch(cmp)
    for sweep in question.sweeps:
        c, failed, d = sweep.curve, sweep.failed, sweep.best_vs_smallest
        low, best = sweep.smallest, sweep.best
        text = (f"On {cmp.name(c['device'])} ({c['rung']}, torch {cmp.ds.env_versions.get(c['env']) or c['env']}) the "
                f"fastest B is {best[0]}, {best[1]:,.0f} tokens/s, {said(d)} against B={low[0]}")
        text += (f"; {', '.join(f'B={v}' for v, _s in failed)} did not run ({', '.join(sorted({s for _v, s in failed}))})"
                 if failed else "")
        sentences.append(text + f"; the knee (the smallest B within {sweepmod.KNEE_TOLERANCE:.0%} of the best) is B={c['knee']}.")
        records += c["run_ids"]
        curves.append(BatchCurve(f"{c['rung']}, {cmp.name(c['device'])} / {c['env']}", False,
                                 [(v, t, None if m is None else m / GIB) for v, t, m in sweep.ran], failed, c["knee"]))
        if head is None:
            title = (f"B past {low[0]}: at most {title_range([d.value]).lstrip('+')} more tokens/s (B={best[0]}) on {cmp.name(c['device'])}"
                     + (f"; B={failed[0][0]} {failed[0][1]}" if failed else "") if d.value is not None else None)
            head = KeyFinding(f"Batch size past {low[0]} on {cmp.name(c['device'])}: the best, B={best[0]}, gives {said(d)} "
                              f"tokens/s" + (f"; B={failed[0][0]} is {failed[0][1]}" if failed else "")
                              + f"; the knee (within {sweepmod.KNEE_TOLERANCE:.0%} of the best) is B={c['knee']}.",
                              abs(d.value or 0.0), tuple(records))
    for logged in question.logged:
        sentences.append(f"The user's log ({logged.gpu}, {logged.rung}, single samples): "
                         + ", ".join(p.text() for p in logged.points) + " tokens/s.")
        records += run_ids(*logged.groups)
        curves.append(BatchCurve(f"user's log, {logged.gpu}", True, [(p.value, p.tokens_per_s,
                                 None if p.memory_bytes is None else p.memory_bytes / GIB) for p in logged.points], []))
    command = None
    if not any(not c.reference for c in curves):
        sentences.insert(0, "No batch search ran in these records.")
        command = BATCH_SEARCH
    chart = None
    if curves:
        title = title or "Tokens/s and memory against B"
        chart = Chart("sweep", title, {"": curves}, {"tokens/s": "thousands of tokens/s", "memory": "GiB at the peak"})
    return Answer("batch", q, sentences, tuple(records), command, chart, headline=head)


def mfu(cmp: Compare) -> Answer:
    q = "How close to the hardware is this (MFU against the datasheet and a measured GEMM peak)?"
    rows, sentences, records, head = [], [], [], None
    for ov in overviews(cmp):
        found = [g for g in (ov.seed, *(c.group for c in (ov.beyond, ov.tuned) if c is not None)) if g is not None]
        if not found:
            continue
        g = max(found, key=lambda x: x.throughput.point or 0)
        sheet, measured = g.mfu("mfu_datasheet"), g.mfu("mfu_measured")
        if sheet is None and measured is None:
            continue
        rows.append({"device": cmp.name(ov.gpu), "run": f"{g.label} ({g.batch})", "tokens/s": f"{g.throughput.point:,.0f}",
                     "MFU, datasheet": _share(sheet), "MFU, GEMM peak": _share(measured)})
        sheet_text = f"{_share(sheet)} of the datasheet peak" if sheet is not None else "no datasheet peak (none for this device)"
        sentences.append(f"The fastest run on {cmp.name(ov.gpu)} ({g.label}, {g.batch}) reaches {sheet_text} and "
                         f"{_share(measured)} of the GEMM peak measured on the same device (explain.mfu)."
                         + _where_the_step_goes(ov, g))
        records += run_ids(g)
        if head is None:
            head = KeyFinding(f"Closest to the hardware: {sheet_text}, {_share(measured)} of a "
                              f"measured GEMM peak, on {cmp.name(ov.gpu)}, {g.label} ({g.batch}).", 0.0, tuple(run_ids(g)))
    command = None
    if not rows:
        sentences = ["These records carry no MFU (explain.mfu)."]
        command = "bash scripts/gpu_check.sh   # on a GPU: the ladder with its MFU against the datasheet and a GEMM peak"
    elif len(sentences) > 3:
        sentences = sentences[:2] + [f"The table lists all {len(rows)} devices."]
    return Answer("mfu", q, sentences, tuple(records), command, table=rows or None, headline=head)


def _where_the_step_goes(ov: Overview, g: Group) -> str:
    """Per kernel class, from the same split as the fastest section's table (kernel_split.step_time): where the next
    millisecond would come from. Empty where that table splits another run, or none, or the run has no profile."""
    st = step_time(g) if ov.split_group is g else None
    if st is None or st.device != "cuda" or not st.step_us:
        return ""

    def part(us: float) -> str:
        return f"{us / st.step_us * 100:.0f}%"
    gemm = f"GEMMs {part(st.classes['gemm'])}" + (f" (at {_share(st.of_peak)} of the measured GEMM peak)" if st.of_peak else "")
    idle = f", idle or uncaptured {part(st.idle_us)}" if st.idle_us is not None else ""
    triton = ("Inductor's kernels not captured (a profile from before the capture fix: they are in the idle share)"
              if st.run.inductor_kernels_missed else f"Inductor's kernels {part(st.classes['triton'])}")
    return (f" Of its step: {gemm}, {triton}, attention {part(st.classes['attention'])}{idle} (run {st.run.run_id}; "
            "the fastest section splits it).")


def _share(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.1f}%"

