"""Tables to text: the plain-text and markdown tables, CSV and JSON of harness.compare (harness.report's HTML reuses
display_rows, the one place a row's values become display text)."""

from __future__ import annotations

import csv
import io
import json

from tabulate import tabulate

from harness.analysis import stats
from harness.analysis.cells import SHOWN_AS_TEXT, Cell, Memory, Mfu, Table, fmt_int, fmt_mib, fmt_ms, fmt_pct
from harness.analysis.dataset import Dataset
from harness.textsafe import csv_cell, markdown_cell
from harness.textsafe import markdown as md


def display_rows(table: Table) -> list[list]:
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
            elif k in fmt and isinstance(v, (int, float)):
                v = fmt[k](v)
            line.append("" if v is None else v)
        out.append(line)
    return out


def render_text(tables: list[Table], header: list[str], footer: list[str], markdown: bool = False) -> str:
    """Plain text or Markdown. In Markdown every piece of text is escaped (harness.textsafe: a record's strings
    carry no HTML, links or images into a page); the caller makes the whole text safe for a terminal."""
    esc = md if markdown else str
    parts = [("\n".join(map(esc, header)) + "\n") if header else ""]
    for t in tables:
        if markdown:
            parts.append(f"### {esc(t.title)}\n")
        else:
            parts.append(f"== {t.title}")
        if t.rows:
            rows = display_rows(t)
            if markdown:
                rows = [[markdown_cell(c) for c in r] for r in rows]
            parts.append(tabulate(rows, headers=[esc(h) for _k, h in t.columns],
                                  tablefmt="github" if markdown else "simple", disable_numparse=True))
        for n in t.notes:
            parts.append(f"{'- ' if markdown else '  note: '}{esc(n)}")
        parts.append("")
    parts += [("- " if markdown else "") + esc(f) for f in footer]
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
            buf.write(f"# {t.name}: {t.title}\n")
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


def render_json(tables: list[Table], ds: Dataset, footer: list[str], warnings: list[str]) -> str:
    doc = {
        "records": ds.valid_records, "groups": len(ds.groups), "references": len(ds.references),
        "tables": [{"name": t.name, "title": t.title, "columns": [k for k, _h in t.columns], "headers": [h for _k, h in t.columns],
                    "rows": [{k: _json_value(r.get(k)) for k, _h in t.columns} for r in t.rows], "notes": t.notes} for t in tables],
        "left_out": [{"what": w, "why": y} for w, y in ds.left_out],
        "notes": ds.notes, "warnings": warnings, "footer": footer,
    }
    return json.dumps(doc, indent=1, default=str) + "\n"


def header_lines(ds: Dataset, paths) -> list[str]:
    ok = sum(len(g.records) for g in ds.groups)
    lines = [f"{ds.valid_records} valid record(s) under {', '.join(map(str, paths))}: {ok} ok measured run(s) in "
             f"{len(ds.groups)} comparable group(s), {len(ds.references)} reference(s), "
             + (f"{len(ds.peers)} peer record(s), " if ds.peers else "") + f"{len(ds.failed)} not ok"
             + (f", {ds.filtered} filtered out" if ds.filtered else "") + "."]
    if ds.env_order:
        lines.append("envs (oldest torch first): " + ", ".join(f"{e} ({ds.env_versions.get(e) or '?'})" for e in ds.envs()))
    if ds.gpu_order:
        lines.append("devices: " + ", ".join(ds.gpus()))
    return lines
