"""compare's tables and verdict as data: CSV (raw numbers, every unit in its column's name, no cell a spreadsheet
would run as a formula) and JSON (each typed value with its text, the verdict's pairs and counts)."""

from __future__ import annotations

import csv
import io
import json

from harness.analysis import noise_model, stats
from harness.analysis.cells import SHOWN_AS_TEXT, Cell, Memory, Mfu, Table
from harness.analysis.dataset import Dataset
from harness.console.textsafe import csv_cell, csv_comment


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
        "pairs": [{"across": p.across, "same": p.same, "base": p.base, "other": p.other, "model": p.model, "rungs": len(p.rows),
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


def _noise_json(n: noise_model.DeviceSpread | None) -> dict | None:
    """A device's spreads as data: the run-to-run sd of log per-run values (about the relative sd) with its degrees of
    freedom and basis, the configurations that keep their own spread (apart), the sd of an invocation's offset (None:
    not measured) and, per memory metric, the two levels a configuration's peaks fell at (modes)."""
    if n is None:
        return None
    between = None if n.between is None else {"sd": n.between.sd, "df": n.between.df, "cells": n.between.configs}
    return {"sd": n.sd, "df": n.df, "cells": n.cells, "runs": n.runs,
            "apart": sorted(({"sd": s.sd, "df": s.df} for s in n.apart.values()), key=lambda x: (x["sd"], x["df"])),
            "between_invocations": between, "modes": sorted([lo, hi] for lo, hi in n.modes.values())}
