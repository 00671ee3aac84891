"""The report's findings, computed from whatever records are given; each cites the records it rests on.

Nothing here knows the user's log or the GPUs by name: a finding exists when the records contain the
pairs it needs, and says so when they do not. Topics, in the report's order:

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
               user's best and the peer, and the kernel time that explains the gain (harness.analysis.fastest's tables)
  knobs, factors, cross, loss   the generic tables' headlines

The pairs of runs that differ in one knob, and the phrases that describe a pair: harness.analysis.knob_pairs. No torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness import sweep as sweepmod
from harness.analysis import stats
from harness.analysis.cells import Cell, Table
from harness.analysis.context import Compare
from harness.analysis.dataset import short_gpu
from harness.analysis.fastest import BEYOND_ROW, OVERVIEW_TITLE, SEED_ROW, SPLIT_TITLE, TUNE_ROW, USER_ROW
from harness.analysis.group import Group, run_ids
from harness.analysis.knob_pairs import (
    MIB,
    lm_head_text,
    measured_pairs,
    memory_text,
    mib,
    ok_references,
    padding_setting,
    ref_torch,
    ref_where,
    reference_pairs,
    speed_text,
    where,
)

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
    pairs = measured_pairs(cmp, "precision", "fp32", "tf32")
    refs = reference_pairs(cmp, "precision", "fp32", "tf32")
    if not pairs and not refs:
        return []
    out = []
    rose = fell = 0
    for (gpu, env), a, b in pairs:
        if a.memory_bytes is not None and b.memory_bytes is not None:
            rose, fell = rose + (b.memory_bytes > a.memory_bytes), fell + (b.memory_bytes < a.memory_bytes)
        text = f"TF32 on (fp32 -> tf32) on {where(cmp, gpu, env, a)}, compiler padding {padding_setting(a)}: {memory_text(a, b)}; {speed_text(cmp, a, b)}."
        seen = [t for t in (lm_head_text(a, "fp32 lm_head GEMMs"), lm_head_text(b, "tf32")) if t]
        if seen:
            text += " Kernel capture: " + "; ".join(seen) + "."
        out.append(Finding("tf32-memory", text, tuple(run_ids(a, b))))
    for a, b in refs:
        if a.memory_bytes is not None and b.memory_bytes is not None:
            rose, fell = rose + (b.memory_bytes > a.memory_bytes), fell + (b.memory_bytes < a.memory_bytes)
        out.append(Finding("tf32-memory", f"TF32 on (fp32 -> tf32) in {ref_where(a)}: {memory_text(a, b)}; {speed_text(cmp, a, b)}.",
                           tuple(run_ids(a, b))))
    summary = (f"Memory with TF32 on against IEEE fp32, same rung otherwise: higher in {rose} and lower in {fell} of "
               f"{len(pairs) + len(refs)} pair(s) ({len(pairs)} measured" + (f", {len(refs)} from the user's log" if refs else "") + ").")
    out.insert(0, Finding("tf32-memory", summary, tuple(i for f in out for i in f.records)))
    out += padding_ab(cmp, pairs, "TF32's memory rise", lambda a, b: _delta_bytes(a, b), "MiB")
    return out


def _delta_bytes(a: Group, b: Group) -> float | None:
    return None if a.memory_bytes is None or b.memory_bytes is None else (b.memory_bytes - a.memory_bytes) / MIB


def _delta_speed(cmp: Compare):
    def delta(a: Group, b: Group) -> float | None:
        return cmp.delta(a, b).value * 100 if cmp.delta(a, b).value is not None else None
    return delta


def padding_ab(cmp: Compare, pairs, what: str, measure, unit: str) -> list[Finding]:
    """The same knob's effect with the compiler's padding at torch's default and with it switched off (plan
    `padding`): how much of the effect is the compiler's own padding."""
    by_cell: dict[tuple, dict[str, tuple]] = {}
    for cell, a, b in pairs:  # the same two workloads, once per padding setting
        by_cell.setdefault((cell, a.workload_hash, b.workload_hash), {})[padding_setting(a)] = (a, b)
    out = []
    for (cell, _wa, _wb), settings in by_cell.items():
        if "default" not in settings or len(settings) < 2:
            continue
        a0, b0 = settings["default"]
        base = measure(a0, b0)
        for setting, (a, b) in settings.items():
            if setting == "default" or base is None or measure(a, b) is None:
                continue
            off = measure(a, b)
            out.append(Finding("padding-ab", (
                f"{what} on {where(cmp, *cell, a0)}: {base:+,.1f} {unit} with the compiler's padding at torch's default, "
                f"{off:+,.1f} {unit} with {setting}: the compiler's padding accounts for {base - off:+,.1f} {unit} of it."),
                tuple(run_ids(a0, b0, a, b))))
    if pairs and not out:
        out.append(Finding("padding-ab", (
            f"No padding A/B among these records for {what}: `python -m harness.run --plan padding --preset gpt2-124m` "
            "runs the same rungs with Inductor's shape_padding and comprehensive_padding at default and off."), ()))
    return out


def vocab(cmp: Compare) -> list[Finding]:
    pairs = [p for p in measured_pairs(cmp, "vocab_size") if p[1].workload.get("vocab_size") == 50257]
    refs = [p for p in reference_pairs(cmp, "vocab_size") if p[0].workload.get("vocab_size") == 50257]
    out = []
    for (gpu, env), a, b in pairs:
        text = (f"Vocab {a.workload['vocab_size']} -> {b.workload['vocab_size']} at {a.label} on {where(cmp, gpu, env, a)}, "
                f"compiler padding {padding_setting(a)}: {speed_text(cmp, a, b)}; {memory_text(a, b)}.")
        seen = lm_head_text(a, f"kernel capture at {a.workload['vocab_size']}")
        if seen:
            text += f" {seen}."
        out.append(Finding("vocab", text, tuple(run_ids(a, b))))
    for a, b in refs:
        out.append(Finding("vocab", (f"Vocab {a.workload['vocab_size']} -> {b.workload['vocab_size']} at {a.label} in "
                                     f"{ref_where(a)}: {speed_text(cmp, a, b)}; {memory_text(a, b)}."), tuple(run_ids(a, b))))
    out += padding_ab(cmp, pairs, "the vocab-padding speed-up", _delta_speed(cmp), "% tokens/s") if pairs else []
    return out


def versions(cmp: Compare) -> list[Finding]:
    """Between torch builds in the user's log, and our runs beside the user's numbers for the same rung and B
    (measured envs against each other: the cross-version finding)."""
    out = []
    logged: dict[tuple, dict[str, Group]] = {}
    for r in sorted(ok_references(cmp), key=lambda g: (g.first.get("reference") or {}).get("line") or 0):
        key = (r.gpu, r.first.get("rung"), r.workload.get("batch_size"), r.workload.get("seq_len"), r.workload.get("compile"))
        logged.setdefault(key, {}).setdefault(ref_torch(r), r)
    for (gpu, rung, b, t, _c), builds in logged.items():
        stated = {k: v for k, v in builds.items() if k != "torch not stated"}
        if len(stated) < 2:
            continue
        (ta, ra), (tb, rb) = list(stated.items())[:2]
        first_a, first_b = (ra.first.get("summary") or {}).get("first_step_ms"), (rb.first.get("summary") or {}).get("first_step_ms")
        text = (f"The user's log, {rung} at B={b}, T={t} on {gpu}: torch {ta} -> {tb}: {speed_text(cmp, ra, rb)}; "
                f"{memory_text(ra, rb)}")
        if first_a and first_b:
            text += f"; first (compile) step {first_a:,.0f} -> {first_b:,.0f} ms"
        out.append(Finding("versions", text + ".", tuple(run_ids(ra, rb))))
        for g in _matching_groups(cmp, rung, b, t):
            device_used = g.summary_median("device_used_bytes")
            out.append(Finding("versions", (
                f"Measured beside it: {rung} at B={b} on {short_gpu(g.gpu)} / {g.env} (torch {g.torch_version}): "
                f"{g.throughput.point:,.0f} tokens/s, {mib(device_used)} MiB device used, against the user's "
                f"{cmp.ref_estimate(ra).point:,.0f} / {mib(ra.memory_bytes)} MiB (torch {ta}) and "
                f"{cmp.ref_estimate(rb).point:,.0f} / {mib(rb.memory_bytes)} MiB (torch {tb}) (single samples; GPU "
                "model, driver and data may differ: the reference table lists what is known)."), tuple(run_ids(g, ra, rb))))
    return out


def _matching_groups(cmp: Compare, rung, b, t) -> list[Group]:
    return [g for g in cmp.ds.groups if g.in_ladder and rung in {r for _p, r, _i in g.rungs}
            and g.workload.get("batch_size") == b and g.workload.get("seq_len") == t]


def batch(cmp: Compare) -> list[Finding]:
    """How far B grows: every batch_size sweep (batch searches, and the user's logged B sweep)."""
    out = []
    records = cmp.sweep_records()
    for curve in sweepmod.sweep_curves(records):
        if curve["field"] != "batch_size":
            continue
        points = list(zip(curve["values"], curve["tokens_per_s"], curve["peak_memory_bytes"], curve["statuses"], strict=True))
        ran = [(v, tps, mem) for v, tps, mem, st in points if tps is not None]
        failed = [f"{v} {st}" for v, tps, _m, st in points if tps is None]
        if not ran:
            continue
        largest = max(ran, key=lambda p: p[0])
        text = (f"Batch size, {curve['rung']} on {short_gpu(curve['device'])} / {curve['env']} ({curve['sweep']}): "
                + ", ".join(f"B={v} {tps:,.0f} tokens/s" for v, tps, _m in ran)
                + (f"; did not run: {', '.join(failed)}" if failed else "")
                + f"; largest that ran: B={largest[0]} ({mib(largest[2])} MiB {sweepmod.MEMORY_DEFINITION.split(': ')[0]});"
                f" knee B={curve['knee']} ({sweepmod.KNEE_TOLERANCE:.0%} of the best).")
        ids = [r["run_id"] for r in records if sweepmod.curve_key(r) == (curve["sweep"], curve["field"], curve["plan"],
                                                                        curve["rung"], curve["env"], curve["device"])]
        out.append(Finding("batch", text, tuple(ids)))
    refs: dict[tuple, list[Group]] = {}
    for r in ok_references(cmp):
        if r.sweep and r.sweep.get("field") == "batch_size":
            refs.setdefault((r.sweep.get("name"), r.first.get("rung"), r.gpu), []).append(r)
    for (name, rung, gpu), groups in refs.items():
        groups.sort(key=lambda g: g.sweep.get("value") or 0)
        best = max(groups, key=lambda g: cmp.ref_estimate(g).point or 0)
        out.append(Finding("batch", (f"Batch size in the user's log ({name}), {rung} on {gpu}: "
                                     + ", ".join(f"B={g.sweep.get('value')} {cmp.ref_estimate(g).point:,.0f} tokens/s "
                                                 f"({mib(g.memory_bytes)} MiB)" for g in groups)
                                     + f"; best B={best.sweep.get('value')} (single samples)."), tuple(run_ids(*groups))))
    return out


def sdpa(cmp: Compare) -> list[Finding]:
    out = []
    for (gpu, env), a, b in measured_pairs(cmp, "sdpa_backend"):
        auto, forced = (a, b) if a.workload.get("sdpa_backend") == "auto" else (b, a) if b.workload.get("sdpa_backend") == "auto" else (None, None)
        if auto is None:
            continue
        kernels = auto.explain.get("kernels") or {}
        chose = kernels.get("sdpa_backend") if kernels.get("available") else None
        names = kernels.get("attention_kernels") or []
        chose_text = f"auto ran {chose} attention" + (f" ({names[0][:70]}...)" if names else "") if chose else \
            "auto's backend is unknown (no kernel capture)"
        out.append(Finding("sdpa", (
            f"SDPA at {auto.label} on {where(cmp, gpu, env, auto)}: {chose_text}, {auto.throughput.point:,.0f} tokens/s; "
            f"forcing {forced.workload.get('sdpa_backend')}: {forced.throughput.point:,.0f} tokens/s "
            f"({Cell(cmp.delta(auto, forced)).brief()} against auto)."), tuple(run_ids(auto, forced))))
    return out


def fastest(tables: list[Table]) -> list[Finding]:
    """One finding per GPU from harness.analysis.fastest's overview table and the kernel split after it."""
    out = []
    for i, t in enumerate(tables):
        if not t.title.startswith(OVERVIEW_TITLE):
            continue
        gpu = t.title.removeprefix(OVERVIEW_TITLE)
        rows = {r["what"]: r for r in t.rows}
        seed = rows.get(SEED_ROW) or {}
        if seed.get("tokens_s") is None:
            continue
        text = (f"{short_gpu(gpu)}: the seed ladder's best run is {seed['run']} ({seed['batch']}), {seed['tokens_s']:,.0f} "
                f"tokens/s, MFU {seed['mfu_ds'].text() if seed.get('mfu_ds') else 'n/a'} of the datasheet peak")
        found = [r for r in t.rows if r["what"] in (BEYOND_ROW, TUNE_ROW) and r.get("tokens_s") is not None]
        best = max(found, key=lambda r: r["tokens_s"], default=None)
        if best is not None:
            text += (f"; the fastest found beyond it: {best['run']} ({best['batch']}), {best['tokens_s']:,.0f} tokens/s, "
                     f"{best['vs_seed'].brief() if best.get('vs_seed') else 'n/a'} against it, MFU "
                     f"{best['mfu_ds'].text() if best.get('mfu_ds') else 'n/a'}, "
                     f"loss {best['parity']}")
            split = tables[i + 1] if i + 1 < len(tables) and tables[i + 1].title.startswith(SPLIT_TITLE) else None
            parts = {r["what"]: r for r in split.rows} if split else {}
            named = [(k, label) for k, label in (("attention kernels", "attention"), ("GEMMs, all", "GEMMs"),
                                                 ("lm_head GEMMs (part of the GEMMs above)", "lm_head GEMMs"))
                     if parts.get(k, {}).get("a") is not None]
            if named:
                text += ("; kernel time per step against its start: " + ", ".join(
                    f"{label} {parts[k]['a']} -> {parts[k]['b']} ms" for k, label in named))
        if (rows.get(TUNE_ROW) or {}).get("tokens_s") is None:
            text += "; no harness.tune run is in these records"
        others = [r for r in t.rows if (r["what"] == USER_ROW or r["what"].startswith("peer")) and r.get("tokens_s") is not None]
        if others:
            text += "; beside it: " + "; ".join(
                f"{r['what']} {r['tokens_s']:,.0f} tokens/s ({r['run'] + ', ' if r['what'] == USER_ROW else ''}{r['batch']})"
                for r in others)
        ids = [x for r in t.rows for x in r.get("run_ids", ())]
        out.append(Finding("fastest", text + ".", tuple(ids)))
    return out


def ladder(ladder_tables: list[Table]) -> list[Finding]:
    out = []
    for t in ladder_tables:
        ok = [r for r in t.rows if r.get("tokens_s")]
        if len(ok) < 2:
            continue
        best = max(ok, key=lambda r: r["tokens_s"])
        steps = [r for r in ok if isinstance(r.get("vs_previous"), Cell) and r["vs_previous"].delta.value is not None]
        big = max(steps, key=lambda r: abs(r["vs_previous"].delta.value), default=None)
        text = (f"{t.title.removeprefix('Ladder: ')}: {ok[0]['rung']} {ok[0]['tokens_s']:,.0f} tokens/s -> "
                f"{ok[-1]['rung']} {ok[-1]['tokens_s']:,.0f} tokens/s ({ok[-1]['vs_first'].text()}); "
                f"fastest rung {best['rung']} ({best['tokens_s']:,.0f} tokens/s)")
        if big:
            text += f"; largest single step: {big['rung']} {big['vs_previous'].text()} vs the rung before"
        out.append(Finding("ladder", text + ".", tuple(i for r in t.rows for i in r.get("run_ids", ()))))
    return out


def compute(cmp: Compare, tables: dict[str, list[Table]], effects: dict) -> list[Finding]:
    """Every finding, in the report's order."""
    out = ladder(tables["ladder"])
    out += tf32_memory(cmp) + vocab(cmp) + versions(cmp) + batch(cmp) + sdpa(cmp) + fastest(tables.get("fastest", []))
    for (knob, _ctx), entry in effects.items():
        cells = sorted(entry["cells"].items(), key=lambda kv: (cmp.gpu_rank[kv[0][0]], cmp.env_rank[kv[0][1]]))
        parts = [f"{Cell(d).brief()} on {short_gpu(gpu)}/{env}" for (gpu, env), (_a, _b, d, _boot) in cells]
        out.append(Finding("knobs", f"Knob {knob} (at {entry['at']}): tokens/s " + ", ".join(parts) + ".",
                           tuple(i for _k, (a, b, _d, _boot) in cells for i in run_ids(a, b))))
    out += factors(tables["factors"][0])
    out += cross(tables)
    out += loss(cmp, tables["loss"][0])
    return out


def interaction_dominates(row: dict) -> bool:
    """The 2x2's interaction is beyond noise and larger than both factors."""
    g, v, i = row["gpu_factor"].delta, row["version_factor"].delta, row["interaction"].delta
    return i.beyond and all(d.value is not None and abs(i.value) > abs(d.value) for d in (g, v))


def split_verdict(row: dict) -> str:
    """What a 2x2 split says, in words: which factor is real and larger, or that the interaction is larger than
    both (then the effect belongs to one GPU together with one torch build, not to either alone)."""
    g, v, i = row["gpu_factor"].delta, row["version_factor"].delta, row["interaction"].delta
    if interaction_dominates(row):
        text = "the interaction is larger than both factors, so the effect is not the GPU's or the torch version's alone"
        if row.get("standout"):
            gpu, env = row["standout"]
            here = row["cells"][row["standout"]]
            others = sorted(d.value for q, d in row["cells"].items() if q != row["standout"])
            text += (f": it comes from {short_gpu(gpu)} together with {env} ({Cell(here).brief()} there, "
                     f"{others[0] * 100:+.1f}% to {others[-1] * 100:+.1f}% in the other three cells)")
        return text
    real = [(name, d) for name, d in (("the GPU", g), ("the torch version", v)) if d.beyond]
    if not real:
        text = "neither factor is beyond noise"
    elif len(real) == 1:
        text = f"only {real[0][0]} factor is beyond noise"
    else:
        text = f"both are beyond noise; the larger is {max(real, key=lambda nd: abs(nd[1].value))[0]}"
    if i.beyond:
        text += "; the interaction is beyond noise too: the version change differs between the GPUs"
    return text


def factors(table: Table) -> list[Finding]:
    return [Finding("factors", f"{r['knob']} (at {r['at']}), GPUs {r['gpus']}, envs {r['envs']}: GPU factor "
                               f"{r['gpu_factor'].brief()}, version factor {r['version_factor'].brief()}, "
                               f"interaction {r['interaction'].brief()} ({split_verdict(r)}).", tuple(r.get("run_ids", ())))
            for r in table.rows]


def cross(tables: dict[str, list[Table]]) -> list[Finding]:
    out = []
    for name, what in (("versions", "Cross-version"), ("gpus", "Cross-GPU")):
        rows = tables[name][0].rows
        deltas = [r for r in rows if isinstance(r.get("d_tokens_s"), Cell) and r["d_tokens_s"].delta.value is not None]
        if not deltas:
            continue
        beyond = [r for r in deltas if r["d_tokens_s"].delta.beyond]
        within = [r for r in deltas if r["d_tokens_s"].delta.verdict == stats.WITHIN]
        text = (f"{what} tokens/s deltas: {len(beyond)} beyond noise, {len(within)} within noise, "
                f"{len(deltas) - len(beyond) - len(within)} without a noise estimate (too few samples)")
        no_base = [r for r in rows if r.get("base_status", "ok") != "ok" and not r.get("is_baseline")]
        if no_base:
            text += (f"; {len(no_base)} without a delta because the baseline run failed ("
                     + ", ".join(f"{r['rung']} B={r['batch_size']}: {r['d_tokens_s'].delta.verdict}" for r in no_base) + ")")
        top = sorted(beyond, key=lambda r: -abs(r["d_tokens_s"].delta.value))[:3]
        if top:
            key, other = ("gpu", "env") if name == "versions" else ("env", "gpu")
            show = (lambda v, col: short_gpu(v) if col == "gpu" else v)
            text += "; largest: " + "; ".join(
                f"{r['rung']} ({r['batch']}) on {show(r[key], key)}: {show(r[other], other)} vs "
                f"{show(r['base_' + other], other)} {Cell(r['d_tokens_s'].delta).brief()}, "
                f"memory {Cell(r['d_memory'].delta).brief()}" for r in top)
        out.append(Finding("cross", text + ".", tuple(i for r in rows for i in r.get("run_ids", ()))))
    return out


def loss(cmp: Compare, table: Table) -> list[Finding]:
    rows = [r for r in table.rows if r.get("parity") in ("ok", "DRIFT")]
    if not rows:
        return []
    drift = [r for r in rows if r["parity"] == "DRIFT"]
    text = f"Loss parity: {len(rows) - len(drift)} of {len(rows)} comparable cells within {cmp.loss_tol:.1%} of their baseline"
    if drift:
        text += "; drift: " + "; ".join(f"{r['rung']} {short_gpu(r['gpu'])}/{r['env']} mean {r['d_mean']}, final {r['d_final']}"
                                        for r in drift[:5])
    return [Finding("loss", text + ".", tuple(i for r in rows for i in r.get("run_ids", ())))]
