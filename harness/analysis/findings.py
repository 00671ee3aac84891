"""The report's findings, computed from whatever records are given; each cites the records it rests on.

Nothing here knows the user's log or the GPUs by name: a finding exists when the records contain the
pairs it needs, and says so when they do not. Every finding reads the typed results the analyses compute once per
Compare (ladders, cross, splits, parity rows, the fastest overviews), never a table's display rows. Topics, in the report's order:

  ladder       per ladder: first -> last rung, the fastest rung, the largest single step
  tf32-memory  memory with TF32 on vs IEEE fp32, same rung otherwise (the user's question (a)), per cell and
               in the user's log; with the compiler's padding A/B (plan `padding`) where those runs exist
  vocab        vocab 50257 -> 50304 (question (b)) per GPU and torch version, the user's log beside it; what
               the kernel capture saw of the lm_head GEMM; the padding A/B where present
  versions     memory and speed between torch builds: measured envs, the user's logged builds, and our
               measurement beside the user's numbers for the same rung and B
  batch        how far B grows: batch searches and the user's batch sweep
  sdpa         which SDPA backend `auto` chose, and what forcing one costs
  fastest      per GPU: the seed ladder's best, the fastest found beyond it (plan beyond-ladder, harness.tune), the
               user's best and the peer, and the kernel time that explains the gain (harness.analysis.fastest)
  knobs, factors, cross, loss   the generic tables' headlines

The runs each user question rests on (tf32-memory, vocab, versions, batch): harness.analysis.questions, which the
answers read too; the pairs of runs that differ in one knob, and the phrases that describe a pair:
harness.analysis.knob_pairs. No torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.analysis import questions, stats
from harness.analysis import sweep as sweepmod
from harness.analysis.cells import Cell, fmt_signed_pct
from harness.analysis.context import Compare
from harness.analysis.fastest import overviews
from harness.analysis.group import Group, estimate, run_ids
from harness.analysis.kernel_split import kernel_split
from harness.analysis.knob_pairs import (
    lm_head_text,
    logged_number,
    measured_pairs,
    memory_text,
    mib,
    padding_setting,
    ref_where,
    speed_text,
    where,
)
from harness.analysis.tables.cross import cross as cross_result
from harness.analysis.tables.knobs import knob_effects, splits
from harness.analysis.tables.ladder import ladders
from harness.analysis.tables.loss import parity_rows

MAX_CITED = 6  # run ids cited per finding before "and N more"


@dataclass(frozen=True)
class Finding:
    topic: str
    text: str
    records: tuple = ()  # run ids (measured) or reference run ids the text rests on

    def cited(self) -> str:
        ids = list(dict.fromkeys(self.records))
        if not ids:
            return ""
        more = f" and {len(ids) - MAX_CITED} more" if len(ids) > MAX_CITED else ""
        return "records: " + ", ".join(ids[:MAX_CITED]) + more




# ---------------------------------------------------------------- topics

def tf32_memory(cmp: Compare) -> list[Finding]:
    q = questions.tf32(cmp)
    if not q.every and not q.refs:
        return []
    out = []
    rose = fell = 0
    for (gpu, env), a, b in q.every:
        if a.memory_bytes is not None and b.memory_bytes is not None:
            rose, fell = rose + (b.memory_bytes > a.memory_bytes), fell + (b.memory_bytes < a.memory_bytes)
        text = f"TF32 on (fp32 -> tf32) on {where(cmp, gpu, env, a)}, compiler padding {padding_setting(a)}: {memory_text(a, b)}; {speed_text(cmp, a, b)}."
        seen = [t for t in (lm_head_text(a, "fp32 lm_head GEMMs"), lm_head_text(b, "tf32")) if t]
        if seen:
            text += " Kernel capture: " + "; ".join(seen) + "."
        out.append(Finding("tf32-memory", text, tuple(run_ids(a, b))))
    for a, b in q.refs:
        if a.memory_bytes is not None and b.memory_bytes is not None:
            rose, fell = rose + (b.memory_bytes > a.memory_bytes), fell + (b.memory_bytes < a.memory_bytes)
        out.append(Finding("tf32-memory", f"TF32 on (fp32 -> tf32) in {ref_where(a)}: {memory_text(a, b)}; {speed_text(cmp, a, b)}.",
                           tuple(run_ids(a, b))))
    summary = (f"Memory with TF32 on against IEEE fp32, same rung otherwise: higher in {rose} and lower in {fell} of "
               f"{len(q.every) + len(q.refs)} pair(s) ({len(q.every)} measured" + (f", {len(q.refs)} from the user's log" if q.refs else "") + ").")
    out.insert(0, Finding("tf32-memory", summary, tuple(i for f in out for i in f.records)))
    out += padding_ab(q, "TF32's memory rise", " MiB")
    return out


def padding_ab(q: questions.KnobQuestion, what: str, unit: str, diff_unit: str | None = None) -> list[Finding]:
    """Every padding A/B of a question's pairs as a finding; one that says how to get it where the records have none."""
    out = [Finding("padding-ab", e.sentence(what, unit, diff_unit), e.records) for e in q.effects]
    if q.every and not out:
        out.append(Finding("padding-ab", (
            f"No padding A/B among these records for {what}: `python -m harness.run --plan padding --preset gpt2-124m` "
            "runs the same rungs with Inductor's shape_padding and comprehensive_padding at default and off."), ()))
    return out


def vocab(cmp: Compare) -> list[Finding]:
    q = questions.vocab(cmp)
    out = []
    for (gpu, env), a, b in q.every:
        text = (f"Vocab {a.workload.vocab_size} -> {b.workload.vocab_size} at {a.label} on {where(cmp, gpu, env, a)}, "
                f"compiler padding {padding_setting(a)}: {speed_text(cmp, a, b)}; {memory_text(a, b)}.")
        seen = lm_head_text(a, f"kernel capture at {a.workload.vocab_size}")
        if seen:
            text += f" {seen}."
        out.append(Finding("vocab", text, tuple(run_ids(a, b))))
    for a, b in q.refs:
        out.append(Finding("vocab", (f"Vocab {a.workload.vocab_size} -> {b.workload.vocab_size} at {a.label} in "
                                     f"{ref_where(a)}: {speed_text(cmp, a, b)}; {memory_text(a, b)}."), tuple(run_ids(a, b))))
    out += padding_ab(q, "the vocab-padding speed-up in tokens/s", "%", " pp")
    return out


def versions(cmp: Compare) -> list[Finding]:
    """Between torch builds in the user's log, and our runs beside the user's numbers for the same rung and B
    (measured envs against each other: the cross-version finding)."""
    out = []
    for lb in questions.versions(cmp):
        (ta, ra), (tb, rb) = lb.builds
        first_a, first_b = ra.first.first_step_ms, rb.first.first_step_ms
        text = (f"The user's log, {lb.rung} at B={lb.batch_size}, T={lb.seq_len} on {lb.gpu}: torch {ta} -> {tb}: "
                f"{speed_text(cmp, ra, rb)}; {memory_text(ra, rb)}")
        if first_a and first_b:
            text += f"; first (compile) step {first_a:,.0f} -> {first_b:,.0f} ms"
        out.append(Finding("versions", text + ".", tuple(run_ids(ra, rb))))
        for g in lb.beside:
            device_used = g.summary_median("device_used_bytes")
            out.append(Finding("versions", (
                f"Measured beside it: {lb.rung} at B={lb.batch_size} on {cmp.ds.name(g.gpu)} / {g.env} (torch {g.torch_version}): "
                f"{g.throughput.point:,.0f} tokens/s, {mib(device_used)} MiB device used, against the user's "
                f"{estimate(ra).point:,.0f} / {mib(ra.memory_bytes)} MiB (torch {ta}) and "
                f"{estimate(rb).point:,.0f} / {mib(rb.memory_bytes)} MiB (torch {tb}) (single samples; GPU "
                "model, driver and data may differ: the reference table lists what is known)."), tuple(run_ids(g, ra, rb))))
    return out


def batch(cmp: Compare) -> list[Finding]:
    """How far B grows: every batch_size sweep (batch searches, and the user's logged B sweep)."""
    out = []
    q = questions.batch(cmp)
    for s in q.sweeps:
        c, largest = s.curve, s.largest
        text = (f"Batch size, {c['rung']} on {cmp.ds.name(c['device'])} / {c['env']} ({c['sweep']}): "
                + ", ".join(f"B={v} {tps:,.0f} tokens/s" for v, tps, _m in s.ran)
                + (f"; did not run: {', '.join(f'{v} {st}' for v, st in s.failed)}" if s.failed else "")
                + f"; largest that ran: B={largest[0]} ({mib(largest[2])} MiB {sweepmod.MEMORY_NAME});"
                f" knee B={c['knee']} ({sweepmod.KNEE_TOLERANCE:.0%} of the best).")
        out.append(Finding("batch", text, tuple(c["run_ids"])))
    for s in q.logged:
        out.append(Finding("batch", (f"Batch size in the user's log ({s.name}), {s.rung} on {s.gpu}: "
                                     + ", ".join(p.text(memory=True) for p in s.points)
                                     + f"; best B={s.best.value} (single samples)."), tuple(run_ids(*s.groups))))
    return out


def sdpa(cmp: Compare) -> list[Finding]:
    out = []
    for (gpu, env), a, b in measured_pairs(cmp, "sdpa_backend"):
        auto, forced = (a, b) if a.workload.sdpa_backend == "auto" else (b, a) if b.workload.sdpa_backend == "auto" else (None, None)
        if auto is None:
            continue
        kernels = auto.kernels
        chose = kernels.sdpa_backend
        names = kernels.attention_kernels or []
        chose_text = f"auto ran {chose} attention" + (f" ({names[0][:70]}...)" if names else "") if chose else \
            "auto's backend is unknown (no kernel capture)"
        out.append(Finding("sdpa", (
            f"SDPA at {auto.label} on {where(cmp, gpu, env, auto)}: {chose_text}, {auto.throughput.point:,.0f} tokens/s; "
            f"forcing {forced.workload.sdpa_backend}: {forced.throughput.point:,.0f} tokens/s "
            f"({Cell(cmp.delta(auto, forced)).brief()} against auto)."), tuple(run_ids(auto, forced))))
    return out


def fastest(cmp: Compare) -> list[Finding]:
    """One finding per device from harness.analysis.fastest's overviews and the kernel split of the fastest found."""
    out = []
    for ov in overviews(cmp):
        seed = ov.seed
        if seed is None:
            continue
        seed_mfu = seed.mfu("mfu_datasheet")
        fits, why = ov.seed_fits
        remark = None if fits else f"does not fit the batch search's headroom: {why}"
        text = (f"{cmp.ds.name(ov.gpu)}: the seed ladder's best run is {_run_name(seed, remark)} ({seed.batch}), "
                f"{estimate(seed).point:,.0f} tokens/s, MFU {_pct(seed_mfu)} of the datasheet peak")
        best = max((c for c in (ov.beyond, ov.tuned) if c is not None), key=lambda c: c.tokens_per_s, default=None)
        if best is not None:
            g = best.group
            vs = ov.vs_seed(g, cmp.floor)
            text += (f"; the fastest found beyond it: {_run_name(g)} ({g.batch}), {estimate(g).point:,.0f} tokens/s, "
                     f"{Cell(vs).brief() if vs is not None else 'n/a'} against it, MFU {_pct(g.mfu('mfu_datasheet'))}, "
                     f"loss {best.parity_text(cmp.loss_tol)}")
            shown = ov.shown
            a, b = kernel_split(shown.partner), kernel_split(shown.group)
            if a is not None and b is not None:
                named = [(k, label) for k, label in (("attention", "attention"), ("gemm", "GEMMs"),
                                                     ("lm_head_gemm", "lm_head GEMMs"))]
                text += ("; kernel time per step against its start: " + ", ".join(
                    f"{label} {a[k] / 1000:,.2f} -> {b[k] / 1000:,.2f} ms" for k, label in named))
        if ov.tuned is None:
            text += "; no harness.tune run is in these records"
        others = ([("the user's best (their log)", ov.user_best)] if ov.user_best is not None else []) + \
                 [(f"peer: {p.first.peer.name or p.label}", p) for p in ov.peers]
        others = [(name, g) for name, g in others if estimate(g).point is not None]
        if others:
            text += "; beside it: " + "; ".join(_beside(others))
        groups = [seed] + [c.group for c in (ov.beyond, ov.tuned) if c is not None] + [g for _n, g in others]
        out.append(Finding("fastest", text + ".", tuple(run_ids(*groups))))
    return out


def _beside(others: list[tuple[str, Group]]) -> list[str]:
    """The logged numbers a device's fastest run stands beside, one entry per name and workload: the median of its
    lines with their count and range where there are several (a peer logged every night)."""
    lines: dict[tuple[str, str], list[float]] = {}
    for name, g in others:
        where = (f"{g.label} (torch {g.first.reference.torch or 'not stated'}), " if g.kind == "reference" else "") + g.batch
        lines.setdefault((name, where), []).append(estimate(g).point)
    out = []
    for (name, where), speeds in lines.items():
        speed, said = logged_number(speeds)
        out.append(f"{name} {speed:,.0f} tokens/s ({f'{said}; ' if said else ''}{where})")
    return out


def _run_name(g: Group, remark: str | None = None) -> str:
    """The plan(s) and rung of a group, as the fastest tables name it."""
    name = f"{'/'.join(sorted({p for p, _r, _i in g.rungs}))} {g.label}" + (f" ({remark})" if remark else "")
    return name + (f" ({len(g.records)} runs pooled)" if len(g.records) > 1 else "")


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%" + (" (peak suspect)" if value > 1.0 else "")


def ladder(cmp: Compare) -> list[Finding]:
    out = []
    for lad in ladders(cmp):
        ok = [s for s in lad.steps if s.tokens_per_s]
        if len(ok) < 2:
            continue
        best = max(ok, key=lambda s: s.tokens_per_s)
        name = lambda s: s.rung if s.rung == s.group.rung_label else f"{s.rung} (= {s.group.rung_label})"
        if lad.cumulative:
            steps = [s for s in ok if s.vs_previous is not None and s.vs_previous.value is not None]
            big = max(steps, key=lambda s: abs(s.vs_previous.value), default=None)
            text = (f"{lad.title(cmp.name)}: {name(ok[0])} {ok[0].tokens_per_s:,.0f} tokens/s -> "
                    f"{name(ok[-1])} {ok[-1].tokens_per_s:,.0f} tokens/s ({Cell(ok[-1].vs_first, 'ratio').text()}); "
                    f"fastest rung {name(best)} ({best.tokens_per_s:,.0f} tokens/s)")
            if big:
                text += f"; largest single step: {name(big)} {Cell(big.vs_previous, 'ratio').text()} vs the rung before"
        else:  # each rung changes one thing against the first: its change is against the first, not the last rung
            steps = [s for s in ok[1:] if s.vs_first is not None and s.vs_first.value is not None]
            big = max(steps, key=lambda s: abs(s.vs_first.value), default=None)
            text = (f"{lad.title(cmp.name)}, each rung against {name(ok[0])} ({ok[0].tokens_per_s:,.0f} tokens/s): "
                    f"fastest rung {name(best)} ({best.tokens_per_s:,.0f} tokens/s)")
            if big:
                text += f"; largest change: {name(big)} {Cell(big.vs_first, 'ratio').text()}"
        ids = [i for s in lad.steps for i in (run_ids(s.group) if s.group is not None else [s.failed.run_id])]
        out.append(Finding("ladder", text + ".", tuple(ids)))
    return out


def compute(cmp: Compare) -> list[Finding]:
    """Every finding, in the report's order."""
    out = ladder(cmp)
    out += tf32_memory(cmp) + vocab(cmp) + versions(cmp) + batch(cmp) + sdpa(cmp) + fastest(cmp)
    for (knob, _ctx), entry in knob_effects(cmp).items():
        cells = sorted(entry["cells"].items(), key=lambda kv: (cmp.gpu_rank[kv[0][0]], cmp.env_rank[kv[0][1]]))
        parts = [f"{Cell(d).brief()} on {cmp.ds.name(gpu)}/{env}" for (gpu, env), (_a, _b, d, _boot) in cells]
        text = f"Knob {knob} (at {entry['at']}): tokens/s " + ", ".join(parts)
        # A knob that changes memory beyond noise says so: a fused lm_head loss is there for its memory, not its speed
        memory = [(cmp.mem_delta(a, b), a.memory[0], gpu, env) for (gpu, env), (a, b, _d, _boot) in cells]
        if any(d.beyond for d, *_ in memory):
            one_metric = len({metric for _d, metric, *_ in memory}) == 1  # then named once, like tokens/s
            text += "; " + (f"{memory[0][1]} " if one_metric else "") + ", ".join(
                ("" if one_metric else f"{metric} ") + f"{Cell(d).brief()} on {cmp.ds.name(gpu)}/{env}"
                for d, metric, gpu, env in memory if d.value is not None)
        out.append(Finding("knobs", text + ".", tuple(i for _k, (a, b, _d, _boot) in cells for i in run_ids(a, b))))
    out += factors(cmp)
    out += cross(cmp)
    out += loss(cmp)
    return out


def factors(cmp: Compare) -> list[Finding]:
    return [Finding("factors", f"{r.knob} (at {r.at}), {cmp.word}s {' -> '.join(map(cmp.name, r.gpus))}, envs {' -> '.join(r.envs)}: GPU factor "
                               f"{Cell(r.gpu_factor, 'pp').brief()}, version factor {Cell(r.version_factor, 'pp').brief()}, "
                               f"interaction {Cell(r.interaction, 'pp').brief()} ({r.verdict(cmp.ds.name)}).", tuple(r.run_ids))
            for r in splits(cmp).rows]


def cross(cmp: Compare) -> list[Finding]:
    out = []
    for across, what in (("env", "Cross-version"), ("gpu", f"Cross-{cmp.word}")):
        rows = cross_result(cmp, across).rows
        deltas = [r for r in rows if r.d_tokens is not None and r.d_tokens.value is not None]
        if not deltas:
            continue
        beyond = [r for r in deltas if r.d_tokens.beyond]
        within = [r for r in deltas if r.d_tokens.verdict == stats.WITHIN]
        text = (f"{what} tokens/s deltas: {len(beyond)} beyond noise, {len(within)} within noise, "
                f"{len(deltas) - len(beyond) - len(within)} without a noise estimate (too few samples)")
        no_base = [r for r in rows if r.base_status != "ok" and not r.is_baseline]
        if no_base:
            text += (f"; {len(no_base)} without a delta because the baseline run failed ("
                     + ", ".join(f"{r.label} B={r.batch_size}: {r.d_tokens.verdict}" for r in no_base) + ")")
        top = sorted(beyond, key=lambda r: -abs(r.d_tokens.value))[:3]
        if top:
            if across == "env":
                show = lambda r: (cmp.ds.name(r.gpu), r.env, r.base_env)
            else:
                show = lambda r: (r.env, cmp.ds.name(r.gpu), cmp.ds.name(r.base_gpu))
            text += "; largest: " + "; ".join(
                f"{r.label} ({r.batch}) on {show(r)[0]}: {show(r)[1]} vs {show(r)[2]} {Cell(r.d_tokens).brief()}, "
                f"memory {Cell(r.d_memory).brief()}" for r in top)
        out.append(Finding("cross", text + ".", tuple(i for r in rows for i in r.run_ids)))
    return out


def loss(cmp: Compare) -> list[Finding]:
    rows = [r for r in parity_rows(cmp) if r.parity in ("ok", "DRIFT")]
    if not rows:
        return []
    drift = [r for r in rows if r.parity == "DRIFT"]
    text = f"Loss parity: {len(rows) - len(drift)} of {len(rows)} comparable cells within {cmp.loss_tol:.1%} of their baseline"
    if drift:
        text += "; drift: " + "; ".join(f"{r.group.label} {cmp.ds.name(r.group.gpu)}/{r.group.env} mean {fmt_signed_pct(r.d_mean)}, "
                                        f"final {fmt_signed_pct(r.d_final)}" for r in drift[:5])
    return [Finding("loss", text + ".", tuple(i for r in rows for i in r.run_ids))]
