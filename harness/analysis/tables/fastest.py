"""The fastest-found tables (`--table fastest`, the report's section "Fastest found vs the user's best vs the peer",
harness.tune's answer):
per device the overview of harness.analysis.fastest.Overview, the kernel split that explains the fastest found, where
the fastest found's step goes kernel class by class and how far its GEMMs run from the device's measured matmul peak,
and every harness.tune search run by run. No torch import.
"""

from __future__ import annotations

from harness.analysis import stats
from harness.analysis.cells import Cell, Mfu, Number, Table, fmt_int, fmt_pct
from harness.analysis.context import Compare
from harness.analysis.dataset import outcome
from harness.analysis.fastest import Overview, Search, changes, memory_text, overviews, peak_memory, searches
from harness.analysis.group import Group, estimate, run_ids
from harness.analysis.kernel_split import SPLIT, StepTime, kernel_split, step_time

OVERVIEW_TITLE = "Fastest found vs the user's best vs the peer: "  # + the device
SPLIT_TITLE = "What explains it on "
STEP_TITLE = "Where the step's time goes on "  # + the device: the run, per kernel class
NOT_MEASURED = "not measured"
SEED_ROW = "the seed ladder's best run"
BEYOND_ROW = "fastest of plan beyond-ladder (equivalent, faster than its start)"
TUNE_ROW = "fastest found by harness.tune"
USER_ROW = "the user's best (their log)"


def fastest_tables(cmp: Compare) -> list[Table]:
    return [t for ov in overviews(cmp) for t in overview_tables(cmp, ov)] + [search_table(cmp, s) for s in searches(cmp)]


def search_table(cmp: Compare, s: Search) -> Table:
    """Every run of one search: what it changes, B, status, tokens/s against its start run, loss parity, fits."""
    t = Table("fastest", f"harness.tune on {cmp.name(s.gpu)} / {s.env}: every run against the start run at the same B and T "
              f"(start: B={s.start.workload.batch_size}, T={s.start.workload.seq_len})", [
        ("rung", "rung"), ("changes", "changes against the start"), ("batch", "B"), ("status", "status"),
        ("tokens_s", "tokens/s"), ("vs_start", "vs start, same B"), ("parity", "loss vs start, same B"),
        ("memory", "peak MiB"), ("fits", "fits"), ("mark", "note")])
    order = sorted(s.candidates, key=lambda c: (c.shape, not c.is_start, c.group.label))
    for c in order:
        mark = ", ".join(m for m, on in (("BEST", c is s.best), ("winner at the start's B", c is s.winner and not c.is_start),
                                         ("helped", c in s.helped), ("loss unchecked", c is s.unchecked)) if on)
        peak = peak_memory(c.group, over=max)
        t.rows.append({"rung": c.group.label, "changes": changes(s.start, c.group), "batch": c.shape[0], "status": "ok",
                       "tokens_s": c.tokens_per_s, "vs_start": Cell(c.delta) if c.delta else None,
                       "parity": c.parity_text(cmp.loss_tol), "memory": peak.bytes if peak else None,
                       "fits": "yes" if c.fits else f"no: {c.why_not}", "mark": mark, "run_ids": run_ids(c.group)})
    for r in sorted(s.failed, key=lambda r: r.run_id):
        t.rows.append({"rung": r.rung, "batch": r.workload.batch_size, "status": outcome(r),
                       "mark": r.reason or "no reason given", "run_ids": [r.run_id]})
    t.notes += [
        (f"equivalent = loss within {cmp.loss_tol:.1%} of the start run at the same B and T, or on as many sequences "
         "per step in micro-batches (B=96x2 for 192) (final and mean, the loss rule of every table); faster = "
         "tokens/s beyond noise and higher than that start run's; fits = peak memory + "
         "headroom <= usable memory (the batch search's rule)"),
        ("best = the fastest run that fits and is a start run, or equivalent and faster; a faster run that is not "
         "equivalent is never chosen"),
        *s.notes,
    ]
    if s.unchecked is not None:
        t.notes.append(f"{s.unchecked.group.label} at B={s.unchecked.shape[0]} is faster than the best but no start run at "
                       f"that B checks its loss: it is not chosen")
    return t


def where_start(start: Group, g: Group) -> str:
    """Where a run's start ran, for a title: at the same B and T, or on as many sequences in micro-batches."""
    if start.batch == g.batch:
        return "at the same B and T"
    return f"at {start.batch}: as many sequences per step, in micro-batches"


def mfu(g: Group, key: str) -> Mfu | None:
    """mfu_datasheet or mfu_measured (explain.mfu), median over the group's runs (above 100%: 'peak suspect')."""
    value = g.mfu(key)
    return None if value is None else Mfu(value)


def split_table(title: str, before: Group, after: Group) -> Table:
    """The kernel-time split of `after` against `before` (its start at the same B and T): what explains the gain."""
    a, b = kernel_split(before), kernel_split(after)
    t = Table("fastest", title, [("what", "per step"), ("a", f"start: {before.label}"), ("b", f"{after.label}"),
                                 ("delta", "B - A"), ("share_a", "share A"), ("share_b", "share B")])
    if a is None or b is None:
        t.notes.append("no kernel profile (explain.kernels) on " + " and ".join(
            x.label for x, s in ((before, a), (after, b)) if s is None))
        return t
    for key, label in SPLIT:
        va, vb = a.get(key), b.get(key)
        scale = 1.0 if key == "step_ms" else 1000.0  # us -> ms
        row = {"what": label, "a": f"{va / scale:,.2f}" if va is not None else None,
               "b": f"{vb / scale:,.2f}" if vb is not None else None,
               "delta": f"{(vb - va) / scale:+,.2f}" if None not in (va, vb) else None}
        if key not in ("step_ms", "busy", "uncaptured"):
            row["share_a"] = fmt_pct(va / a["busy"]) if a["busy"] else None
            row["share_b"] = fmt_pct(vb / b["busy"]) if b["busy"] else None
        t.rows.append(row)
    if a["run"].inductor_kernels_missed or b["run"].inductor_kernels_missed:
        t.notes.append("no Inductor-generated kernel was captured on a compiled run: profiles taken before the fix in "
                       "gpt/torch_compat.py device_kernel_events (torch 2.4+) dropped every Triton kernel, so their time "
                       "is in 'step time not in captured kernels' and the shares are of the rest")
    if b.get("device") != "cuda":
        t.notes.append("no table of where the step's time goes for a CPU run: CPU op self times come from several "
                       "threads, so they neither add up to the step nor leave its idle time, and no matmul peak is "
                       "measured to hold the GEMMs against")
    what = "GPU kernel time" if b.get("device") == "cuda" else "CPU op self time (CPU ops stand in for kernels)"
    t.notes.append(f"runs: A {a['run'].run_id}, B {b['run'].run_id}, each its group's newest with a kernel profile "
                   f"(the run every kernel table shows); ms per step: that run's median timed step for the step time, "
                   f"else {what} per profiled step "
                   "(explain.kernels, profiled after the timed steps); shares of all kernel time. lm_head GEMMs = the "
                   "GEMMs whose M, N or K is the vocab (explain.kernels.vocab_gemms); the plain path's softmax and "
                   "cross-entropy kernels are Inductor-generated and fused with other work, so they count there")
    return t


def _ms(us: float | None) -> Number:
    return Number(None if us is None else us / 1000.0, lambda x: None if x is None else f"{x:,.2f}")


def _tflops(flops_per_s: float | None) -> Number:
    return Number(flops_per_s, lambda x: None if x is None else f"{x / 1e12:,.0f}")


def _of_peak(st: StepTime) -> Number | str:
    if st.peak_flops is None:
        return NOT_MEASURED
    dtype = f" ({st.peak_dtype})" if st.peak_dtype else ""
    return Number(st.of_peak, lambda x: None if x is None else
                  f"{Mfu(x).text()} of {st.peak_flops / 1e12:,.0f} TFLOP/s{dtype}")


STEP_ROWS = (  # (class, label) of the step-time table, in its order; "lm_head_gemm" is part of "gemm"
    ("gemm", "GEMMs"),
    ("lm_head_gemm", "GEMMs: of which the lm_head's"),
    ("attention", "attention kernels"),
    ("triton", "Inductor-generated (Triton) kernels"),
    ("lm_head_loss", "fused lm_head loss kernels (Liger/CCE)"),
    ("optimizer", "optimizer kernels"),
    ("rest", "everything else (elementwise, reductions, copies)"),
)
IDLE_ROW = "idle / not in captured kernels"
STEP_ROW = "step time (the run's median timed step)"


def step_table(title: str, g: Group) -> Table | None:
    """Where g's step goes, per kernel class, in ms and as a share of the step, and its GEMMs' FLOP rate against
    the measured matmul peak (harness.analysis.kernel_split.step_time). None for a CPU run (see split_table)."""
    st = step_time(g)
    if (st.device if st is not None else g.workload.device) == "cpu":
        return None
    t = Table("fastest", title, [("what", "per step"), ("ms", "ms"), ("share", "share of the step"),
                                 ("tflops", "achieved TFLOP/s"), ("of_peak", "of the measured GEMM peak")])
    if st is None:
        t.rows += [{"what": "kernel classes", "ms": NOT_MEASURED},
                   {"what": "step time (its runs' median timed steps, geometric mean)",
                    "ms": _ms(g.ms_per_step * 1000.0 if g.ms_per_step else None), "run_ids": run_ids(g)}]
        t.notes.append(f"no kernel profile on {g.label} (explain.kernels: {g.kernels_reason}): where its step goes is "
                       f"{NOT_MEASURED}")
        return t
    step, ids = st.step_us, [st.run.run_id]

    def share(us):
        return Number(us / step if step else None, fmt_pct)

    for key, label in STEP_ROWS:
        us = st.classes[key]
        if key == "lm_head_loss" and not us:
            continue  # the plain loss: no fused kernel
        row = {"what": label, "ms": _ms(us), "share": share(us), "run_ids": ids}
        if key == "gemm":
            row["tflops"] = _tflops(st.gemm_flops_per_s) if st.gemm_flops else "not recorded"
            row["of_peak"] = _of_peak(st)
        t.rows.append(row)
    t.rows.append({"what": IDLE_ROW, "ms": _ms(st.idle_us), "share": share(st.idle_us) if st.idle_us is not None else None,
                   "run_ids": ids})
    t.rows.append({"what": STEP_ROW, "ms": _ms(step), "share": share(step), "run_ids": ids})
    t.notes += step_notes(st)
    return t


def step_notes(st: StepTime) -> list[str]:
    """What each figure of step_table is."""
    w = st.run.workload
    notes = [
        (f"run {st.run.run_id} (its group's newest with a kernel profile): ms = GPU kernel time per profiled step "
         "(explain.kernels, profiled after the timed steps) by class; the step = that run's median timed step; idle / "
         "not in captured kernels = the step less all captured kernel time (one stream runs one kernel at a time: "
         "gaps between kernels, waits on the CPU, kernels the profiler did not capture). Shares are of the step: the "
         "rows but the lm_head GEMMs (part of the GEMMs) add up to it"),
        (f"achieved TFLOP/s of the GEMMs = their FLOPs per step / their ms, the FLOPs an estimate: 6 x N x tokens per "
         f"step (explain.mfu: N = {st.run.n_params:,} parameters, nanoGPT's non-embedding count; B x T x grad_accum = "
         f"{w.batch_size} x {w.seq_len} x {w.grad_accum or 1} = {st.run.tokens_per_step:,} tokens), the matmul part "
         "of nanoGPT's flops_per_token; its LayerNorm and bias parameters counted in N are negligible"
         if st.gemm_flops and st.run.n_params else
         "achieved TFLOP/s of the GEMMs: not recorded (no explain.mfu.n_params or tokens per step in the record)"),
        ("of the measured GEMM peak = the achieved rate / the device's matmul peak in the run's precision, measured "
         "on it before the run (explain.mfu.measured_peak.flops: torch.matmul n x n x n, the best size); the rate "
         "rests on the 6N estimate, so a few % either way says little" if st.peak_flops else
         f"of the measured GEMM peak: {NOT_MEASURED} ({st.run.measured_peak_reason})"),
        ("attention: ms and share only. nanoGPT's attention term (12 x L x H x hd x T FLOPs per token) counts the "
         "whole T x T score matrix, of which a causal kernel computes about half, and a flash backward computes the "
         "scores again, so the FLOPs the attention kernels do are not that term's: no rate rather than one off by up "
         "to 2x"),
    ]
    if st.lm_head_fused:
        notes.append("the lm_head's matmuls ran inside the fused lm_head loss kernels (the profile has no lm_head "
                     "GEMM): their 6 x V x C FLOPs per token are left out of the GEMMs' count")
    if st.run.inductor_kernels_missed:
        notes.append("no Inductor-generated kernel was captured on a compiled run (profiles taken before the fix in "
                     "gpt/torch_compat.py device_kernel_events dropped every Triton kernel): their time is in the idle row")
    if st.idle_us is not None and st.idle_us < 0:
        notes.append("the idle row is negative: the profiled steps' kernels took longer than the run's median timed step")
    return notes


def _row(cmp: Compare, ov: Overview, what: str, g: Group | None, parity: str | None = None,
         run: str | None = None, source: str | None = None) -> dict:
    """One line of the overview: g's tokens/s against the seed ladder's best, MFU, memory, loss parity."""
    if g is None:
        return {"what": what, "run": run or "none in these records"}
    vs = ov.vs_seed(g, cmp.floor)
    pooled = f" ({len(g.records)} runs pooled)" if len(g.records) > 1 else ""
    return {"what": what, "run": (run or f"{'/'.join(sorted({p for p, _r, _i in g.rungs}))} {g.label}") + pooled,
            "env": source or g.env, "batch": g.batch, "tokens_s": estimate(g).point, "vs_seed": Cell(vs) if vs is not None else None,
            "mfu_ds": mfu(g, "mfu_datasheet"), "mfu_meas": mfu(g, "mfu_measured"),
            "memory": peak_memory(g), "parity": parity, "run_ids": run_ids(g)}


def overview_tables(cmp: Compare, ov: Overview) -> list[Table]:
    """One device's table (the seed ladder's best, beyond-ladder, harness.tune, the user's best, the peer) and the
    kernel split of the fastest found beyond the seed ladder against its start."""
    seed, gpu = ov.seed, ov.gpu
    t = Table("fastest", f"{OVERVIEW_TITLE}{cmp.name(gpu)}", [
        ("what", "what"), ("run", "run"), ("env", "env / source"), ("batch", "B, T"), ("tokens_s", "tokens/s"),
        ("vs_seed", "vs the seed ladder's best"), ("mfu_ds", "MFU (datasheet)"), ("mfu_meas", "MFU (measured GEMM peak)"),
        ("memory", "memory MiB"), ("parity", "loss vs its start")])
    seed_fits, why = ov.seed_fits
    t.rows.append(_row(cmp, ov, SEED_ROW, seed, "start" if seed else None,
                       run=None if seed_fits else f"{'/'.join(sorted({p for p, _r, _i in seed.rungs}))} {seed.label} "
                                                  f"(does not fit the batch search's headroom: {why})"))
    best_beyond, best_tuned = ov.beyond, ov.tuned
    t.rows.append(_row(cmp, ov, BEYOND_ROW, best_beyond.group if best_beyond else None,
                       best_beyond.parity_text(cmp.loss_tol) if best_beyond else None))
    t.rows.append(_row(cmp, ov, TUNE_ROW, best_tuned.group if best_tuned else None,
                       best_tuned.parity_text(cmp.loss_tol) if best_tuned else None,
                       run=None if best_tuned else "none: no `python -m harness.tune` run (plan fastest) on this GPU in these records"))
    user_best = ov.user_best
    if user_best is not None:
        info = user_best.first.reference
        t.rows.append(_row(cmp, ov, USER_ROW, user_best,
                           run=f"{user_best.label} (torch {info.torch or 'not stated'})",
                           source=f"{user_best.gpu}, {info.source or '?'}:{info.line or '?'}"))
    else:
        t.rows.append(_row(cmp, ov, USER_ROW, None))
    for p in ov.peers:
        info = p.first.peer
        t.rows.append(_row(cmp, ov, f"peer: {info.name or p.label}", p, run=info.program or p.label,
                           source=f"{info.source or '?'}:{info.line or '?'} (torch {p.torch_version})"))
    if not ov.peers:
        t.rows.append(_row(cmp, ov, "peer", None))
    t.notes += [
        ("tokens/s: measured runs = the geometric mean of each run's tokens per step / median timed step; the user's "
         "log = its one logged step; the peer = its own median of steps 10-49. Only measured runs have a noise "
         "estimate."),
        (f"equivalent: loss within {cmp.loss_tol:.1%} of the start configuration at the same B and T on this GPU, or "
         "on as many sequences per step in micro-batches (B=96x2 for 192) (plan beyond-ladder: the seed ladder's "
         "last rung; harness.tune: its start rung). A faster run that is not "
         "equivalent is not counted here."),
        "memory: measured = NVML device used; the user's log = nvidia-smi; the peer = torch's peak reserved.",
    ]
    if user_best is not None:
        t.notes.append(f"the user's numbers come from their own {user_best.gpu} GPU, not this one")
    if best_tuned is None:
        t.notes.append("no harness.tune run exists in these records yet: the fastest measured so far is "
                       + (f"{best_beyond.group.label} ({best_beyond.group.batch}, plan beyond-ladder)" if best_beyond else
                          f"the seed ladder's best run ({seed.label}, {seed.batch})" if seed else "nothing"))
    tables = [t]
    shown = ov.shown
    if shown is not None:
        tables.append(split_table(f"{SPLIT_TITLE}{cmp.name(gpu)}: {shown.group.label} ({shown.group.batch}) against its start "
                                  f"{shown.partner.label} {where_start(shown.partner, shown.group)}", shown.partner,
                                  shown.group))
    fastest = ov.split_group
    steps = step_table(f"{STEP_TITLE}{cmp.name(gpu)}: {fastest.label} ({fastest.batch}), per kernel class",
                       fastest) if fastest is not None else None
    return tables + ([steps] if steps is not None else [])


def tune_answer(cmp: Compare, s: Search) -> tuple[list[Table], list[str]]:
    """harness.tune's answer: the tables and the closing lines (every run, the best against the start, what explains
    it, where its step goes)."""
    tables = [search_table(cmp, s)]
    lines = []
    best, start = s.best, s.start
    if best is None:
        lines.append("best: none (no run fits)")
        return tables, lines
    g = best.group
    gain = stats.ratio(start.throughput, g.throughput, cmp.floor)[0]
    lines.append(f"best: {g.label} at {g.batch}: {fmt_int(g.throughput.point)} tokens/s; the start ({start.label} at "
                 f"{start.batch}) {fmt_int(start.throughput.point)} tokens/s: {Cell(gain).text()}")
    b0, b = start.workload.batch_size, g.workload.batch_size
    lines.append(f"  changes: {changes(start, g)}" + (f"; B {b0} -> {b}" if b != b0 else ""))
    ds, measured = mfu(g, "mfu_datasheet"), mfu(g, "mfu_measured")
    lines.append(f"  MFU: {ds.text() if ds else 'n/a'} of the datasheet peak, "
                 f"{measured.text() if measured else 'n/a'} of the measured GEMM peak; memory: "
                 f"{memory_text(g) or 'n/a'} (start: {memory_text(start) or 'n/a'})")
    micro = best.partner is not None and best.partner.batch != g.batch  # the parity text names that start's B
    lines.append(f"  loss against the start{'' if micro else ' at the same B'}: {best.parity_text(cmp.loss_tol)}")
    if s.winner is not None and not s.winner.is_start and best.shape != s.winner.shape:
        w = s.winner
        lines.append(f"  of which the knobs at {start.batch}: {w.group.label} {Cell(w.delta).text()}; then the batch size "
                     f"{w.shape[0]} -> {best.shape[0]}")
    not_equivalent = [c for c in s.candidates if c.faster and not c.equivalent]
    for c in not_equivalent:
        lines.append(f"  not equivalent (faster, but its loss drifts): {c.group.label} at {c.group.batch}: "
                     f"{c.parity_text(cmp.loss_tol)}")
    if best.partner is not None and not best.is_start:
        where = f"at the same B ({g.batch})" if best.partner.batch == g.batch else where_start(best.partner, g)
        tables.append(split_table(f"What explains it: {g.label} against the start {where}", best.partner, g))
    steps = step_table(f"Where the step's time goes: {g.label} ({g.batch}), per kernel class", g)
    return tables + ([steps] if steps is not None else []), lines
