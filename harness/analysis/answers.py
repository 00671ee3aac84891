"""The users' questions (../shared/seeds/), answered from the records: per question one to three sentences, the data
of the one chart or table that shows it, the records it rests on, and, where these records cannot answer, the command
that would. Also the report's key findings: one headline per answer and per ladder, ordered by the size of the effect.

Every number is a typed result of the analyses (knob pairs, the 2x2 split, the verdict, sweeps, the fastest
overviews) and every noise word is the Delta's own verdict (stats), so a single sample or a delta not beyond noise is
never worded as a win. No torch import.
"""

from __future__ import annotations

from harness.analysis import questions, stats
from harness.analysis.answer_types import (
    GIB,
    Answer,
    Bar,
    Chart,
    KeyFinding,
    delta_bar,
    gib_span,
    moves,
    said,
    single,
    span,
    title_range,
    verb_title,
)
from harness.analysis.answers_batch import batch, mfu
from harness.analysis.context import Compare
from harness.analysis.group import Group, estimate, run_ids
from harness.analysis.kernel_split import kernel_split
from harness.analysis.knob_pairs import cell_label, padding_setting
from harness.analysis.series import Point, throughput_point
from harness.analysis.tables.knobs import splits
from harness.analysis.tables.ladder import ladders
from harness.analysis.verdict import SERIES, by_series, extremes, verdict
from harness.record.model import OURS, public_version

MEMORY_PARTS = (("tensors_bytes", "live tensors"), ("allocator_cache_bytes", "allocator cache"),
                ("outside_allocator_bytes", "outside the allocator"))
MAX_KEY_FINDINGS = 8
PADDING_AB = "python -m harness.run --plan padding --preset gpt2-124m"
TWO_BUILDS = "nox -s bench-torch212 bench-nightly -- --plan seed-ladder --preset gpt2-124m"
BISECT = ("python -m harness.bisect --rung fused-adamw-clip --preset gpt2-124m --batch-size 64 --metric peak_memory "
          "--good torch212 --bad latest")


# ---------------------------------------------------------------- the questions

def tf32_memory(cmp: Compare) -> Answer:
    q = "Does TF32 change memory, and why?"
    question = questions.tf32(cmp)
    default, refs, effects = question.default, question.refs, question.effects
    if not question.every and not refs:
        return Answer("tf32", q, ["No two runs here differ in TF32 alone."],
                      command="python -m harness.run --plan seed-ladder --preset gpt2-124m --rungs fp32,tf32")
    deltas = [cmp.mem_delta(a, b) for _c, a, b in default]
    metric = default[0][1].memory[0] if default else "memory"
    where = ", ".join(dict.fromkeys(cell_label(cmp, gpu, env, a) for (gpu, env), a, _b in default))
    rose = sum(d.value > 0 for d in deltas if d.value is not None)
    sentences = []
    if default:
        sentences.append(f"With TF32 on, {metric} changed by {span(deltas)} in {len(deltas)} measured pair(s) ({where}), "
                         f"higher in {rose} of them.")
    ref_deltas = [single(stats.counter(a.memory_estimate, b.memory_estimate, cmp.floor)) for a, b in refs]
    if refs:
        sentences.append(f"The user's own log shows {refs[0][0].memory[0]} {span(ref_deltas)} with TF32 on, "
                         "although they remember more memory without it.")
    parts = _split_change(default)
    if parts:
        sentences.append(f"At the peak the change is mostly in {parts[0][0]} ({gib_span(*parts[0][1:])}); "
                         + ", ".join(f"{label} {gib_span(lo, hi)}" for label, lo, hi in parts[1:])
                         + " (explain.memory_split).")
    command = None
    if effects:
        sentences += [e.sentence("TF32's memory rise", " MiB") for e in effects]
    else:
        command = PADDING_AB
        sentences.append("Whether Inductor's own padding causes it, these records cannot say (no padding A/B).")
    chart = Chart("stack", "", units={"": "GiB at the peak"})
    for (gpu, env), a, b in default:
        for g, name in ((a, "fp32"), (b, "tf32")):
            split = g.memory_split
            label = f"{cell_label(cmp, gpu, env, g)} {name}"
            if split.available:
                chart.panels.setdefault("", []).append((label, [((getattr(split, k) or 0) / GIB, part) for k, part in MEMORY_PARTS]))
            elif g.memory_bytes is not None:
                chart.panels.setdefault("", []).append((label, [(g.memory_bytes / GIB, g.memory[0])]))
    values = [d.value for d in deltas if d.value is not None]
    if values:
        verb = moves(deltas, "raises", "lowers")
        chart.title = (f"TF32 does not move {metric} beyond noise" if verb.endswith("beyond noise") else
                       verb_title("TF32", verb, metric, title_range(values))) + (f" "
                       f"on {' and '.join(dict.fromkeys(cmp.name(c[0]) for c, _a, _b in default))}")
    ids = tuple(run_ids(*[g for _c, a, b in default for g in (a, b)]))
    if deltas:
        head = KeyFinding(f"TF32 on changes {metric} by {span(deltas)} over {len(deltas)} measured pair(s)"
                          + (f"; the user's log {span(ref_deltas)}" if refs else "")
                          + (f"; mostly {parts[0][0]}" if parts else "")
                          + questions.padding_clause(effects, " MiB", 0) + ".", max((abs(v) for v in values), default=0.0),
                          tuple(dict.fromkeys([*ids, *(i for e in effects for i in e.records)])))
    else:
        head = KeyFinding(f"TF32 on: the user's log shows {span(ref_deltas)}; no measured pair here.",
                          max((abs(d.value) for d in ref_deltas if d.value is not None), default=0.0),
                          tuple(i for a, b in refs for i in run_ids(a, b)))
    return Answer("tf32", q, sentences, question.records, command, chart if chart.panels else None, headline=head)


def _split_change(pairs) -> list[tuple[str, float, float]]:
    """Per memory-split part: (label, smallest and largest change in GiB over the pairs), largest mean change first."""
    changes: dict[str, list[float]] = {}
    for _c, a, b in pairs:
        sa, sb = a.memory_split, b.memory_split
        if not (sa.available and sb.available):
            continue
        for key, label in MEMORY_PARTS:
            va, vb = getattr(sa, key), getattr(sb, key)
            if va is not None and vb is not None:
                changes.setdefault(label, []).append((vb - va) / GIB)
    ranked = sorted(changes.items(), key=lambda kv: -abs(sum(kv[1]) / len(kv[1])))
    return [(label, min(v), max(v)) for label, v in ranked]


def vocab(cmp: Compare) -> Answer:
    q = "Why did padding the vocabulary 50257 -> 50304 give 30-40% on an H100 but 3% on an A100? Is it the GPU or the torch version?"
    question = questions.vocab(cmp)
    every, pairs, refs, effects = question.every, question.default, question.refs, question.effects
    deltas = [cmp.delta(a, b) for _c, a, b in pairs]
    ref_deltas = [stats.ratio(estimate(a), estimate(b), cmp.floor)[0] for a, b in refs]
    sentences, command = [], None
    if pairs:
        builds = ", ".join(dict.fromkeys(f"torch {cmp.ds.env_versions.get(e) or e}" for (_g, e), _a, _b in pairs))
        devices = " and ".join(dict.fromkeys(cmp.name(g) for (g, _e), _a, _b in pairs))
        sentences.append(f"Here padding changes tokens/s by {span(deltas)} on {devices} ({builds}), over "
                         f"{len(pairs)} pair(s) of rungs")
    if refs:
        text = f"the user's log shows {span(ref_deltas)} on their H100/H800"
        sentences = [sentences[0] + "; " + text + "."] if sentences else [text[0].upper() + text[1:] + "."]
    elif sentences:
        sentences[0] += "."
    sentences += [e.sentence("The vocab-padding speed-up in tokens/s", "%", " pp") for e in effects]
    split = [r for r in splits(cmp).rows if r.knob.startswith("vocab_size")]
    if split:
        sentences.append(f"Split over 2 {cmp.word}s x 2 torch builds: {split[0].verdict(cmp.name)}.")
    else:
        envs = sorted({e for (_g, e), _a, _b in pairs})
        gpus = sorted({g for (g, _e), _a, _b in pairs})
        sentences.append(f"Whether it is the {cmp.word} or the torch version these records cannot say: they hold "
                         f"{len(gpus)} {cmp.word}(s) and {len(envs)} torch build(s), and the split needs the same rungs "
                         f"on 2 {cmp.word}s under 2 builds.")
        command = f"{TWO_BUILDS}   # on each of two {cmp.word}s, then: python -m harness.compare results/ --table factors"
    chart = None
    if pairs or refs:
        def label(g: str, e: str, a: Group) -> str:  # 'h100-80g B=16 bf16': a cell may hold several rungs' pairs
            return f"{cell_label(cmp, g, e, a)} {a.label.split('+')[0]}"
        bars = [delta_bar(label(g, e, a), d) for ((g, e), a, _b), d in zip(pairs, deltas)]
        # the same pair with the compiler's padding off (plan padding): the size of the gain it hides
        unpadded = [(c, a, cmp.delta(a, b)) for c, a, b in every if padding_setting(b) != questions.DEFAULT]
        bars += [delta_bar(f"{cell_label(cmp, g, e, a)} {a.workload.precision}, padding off", d) for (g, e), a, d in unpadded]
        bars += [delta_bar(f"user's log B={a.workload.batch_size}", d, True) for (a, _b), d in zip(refs, ref_deltas)]
        values = [d.value for d in deltas if d.value is not None]
        verb = moves(deltas, "speeds up", "slows down")
        title = ("Vocab 50304 does not move tokens/s beyond noise here" if verb.endswith("beyond noise")
                 else verb_title("Vocab 50304", verb, "tokens/s", title_range(values)) + " here" if values else "Vocab 50304")
        off = [d.value for _c, _a, d in unpadded if d.value is not None]
        if off:
            title += f", {title_range(off)} with Inductor's padding off"
        if ref_deltas:
            title += f"; the user logged {title_range([d.value for d in ref_deltas])}"
        chart = Chart("delta", title, {"": bars}, {"": "change in tokens/s (%); grey: the user's single samples"})
    head = None
    if pairs:
        head = KeyFinding(f"Vocab 50257 -> 50304 changes tokens/s by {span(deltas)} on our {cmp.word}s"
                          + (f", against {span(ref_deltas)} in the user's log" if refs else "")
                          + questions.padding_clause(effects, "%", 1)
                          + ("" if split else f"; {cmp.word} against torch version not separable in these records") + ".",
                          max(abs(d.value) for d in deltas if d.value is not None),
                          tuple(dict.fromkeys([*run_ids(*[g for _c, a, b in pairs for g in (a, b)]),
                                               *(i for e in effects for i in e.records)])))
    if not pairs and not refs:
        sentences = ["No two runs here differ in the vocabulary size alone."]
        command = "python -m harness.run --plan seed-ladder --preset gpt2-124m --rungs sdpa-flash,vocab-50304"
    return Answer("vocab", q, sentences, question.records, command, chart, headline=head)


def versions(cmp: Compare) -> Answer:
    q = "Why did torch nightly use 30 GB less and run faster than 2.1.2 on the same H800 script? Which release changed it?"
    sentences, records, bars_tok, bars_mem = [], [], [], []
    head = None
    for lb in questions.versions(cmp)[:1]:  # the first the user logged: one answer, the findings list every one
        (ta, ra), (tb, rb) = lb.builds
        gpu, rung, b, t = lb.gpu, lb.rung, lb.batch_size, lb.seq_len
        mem = single(stats.counter(ra.memory_estimate, rb.memory_estimate, cmp.floor))
        speed = stats.ratio(estimate(ra), estimate(rb), cmp.floor)[0]
        first = (f", first (compile) step {ra.first.first_step_ms / 1000:,.1f} -> {rb.first.first_step_ms / 1000:,.1f} s"
                 if ra.first.first_step_ms and rb.first.first_step_ms else "")
        sentences.append(f"In the user's log ({gpu}, {rung}, B={b}, T={t}) torch {ta} -> {tb} changed {ra.memory[0]} "
                         f"{ra.memory_bytes / GIB:,.1f} -> {rb.memory_bytes / GIB:,.1f} GiB, {said(mem)}, and tokens/s "
                         f"{said(speed)}{first}.")
        records += run_ids(ra, rb)
        for g, name in ((ra, f"user's log, torch {ta}"), (rb, f"user's log, torch {tb}")):
            bars_tok.append(Bar(name, Point(estimate(g).point / 1000), True))
            bars_mem.append(Bar(name, Point(g.memory_bytes / GIB), True))
        head = KeyFinding(f"The user's log: torch {ta} -> {tb} at B={b}: {ra.memory[0]} {said(mem)}, tokens/s "
                          f"{said(speed)}; which release changed it is not in these records.",
                          abs(mem.value or 0.0), tuple(run_ids(ra, rb)))
        beside = lb.beside
        if beside:
            sentences.append("Beside them, our runs of that rung and B use " + ", ".join(
                f"{g.summary_median('device_used_bytes') / GIB:,.1f} GiB device memory at "
                f"{g.throughput.point / 1000:,.0f}k tokens/s on {cmp.name(g.gpu)} (torch {g.torch_version})"
                for g in beside if g.summary_median("device_used_bytes") is not None)
                + " (other GPUs, drivers and data than the user's).")
            for g in beside:
                used = g.summary_median("device_used_bytes")
                tok = throughput_point(g.throughput)
                label = f"{cmp.name(g.gpu)}, torch {public_version(g.torch_version)}"
                bars_tok.append(Bar(label, Point(tok.value / 1000, *(None if x is None else x / 1000 for x in (tok.low, tok.high)))))
                if used is not None:
                    bars_mem.append(Bar(label, Point(used / GIB)))
                records += run_ids(g)
    env_pairs = [p for p in verdict(cmp).pairs if p.across == "env" and p.rows]
    for p in env_pairs:
        model = "" if p.model == OURS else f" (model {p.model})"
        sentences.append(f"Measured here, {p.other} against {p.base} on {cmp.name(p.same)}{model}: tokens/s {said(p.speed, 'faster')} "
                         f"over {len(p.rows)} rungs" + (f", {p.memory_metric} {said(p.memory)}; {p.memory_changed} of {p.memory_judged} rungs beyond noise" if p.memory else "") + ".")
        records += [i for r in p.rows for i in r.run_ids]
        size = abs(p.speed.value or 0.0)
        if head is None or size > head.size:
            head = KeyFinding(f"{p.other} against {p.base} on {cmp.name(p.same)}{model}: tokens/s {said(p.speed, 'faster')} over "
                              f"{len(p.rows)} rungs" + (f", {p.memory_metric} {said(p.memory)}; {p.memory_changed} of {p.memory_judged} rungs beyond noise" if p.memory else "") + _underneath(p) + ".",
                              size, tuple(i for r in p.rows for i in r.run_ids))
    sentences.append("Which release changed it, these records cannot say: a bisect over the releases between two "
                     "builds on one GPU finds it (docs/bisect.md).")
    chart = None
    if bars_tok:
        user = [b for b in bars_mem if b.hatched]
        saved = user[0].value.value - user[1].value.value if len(user) == 2 else None
        title = (f"The user's {user[1].label.split(', ')[1]} used {abs(saved):,.0f} GiB {'less' if saved > 0 else 'more'} "
                 f"than {user[0].label.split(', ')[1]}" if saved is not None else "Torch builds")
        ours = [b for b in bars_mem if not b.hatched]
        if ours:
            title += f"; ours: {min(b.value.value for b in ours):,.0f}-{max(b.value.value for b in ours):,.0f} GiB"
        chart = Chart("bars", title, {"tokens/s": bars_tok, "memory": bars_mem},
                      {"tokens/s": "thousands of tokens/s (hatched: single samples)", "memory": "GiB (device used; the user's: nvidia-smi)"})
    return Answer("versions", q, sentences, tuple(records), BISECT, chart, headline=head)


def ladder_headlines(cmp: Compare) -> list[KeyFinding]:
    """One finding: per device its seed-ladder-like ladder with the largest first -> last change, the largest first,
    and for that one the step that moved most and the GEMM time underneath it."""
    best: dict[str, tuple] = {}
    for lad in ladders(cmp):
        ok = [s for s in lad.steps if s.tokens_per_s]
        if not lad.cumulative or len(ok) < 2 or ok[-1].vs_first is None or ok[-1].vs_first.value is None:
            continue  # a plan whose rungs each change one thing against a base has no first -> last
        if lad.gpu not in best or ok[-1].vs_first.value > best[lad.gpu][1][-1].vs_first.value:
            best[lad.gpu] = (lad, ok)
    if not best:
        return []
    ranked = sorted(best.values(), key=lambda lo: -lo[1][-1].vs_first.value)
    lad, ok = ranked[0]
    text = (f"From {ok[0].rung} to {ok[-1].rung} (plan {lad.plan}) tokens/s grow " + "; ".join(
        f"{said(o[-1].vs_first, 'ratio')} on {cmp.name(la.gpu)} / {la.env} at B={la.batch_size}" for la, o in ranked))
    steps = [s for s in ok if s.vs_previous is not None and s.vs_previous.value is not None]
    big = max(steps, key=lambda s: abs(s.vs_previous.value), default=None)
    if big is not None:
        text += f". The largest step on {cmp.name(lad.gpu)} is {big.rung}, {said(big.vs_previous, 'ratio')}"
        a, b = kernel_split(ok[ok.index(big) - 1].group), kernel_split(big.group)
        if a is not None and b is not None and a.get("device") == "cuda":
            text += f": GEMM time per step {a['gemm'] / 1000:,.0f} -> {b['gemm'] / 1000:,.0f} ms"
    ids = [i for _la, o in ranked for s in o for i in run_ids(s.group)]
    return [KeyFinding(text + ".", abs(ok[-1].vs_first.value), tuple(ids))]


def device_headlines(cmp: Compare) -> list[KeyFinding]:
    """A device pair's headline per env; a pair of devices compared under more than SERIES envs (a landscape at two
    thread counts) is one headline, its range over the envs, as in the verdict."""
    pairs = [p for p in verdict(cmp).pairs if p.across == "gpu" and p.rows]
    out = []
    for (_across, base, other, _model), ps in by_series(pairs).items():
        if len(ps) > SERIES:
            slow, fast = extremes(ps)
            out.append(KeyFinding(f"{cmp.name(other)} against {cmp.name(base)} under {len(ps)} envs: tokens/s from "
                                  f"{said(slow.speed, 'faster')} (env {slow.same}) to {said(fast.speed, 'faster')} (env "
                                  f"{fast.same}); beyond noise under {sum(p.speed.beyond for p in ps)} of {len(ps)}.",
                                  abs(fast.speed.value or 0.0), tuple(i for p in ps for r in p.rows for i in r.run_ids)))
            continue
        out += [KeyFinding(f"{cmp.name(p.other)} against {cmp.name(p.base)} (env {p.same}"
                           f"{'' if p.model == OURS else f', model {p.model}'}): tokens/s "
                           f"{said(p.speed, 'faster')}, the geometric mean over {len(p.rows)} rungs"
                           + (f"; most at {p.most.label} ({p.most.batch}), {said(p.most.d_tokens, 'faster')}" if p.most else "")
                           + _underneath(p) + ".", abs(p.speed.value or 0.0), tuple(i for r in p.rows for i in r.run_ids))
                for p in ps]
    return out


def _underneath(p) -> str:
    """What explains a pair's largest change, as the verdict found it (a kernel's time per step, else the memory
    split), shortened for a key finding: the kernel's name cut, its times kept."""
    if not p.underneath:
        return ""
    what, _sep, numbers = p.underneath.rpartition(": ")
    what = what if len(what) <= 60 else what[:57] + "..."
    return f"; underneath it: {what}: {numbers}" if what else f"; underneath it: {numbers}"


def compute(cmp: Compare) -> list[Answer]:
    """The five questions, in the users' order (computed once per Compare)."""
    return cmp.cached("answers", lambda c: [tf32_memory(c), vocab(c), versions(c), batch(c), mfu(c)])


def key_findings(cmp: Compare) -> list[KeyFinding]:
    """At most MAX_KEY_FINDINGS: first a folder that shares no machine with the others (every finding below is read
    across it), then each ladder's headline, each device pair's, each answer's, the largest effect first."""
    first = [KeyFinding(f"{what}; {run}.", 0.0) for what, run in (a.said(cmp.name) for a in verdict(cmp).apart)]
    items = ladder_headlines(cmp) + device_headlines(cmp) + [a.headline for a in compute(cmp) if a.headline is not None]
    return (first + sorted(items, key=lambda k: -k.size))[:MAX_KEY_FINDINGS]
