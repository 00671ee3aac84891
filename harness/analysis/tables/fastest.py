"""The fastest-found tables (`--table fastest`, the report's section "Fastest found vs the user's best vs the peer"):
per device the overview of harness.analysis.fastest.Overview, the kernel split that explains the fastest found, and
every harness.tune search run by run. No torch import.
"""

from __future__ import annotations

from harness.analysis.cells import Cell, Mfu, Table, fmt_pct
from harness.analysis.context import Compare
from harness.analysis.dataset import outcome
from harness.analysis.fastest import Overview, Search, changes, overviews, peak_memory, searches
from harness.analysis.group import Group, estimate, run_ids
from harness.analysis.kernel_split import SPLIT, kernel_split

OVERVIEW_TITLE = "Fastest found vs the user's best vs the peer: "  # + the device
SPLIT_TITLE = "What explains it on "
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
        (f"equivalent = loss within {cmp.loss_tol:.1%} of the start run at the same B and T (final and mean, the loss rule "
         "of every table); faster = tokens/s beyond noise and higher than that start run's; fits = peak memory + "
         "headroom <= usable memory (the batch search's rule)"),
        ("best = the fastest run that fits and is a start run, or equivalent and faster; a faster run that is not "
         "equivalent is never chosen"),
        *s.notes,
    ]
    if s.unchecked is not None:
        t.notes.append(f"{s.unchecked.group.label} at B={s.unchecked.shape[0]} is faster than the best but no start run at "
                       f"that B checks its loss: it is not chosen")
    return t


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
    compiled = [x.label for x in (before, after) if x.workload.compile not in (None, "off")]
    if b.get("device") == "cuda" and compiled and not (a["triton"] and b["triton"]):
        t.notes.append("no Inductor-generated kernel was captured on a compiled run: profiles taken before the fix in "
                       "gpt/torch_compat.py device_kernel_events (torch 2.4+) dropped every Triton kernel, so their time "
                       "is in 'step time not in captured kernels' and the shares are of the rest")
    what = "GPU kernel time" if b.get("device") == "cuda" else "CPU op self time (CPU ops stand in for kernels)"
    t.notes.append(f"ms per step: the timed median for the step time, else {what} per profiled step "
                   "(explain.kernels, profiled after the timed steps); shares of all kernel time. lm_head GEMMs = the "
                   "GEMMs whose M, N or K is the vocab (explain.kernels.vocab_gemms); the plain path's softmax and "
                   "cross-entropy kernels are Inductor-generated and fused with other work, so they count there")
    return t


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
        (f"equivalent: loss within {cmp.loss_tol:.1%} of the start configuration at the same B and T on this GPU "
         "(plan beyond-ladder: the seed ladder's last rung; harness.tune: its start rung). A faster run that is not "
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
                                  f"{shown.partner.label} at the same B and T", shown.partner, shown.group))
    return tables
