"""Tables to text: the plain-text and markdown tables, CSV and JSON of harness.compare (harness.report's HTML reuses
display_rows, the one place a row's values become display text)."""

from __future__ import annotations

import csv
import io
import json
import re
import textwrap
from collections import Counter

from tabulate import tabulate

from harness.analysis import stats
from harness.analysis.cells import (
    SHOWN_AS_TEXT,
    VERDICT_WORDS,
    Cell,
    Memory,
    Mfu,
    Table,
    fmt_change,
    fmt_int,
    fmt_mib,
    fmt_ms,
    fmt_pct,
)
from harness.analysis.dataset import Dataset
from harness.analysis.noise import MIN_BETWEEN_DF
from harness.analysis.verdict import SERIES, by_series, extremes, series_key
from harness.console.textsafe import CELL, TEXT, WORD, bounded, csv_cell, csv_comment, markdown_cell, one_line
from harness.console.textsafe import markdown as md

WIDTH = 120  # what compare's plain-text output fits in: the verdict, and every table (cells wrap)


def display_rows(table: Table) -> list[list]:
    """Each row's values as display text: numbers formatted, a text (a name, a reason) at most CELL characters, none
    of its words over WORD (harness.console.textsafe.bounded); the rows' values themselves are unchanged (JSON, CSV)."""
    keys = [k for k, _h in table.columns]
    fmt = {"ms": fmt_ms, "ref_ms": fmt_ms, "first": fmt_ms,
           "tokens_s": fmt_int, "ref_tokens_s": fmt_int, "memory": fmt_mib, "ref_mem": fmt_mib, "mem": fmt_mib,
           "mfu": fmt_pct, "impact": lambda x: f"{x:+,.0f}"}
    out = []
    for row in table.rows:
        line = []
        for k in keys:
            v = row.get(k)
            if isinstance(v, (Cell, Mfu, *SHOWN_AS_TEXT)):
                v = v.text()
                v = v if v is None else bounded(v, CELL, WORD)
            elif k in fmt and isinstance(v, (int, float)):
                v = fmt[k](v)
            elif isinstance(v, str):  # a name from a record: on its row (a newline would start a forged line)
                v = one_line(bounded(v, CELL, WORD))
            line.append("" if v is None else v)
        out.append(line)
    return out


def fit_widths(headers: list[str], rows: list[list], width: int = WIDTH, gap: int = 2,
               floor: int = 10) -> tuple[list, list] | None:
    """(cell widths, header widths) that fit a plain-text table in `width` characters once its cells are wrapped at
    them: the widest columns are narrowed to one common cap (down to `floor`), none below its longest word.
    None when the table fits as it is; [] when it cannot fit (too many columns: render_text lists it row by row).
    tabulate pads a header by 2 (its MIN_PADDING) in the simple format."""
    def longest_word(text, most):
        return min(max((len(w) for w in _kept_whole(str(text)).split()), default=0), most)

    natural = [max([len(str(h)) + 2] + [max((len(x) for x in str(r[i]).splitlines()), default=0) for r in rows])
               for i, h in enumerate(headers)]
    # a column is not narrowed below its header's longest word, nor below its cells' (rung names, GPU labels) up to 20
    least = [max(longest_word(h, 99) + 2, *(longest_word(r[i], 20) for r in rows)) for i, h in enumerate(headers)]
    budget = width - gap * (len(natural) - 1)
    if sum(natural) <= budget:
        return None

    def widths(cap):
        return [max(min(n, cap), m) for n, m in zip(natural, least)]

    cap = max(natural)
    while cap > floor and sum(widths(cap)) > budget:
        cap -= 1
    if sum(widths(cap)) > budget:
        return []
    cells = [None if w >= n else w for w, n in zip(widths(cap), natural)]
    return cells, [None if w is None else w - 2 for w in cells]


_INSIDE_A_NAME = re.compile(r"(?<=_)(?=\S)|(?<=\+)(?=[A-Za-z])")  # after a '_', or a '+' before a letter
_INTERVAL = re.compile(r"\[[^\[\]\s]*(?: [^\[\]\s]+){1,2}\]")  # a delta's interval: '[+7.2%, +8.2%]', '[range 1x, 2x]'
_KEPT_SPACE = "\x01"


def _kept_whole(text: str) -> str:
    """text with the spaces inside each interval made a mark no wrap breaks at: an interval is read whole."""
    return _INTERVAL.sub(lambda m: m.group().replace(" ", _KEPT_SPACE), text)


class _Wrapper(textwrap.TextWrapper):
    """Wraps at spaces and at the marks _fill puts inside a name too long for the column (dropped as it splits)."""
    wordsep_simple_re = re.compile(r"(\s+)|\x00")


def _fill(cell, width: int | None):
    """A cell's text wrapped at width (its own line breaks kept), at spaces; a name longer than the width is broken
    after a '_' or a '+' ('inductor_comprehensive_' / 'padding', 'best-of-ladder+' / 'fused-adamw-clip'), not inside
    a word of it, and only a piece still too long is cut. As it is where the column needs no wrapping."""
    if width is None or not isinstance(cell, str) or len(cell) <= width:
        return cell
    wrapper = _Wrapper(width, break_on_hyphens=False)

    def marked(line: str) -> str:
        return " ".join(_INSIDE_A_NAME.sub("\x00", w) if len(w) > width else w for w in _kept_whole(line).split(" "))
    return "\n".join("\n".join(wrapper.wrap(marked(line)) or [""]) for line in cell.splitlines()).replace(_KEPT_SPACE, " ")


def _row_lines(headers: list[str], row: list) -> list[str]:
    """One row of a table too wide for WIDTH, as "- column: value; column: value" wrapped (empty cells left out)."""
    items = [f"{h}: {' '.join(str(c).split())}" for h, c in zip(headers, row) if str(c).strip()]
    return _wrap("- " + "; ".join(items), "")


def render_text(tables: list[Table], header: list[str], footer: list[str], markdown: bool = False) -> str:
    """Plain text or Markdown. In Markdown every piece of text is escaped (harness.console.textsafe: a record's strings
    carry no HTML, links or images into a page); the caller makes the whole text safe for a terminal."""
    def esc(text) -> str:  # a title, a note, a line: bounded (harness.console.textsafe.bounded), then escaped for Markdown
        text = bounded(text, TEXT, WORD)
        return md(text) if markdown else text

    parts = [("\n".join(map(esc, header)) + "\n") if header else ""]
    for t in tables:
        if markdown:
            parts.append(f"### {esc(t.title)}\n")
        else:
            parts += _wrap(f"== {esc(t.title)}", "")
        if t.rows:
            rows = display_rows(t)
            if markdown:
                rows = [[markdown_cell(c) for c in r] for r in rows]
            headers = [(md if markdown else str)(bounded(h, CELL, WORD)) for _k, h in t.columns]
            fit = None if markdown else fit_widths(headers, rows)
            if fit == []:  # too many columns for WIDTH: each row as one wrapped "column: value; ..." item
                parts += [line for r in rows for line in _row_lines(headers, r)]
            else:
                if fit:  # wrapped here, not by tabulate's maxcolwidths: 0.10 parses '30,071' as an int there and fails
                    rows = [[_fill(c, w) for c, w in zip(r, fit[0])] for r in rows]
                    headers = [_fill(h, w) for h, w in zip(headers, fit[1])]
                parts.append(tabulate(rows, headers=headers, tablefmt="github" if markdown else "simple",
                                      disable_numparse=True))
        for n in t.notes:
            parts += [f"- {esc(n)}"] if markdown else _wrap(f"note: {esc(n)}")
        parts.append("")
    for f in footer:
        parts += [f"- {esc(f)}"] if markdown else _wrap(esc(f), "")
    return "\n".join(parts).rstrip() + "\n"


def _csv_value(v):
    if isinstance(v, SHOWN_AS_TEXT):
        v = v.text()
    return "" if v is None else csv_cell(v)  # no text a spreadsheet would run as a formula


# CSV holds raw numbers: every column with a unit says it in its name (a delta column is a fraction, 0.12 = +12%).
CSV_NAMES = {"ms": "ms_per_step", "ref_ms": "ref_ms_per_step", "first": "first_step_ms", "tokens_s": "tokens_per_s",
             "ref_tokens_s": "ref_tokens_per_s", "memory": "memory_bytes", "ref_mem": "ref_device_used_bytes",
             "mem": "device_used_bytes", "mfu": "mfu_fraction", "mfu_ds": "mfu_datasheet_fraction",
             "mfu_meas": "mfu_measured_fraction", "watts": "watts", "impact": "impact_us_per_step"}


def _csv_columns(t: Table) -> list[tuple[str, list[str]]]:
    """(row key, CSV column names) per table column."""
    out = []
    for k, _h in t.columns:
        values = [r.get(k) for r in t.rows]
        cells = [v for v in values if isinstance(v, Cell)]
        if cells:
            bounds = "range" if all(c.delta.bounds == "range" for c in cells) else "ci"
            out.append((k, [f"{k}_fraction", f"{k}_{bounds}_low_fraction", f"{k}_{bounds}_high_fraction", f"{k}_verdict"]))
        elif any(isinstance(v, Mfu) for v in values):
            out.append((k, [CSV_NAMES.get(k, k), f"{k}_peak_suspect"]))
        elif any(isinstance(v, Memory) for v in values):
            out.append((k, [CSV_NAMES.get(k, k), f"{k}_metric"]))
        else:
            out.append((k, [CSV_NAMES.get(k, k)]))
    return out


def _csv_fields(v, width: int) -> list:
    """The CSV fields of one table cell: 4 for a delta column, 2 for an MFU or a memory column, else 1."""
    if width == 4:
        d = v.delta if isinstance(v, Cell) else stats.Delta(None, verdict="")
        return [_csv_value(d.value), _csv_value(d.low), _csv_value(d.high), d.verdict]
    if width == 2:
        if isinstance(v, Memory):
            return [v.bytes, csv_cell(v.metric)]
        return [v.value, v.suspect] if isinstance(v, Mfu) else [_csv_value(v), ""]
    return [_csv_value(v)]


def render_csv(tables: list[Table]) -> str:
    buf = io.StringIO()
    for i, t in enumerate(tables):
        if len(tables) > 1:
            if i:
                buf.write("\n")
            buf.write(csv_comment(f"# {t.name}: {t.title}") + "\n")  # one line, no formula, whatever a name holds
        columns = _csv_columns(t)
        w = csv.writer(buf, lineterminator="\n")
        w.writerow([name for _k, names in columns for name in names])
        for r in t.rows:
            w.writerow([x for k, names in columns for x in _csv_fields(r.get(k), len(names))])
    return buf.getvalue()


def _json_value(v):
    if isinstance(v, Cell):
        return {**v.delta.to_dict(), "style": v.style, "text": v.text()}
    if isinstance(v, Mfu):
        return {"value": v.value, "peak_suspect": v.suspect, "text": v.text()}
    if isinstance(v, Memory):
        return {"bytes": v.bytes, "metric": v.metric, "text": v.text()}
    if isinstance(v, SHOWN_AS_TEXT):
        return v.text()
    return v


def _json_delta(d):
    return None if d is None else d.to_dict()


def verdict_json(v) -> dict:
    """The verdict's pairs and counts as data (ratios as fractions: 0.82 = 1.82x)."""
    return {
        "pairs": [{"across": p.across, "same": p.same, "base": p.base, "other": p.other, "rungs": len(p.rows),
                   "not_ok_on_one_side": p.missing, "tokens_per_s_geomean": _json_delta(p.speed),
                   "rungs_beyond_noise": p.changed, "memory_metric": p.memory_metric,
                   "memory_geomean": None if p.memory is None else p.memory.value, "memory_rungs_beyond_noise": p.memory_changed,
                   "most_changed_rung": None if p.most is None else {"rung": p.most.label, "batch": p.most.batch,
                                                                     "tokens_per_s": _json_delta(p.most.d_tokens)},
                   "underneath": p.underneath} for p in v.pairs],
        "loss_parity": {"ok": v.parity_ok, "drift": len(v.parity_drift)},
        "left_out": dict(v.left_out), "not_ok": dict(v.not_ok),
        "contended": [{"run_id": r.run_id, "rerun": r.rerun_command} for r in v.contended],
        "devices": [{"alias": a, "label": label} for a, label in v.devices],
        "apart": [{"folder": a.folder, "device": a.device, "others": list(a.others), "nearest": a.nearest,
                   "same": list(a.same), "differs": [{"what": w, "here": h, "there": t} for w, h, t in a.differs],
                   "envs_missing": list(a.envs_missing)} for a in v.apart],
        "noise": [{"device": n.device, "calibration_runs": n.calibration_runs,
                   "tokens_per_s": _noise_json(n.tokens),
                   "memory": {metric: _noise_json(x) for metric, x in sorted(n.memory.items())}} for n in v.noise],
    }


def render_json(tables: list[Table], ds: Dataset, footer: list[str], warnings: list[str], v=None) -> str:
    doc = {
        "records": ds.valid_records, "groups": len(ds.groups), "references": len(ds.references),
        **({"verdict": verdict_json(v)} if v is not None else {}),
        "tables": [{"name": t.name, "title": t.title, "columns": [k for k, _h in t.columns], "headers": [h for _k, h in t.columns],
                    "rows": [{k: _json_value(r.get(k)) for k, _h in t.columns} for r in t.rows], "notes": t.notes} for t in tables],
        "left_out": [{"what": x.what, "why": x.why, "kind": x.kind} for x in ds.left_out],
        "notes": ds.notes, "warnings": warnings, "footer": footer,
    }
    return json.dumps(doc, indent=1, default=str) + "\n"


def header_lines(ds: Dataset, paths, legend: bool = True) -> list[str]:
    """What was read (counts), the envs oldest torch first, and (legend) each device's short name and full label."""
    ok = sum(len(g.records) for g in ds.groups)
    lines = _wrap(f"{ds.valid_records} valid record(s) under {', '.join(map(str, paths))}: {ok} ok measured run(s) in "
                  f"{len(ds.groups)} comparable group(s), {len(ds.references)} reference(s), "
                  + (f"{len(ds.peers)} peer record(s), " if ds.peers else "") + f"{len(ds.failed)} not ok"
                  + (f", {len(ds.contended)} contended left out" if ds.contended else "")
                  + (f", {ds.filtered} filtered out" if ds.filtered else "") + ".", "")
    if ds.env_order:
        lines += _wrap("envs (oldest torch first): " + ", ".join(f"{bounded(e, WORD)} ({bounded(ds.env_versions.get(e) or '?', WORD)})"
                                                             for e in ds.envs()), "")
    if ds.gpu_order and legend:
        lines += _wrap("devices: " + "; ".join(f"{bounded(ds.name(g), WORD)} = {bounded(g, WORD)}" for g in ds.gpus()), "")
    return lines


# ---------------------------------------------------------------- the verdict (harness.analysis.verdict), as lines

MAX_PAIRS = 10  # pairs shown in the verdict; the rest are counted (every one is in --table versions / gpus)


def _times(d: stats.Delta) -> str:
    """A tokens/s ratio as pyperf says it, '1.82x faster [1.67x, 2.41x] (beyond noise)', worded by Cell (where the
    offset between its invocations is not measured, the Noise block says so, once, and what would measure it)."""
    return Cell(d, "faster").text(detail=True)


def _wrap(text: str, indent: str = "  ") -> list[str]:
    """text as lines of at most WIDTH characters, the first indented by indent, the rest two spaces more."""
    return textwrap.wrap(text, WIDTH, subsequent_indent=indent + "  ", initial_indent=indent if indent else "",
                         break_on_hyphens=False) or [""]


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


def _noise_json(n: stats.DeviceSpread | None) -> dict | None:
    """A device's spreads as data: the run-to-run sd of log per-run values (about the relative sd) with its degrees of
    freedom and basis, the configurations that keep their own spread (apart), the sd of an invocation's offset (None:
    not measured) and, per memory metric, the two levels a configuration's peaks fell at (modes)."""
    if n is None:
        return None
    between = None if n.between is None else {"sd": n.between.sd, "df": n.between.df, "cells": n.between.configs}
    return {"sd": n.sd, "df": n.df, "cells": n.cells, "runs": n.runs,
            "apart": sorted(({"sd": s.sd, "df": s.df} for s in n.apart.values()), key=lambda x: (x["sd"], x["df"])),
            "between_invocations": between, "modes": sorted([lo, hi] for lo, hi in n.modes.values())}


def _modes_text(spread: stats.DeviceSpread) -> str:
    """' (two modes: 600/790 MiB)' where a configuration's peaks fell at two levels (stats.modes), else ''."""
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


def more_lines(tables) -> list[str]:
    return _wrap("More: every table with --detail, or one with --table NAME (" + ", ".join(tables) + "); "
                 "--format markdown|csv|json", "")
