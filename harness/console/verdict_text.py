"""The verdict (harness.analysis.verdict) as text: one block per compared pair (or per series of many), loss parity,
what was left out, the noise every interval rests on and the device legend; as (head, details) blocks the report
lists, and as lines of at most WIDTH characters for compare."""

from __future__ import annotations

from collections import Counter

from harness.analysis import noise_model, stats
from harness.analysis.cells import VERDICT_WORDS, Cell, fmt_change
from harness.analysis.noise import MIN_BETWEEN_DF
from harness.analysis.verdict import SERIES, by_series, extremes, series_key
from harness.console.render import WIDTH, _wrap
from harness.console.textsafe import TEXT, WORD, bounded
from harness.record.model import OURS

MAX_PAIRS = 10  # pairs shown in the verdict; the rest are counted (every one is in --table versions / gpus)


def _times(d: stats.Delta) -> str:
    """A tokens/s ratio as pyperf says it, '1.82x faster [1.67x, 2.41x] (beyond noise)', worded by Cell (where the
    offset between its invocations is not measured, the Noise block says so, once, and what would measure it)."""
    return Cell(d, "faster").text(detail=True)


VERDICT_TITLE = "Verdict: each env against the oldest torch on the same {word}, each {word} against the baseline under the same env"
VERDICT_HOW = (f"tokens/s: geometric mean of the ratios over the rungs both ran, {stats.interval_name()} from the "
               f"run-to-run spread; memory: geometric mean of the peaks")


def verdict_blocks(v, name, word: str, versions: dict) -> list[tuple[str, list[str]]]:
    """The verdict as (head, details) blocks: one per pair, then loss parity, what was left out, the device legend.
    harness.compare wraps them to WIDTH; the report shows them as a nested list. name: device label -> alias;
    versions: env label -> torch version. Each name at most WORD characters, each line at most TEXT
    (harness.console.textsafe.bounded)."""
    env_text = lambda e: f"{bounded(e, WORD)} (torch {bounded(versions.get(e) or '?', WORD)})"
    name = lambda label, alias=name: bounded(alias(label), WORD)
    blocks = []
    compared = [p for p in v.pairs if p.rows]
    # many pairs of one kind said as one block: a device's env pairs (a landscape's builds), or one pair of devices
    # compared under many envs (a landscape at two thread counts); in the pairs' order
    grouped = by_series(compared)
    series = [key for key, ps in grouped.items() if len(ps) > SERIES]
    block_of = {"env": _series_block, "gpu": _device_series_block}
    series_blocks = [block_of[key[0]](grouped[key], name, env_text) for key in series]
    compared = [p for p in compared if series_key(p) not in series]
    shown = compared[:MAX_PAIRS]
    if not shown and not series:
        nothing = (f"Nothing compared: no rung ran ok under two envs on one {word} or on two {word}s under one env "
                   "(--table ladder shows what ran).")
        blocks.append((nothing, []))
    blocks += [_pair_block(p, name, env_text) for p in shown]
    if len(compared) > len(shown):
        blocks.append((f"... and {len(compared) - len(shown)} more pair(s): --table versions, --table gpus", []))
    blocks += series_blocks
    blocks += [_apart_block(a, name) for a in v.apart]
    empty = [p for p in v.pairs if not p.rows]
    if empty:
        text = (f"Not compared: {len(empty)} more pair(s) whose rungs ran ok on one side only (failed or contended on "
                "the other): --table versions, --table gpus")
        blocks.append((text, []))
    blocks += _parity_blocks(v, name) + _left_out_blocks(v, name)
    noise = noise_line(v.noise, name, v.pairs)
    if noise:
        blocks.append(noise)
    blocks = [(bounded(head, TEXT, WORD), [bounded(d, TEXT, WORD) for d in details]) for head, details in blocks]
    devices = "; ".join(f"{bounded(alias, WORD)} = {bounded(label, WORD)}" for alias, label in v.devices)
    return [*blocks, ("Devices: " + devices, [])]  # a list of names: each bounded, however many


def _pair_block(p, name, env_text) -> tuple[str, list[str]]:
    """One compared pair: its speed over the rungs both ran, what moved most, memory, and what is underneath."""
    if p.across == "env":
        head = f"{name(p.same)}: {env_text(p.other)} vs {env_text(p.base)}"
    else:
        head = f"{env_text(p.same)}: {name(p.other)} vs {name(p.base)}"
    if p.model != OURS:
        head += f", model {bounded(p.model, WORD)}"
    detail = f"tokens/s beyond noise in {p.changed} of {len(p.rows)}"
    if p.most is not None and p.most.d_tokens.value is not None:
        detail += f"; most: {p.most.label} ({p.most.batch}) {_times(p.most.d_tokens)}"
    if p.memory is not None and p.memory.value is not None:
        judged = (f"{p.memory_changed} of {p.memory_judged} beyond noise" if p.memory_judged else
                  VERDICT_WORDS[stats.ONE_RUN])  # no rung judged: Cell's words for it
        detail += f"; {p.memory_metric} {fmt_change(p.memory.value)} ({judged})"
    if p.missing:
        detail += f"; {p.missing} rung(s) not ok on one side"
    details = [detail]
    if p.most is not None and p.most.d_tokens.beyond:  # a change within noise has no cause to name
        details.append(f"underneath {p.most.label}: " + (p.underneath or "no kernel profile or memory split on both sides"))
    return f"{head}: {_times(p.speed)} over {len(p.rows)} rung{'s' if len(p.rows) > 1 else ''}", details


def _apart_block(a, name) -> tuple[str, list[str]]:
    """A folder whose runs share no device with the others' (harness.analysis.devices.Apart)."""
    what, run = a.said(name)
    return what, [run]


def _parity_blocks(v, name) -> list[tuple[str, list[str]]]:
    """Loss parity: the cells that drift beyond the tolerance, or that all agree."""
    cells = v.parity_ok + len(v.parity_drift)
    if v.parity_drift:
        worst = v.parity_drift[0]
        return [((f"Loss parity: {len(v.parity_drift)} of {cells} comparable cells drift beyond the tolerance "
                  f"(first: {worst.group.label} on {name(worst.group.gpu)} / {worst.group.env}); --table loss"), [])]
    if cells:
        return [(f"Loss parity: all {cells} comparable cells agree with their baseline cell (--table loss).", [])]
    return []


def _left_out_blocks(v, name) -> list[tuple[str, list[str]]]:
    """What was left out: runs not ok and other files, then the contended runs with their rerun commands."""
    blocks, left = [], []
    if v.not_ok:
        left.append(f"{sum(v.not_ok.values())} run(s) not ok (" + ", ".join(f"{n} {s}" for s, n in v.not_ok.most_common())
                    + ")")
    other = Counter({k: n for k, n in v.left_out.items() if k not in ("not ok", "contended")})
    if other:
        left.append(", ".join(f"{n} {k}" for k, n in other.most_common()))
    if left or not v.contended:
        blocks.append(("Left out: " + ("; ".join(left) if left else "nothing") + " (--table left-out)", []))
    if v.contended:
        runs: dict[tuple, int] = {}  # (which cell, its rerun command) -> how many runs: one line each, counted
        for r in v.contended:
            key = (f"{r.rung} / {r.env} on {name(r.device_label)}", r.rerun_command or "no rerun command")
            runs[key] = runs.get(key, 0) + 1
        shown = list(runs.items())[:3]
        reruns = [f"{where}{f' ({n} runs)' if n > 1 else ''}: {command}" for (where, command), n in shown]
        if len(v.contended) > sum(n for _key, n in shown):
            reruns.append(f"... and {len(v.contended) - sum(n for _key, n in shown)} more (--table left-out)")
        head = (f"Left out as contended (timed while other work kept the CPUs busy; in no delta unless "
                f"--include-contended): {len(v.contended)} run(s); rerun:")
        blocks.append((head, reruns))
    return blocks


def _modes_text(spread: noise_model.DeviceSpread) -> str:
    """' (two modes: 600/790 MiB)' where a configuration's peaks fell at two levels (noise_model.modes), else ''."""
    if not spread.modes:
        return ""
    return " (two modes: " + ", ".join(f"{lo / 2**20:,.0f}/{hi / 2**20:,.0f} MiB" for lo, hi in sorted(spread.modes.values())) + ")"


def noise_line(noise: list, name, pairs: list = ()) -> tuple[str, list[str]] | None:
    """How much runs of one configuration differ on each compared device (the spread every interval rests on), how
    much its invocations differ, and, once, what would measure what is not known where a delta of `pairs` (the
    verdict's) lacked it."""
    if not noise:
        return None
    undecided = {g.gpu for p in pairs for r in p.rows if r.d_tokens.verdict == stats.ONE_RUN for g in (r.base, r.group)}
    unmeasured = {g.gpu for p in pairs for r in p.rows if r.d_tokens.between_unknown for g in (r.base, r.group)}
    lines, unknown, no_lending, no_offset = [], [], [], []
    for n in noise:
        t = n.tokens
        if t is None:
            unknown.append(name(n.device))
            continue
        text = (f"{name(n.device)} {t.sd:.1%} ({t.runs} runs of {t.cells} config{'s' if t.cells != 1 else ''}"
                + (f", {n.calibration_runs} of them calibration" if n.calibration_runs else ""))
        if t.apart:
            spreads = ", ".join(f"{s.sd:.1%}" for s in sorted(t.apart.values(), key=lambda s: (s.var, s.df)))
            text += f"; {len(t.apart)} apart: {spreads}"
        text += ")" + (f", {t.between.sd:.1%} between invocations" if t.between is not None else "")
        mem = ", ".join(f"{m} {x.sd:.1%}{_modes_text(x)}" for m, x in sorted(n.memory.items()))
        lines.append(text + (f", {mem}" if mem else ""))
        if not t.borrowable and n.device in undecided:
            no_lending.append(name(n.device))
        if t.between is None and n.device in unmeasured:
            no_offset.append(name(n.device))
    if unknown:
        lines.append(f"unknown on {', '.join(unknown)} (no configuration with 2+ runs of one invocation; --repeats "
                     f"{stats.REPEATS_TO_KNOW} or python -m harness.calibrate to know)")
    if not lines:
        return None
    notes = []
    if no_lending:
        notes.append(f"no spread to lend a one-run cell on {', '.join(no_lending)} (one configuration measured, or "
                     "configurations unlike in noise: python -m harness.calibrate --rung with two rungs)")
    if no_offset:
        notes.append(f"offset between invocations unmeasured: {', '.join(no_offset)} (harness.calibrate {MIN_BETWEEN_DF + 1}x)")
    return "Noise: runs of one configuration (config) differ by (sd of tokens/s, memory) " + "; ".join(lines), notes


def _range(pairs: list) -> tuple:
    """Over many pairs: the fastest and the slowest, and a line of their verdicts counted and the memory range."""
    slowest, fastest = extremes(pairs)
    faster = sum(p.speed.beyond and p.speed.value > 0 for p in pairs)
    slower = sum(p.speed.beyond and p.speed.value < 0 for p in pairs)
    mem = [p.memory.value for p in pairs if p.memory is not None and p.memory.value is not None]
    counted = (f"tokens/s beyond noise: {faster} faster, {slower} slower, {len(pairs) - faster - slower} within noise"
               + (f"; {pairs[-1].memory_metric} {fmt_change(min(mem))} to {fmt_change(max(mem))}" if mem else ""))
    return fastest, slowest, counted


def _series_block(pairs: list, name, env_text) -> tuple[str, list[str]]:
    """Many torch builds on one device against the oldest (a bisect's or landscape's records): the newest, the
    fastest and the slowest against it in one block, instead of a block per build."""
    newest = pairs[-1]
    fastest, slowest, counted = _range(pairs)
    head = (f"{name(newest.same)}: {len(pairs)} torch builds against {env_text(newest.base)}: newest "
            f"{env_text(newest.other)} {_times(newest.speed)}")
    details = [(f"fastest {env_text(fastest.other)} {_times(fastest.speed)}; slowest {env_text(slowest.other)} "
                f"{_times(slowest.speed)}"),
               counted + "; each build: --table versions; against the version: python -m harness.report (its chart)"]
    return head, details


def _device_series_block(pairs: list, name, env_text) -> tuple[str, list[str]]:
    """Two devices compared under many envs (a landscape measured at two thread counts, or on two CPUs): the range
    over the envs in one block, instead of a block per env."""
    first = pairs[0]
    fastest, slowest, counted = _range(pairs)
    head = (f"{name(first.other)} vs {name(first.base)} under {len(pairs)} envs ({first.same} .. {pairs[-1].same}): "
            f"from {_times(slowest.speed)} under {env_text(slowest.same)}")
    return head, [f"to {_times(fastest.speed)} under {env_text(fastest.same)}", counted + "; each env: --table gpus"]


def verdict_lines(v, name, word: str, versions: dict) -> list[str]:
    """The verdict as text lines of at most WIDTH characters."""
    lines = [VERDICT_TITLE.format(word=word)[:WIDTH], *_wrap("(" + VERDICT_HOW + ")")]
    for head, details in verdict_blocks(v, name, word, versions):
        lines += _wrap(head, "")
        for d in details:
            lines += _wrap(d)
    return lines
