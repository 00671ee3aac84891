"""The user's own logged numbers (kind=reference): their ladders, and each beside the measured runs of its rung."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from harness.analysis import stats
from harness.analysis.cells import Cell, Table
from harness.analysis.group import Group, estimate
from harness.record.model import NOT_IN_WORKLOAD_HASH

if TYPE_CHECKING:
    from harness.analysis.context import Compare


def reference_ladder_tables(cx: Compare) -> list[Table]:
    """The user's log as ladders (per B, T and compile mode): their own table, rebuilt from the records."""
    ladders: dict[tuple, list[Group]] = {}
    for ref in cx.ds.references:
        w = ref.workload
        ladders.setdefault((ref.first.plan, w.batch_size, w.seq_len, w.compile), []).append(ref)
    tables = []
    for (plan, b, t, comp), refs in sorted(ladders.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][3] == "off"), kv[0][1] or 0)):
        table = Table("reference", f"Reference ladder (the user's log, {refs[0].gpu}): plan {plan}, B={b}, T={t}, compile {comp}", [
            ("rung", "rung"), ("line", "log line"), ("torch", "torch"), ("ms", "ms/step"), ("tokens_s", "tokens/s (logged)"),
            ("memory", "nvidia-smi MiB"), ("first", "first step ms"), ("watts", "W"),
            ("vs_previous", "vs previous rung"), ("vs_first", "vs first rung")])
        first = previous = None
        rung_of = {}
        for ref in sorted(refs, key=lambda g: (g.first.rung_index or 0, g.first.reference.line or 0)):
            info = ref.first.reference
            row = {"rung": ref.label, "line": info.line, "torch": info.torch or "unknown"}
            if not ref.first.ok:
                table.rows.append({**row, "ms": ref.first.status})
                continue
            rung = ref.first.rung
            if rung_of and rung not in rung_of:
                previous = rung_of[list(rung_of)[-1]]
            rung_of.setdefault(rung, ref)
            est = estimate(ref)
            row.update(ms=ref.ms_per_step, tokens_s=est.point, memory=ref.memory_bytes,
                       first=ref.first.first_step_ms, watts=info.watts,
                       vs_previous=Cell(stats.ratio(estimate(previous), est)[0], "ratio") if previous else None,
                       vs_first=Cell(stats.ratio(estimate(first), est)[0], "ratio") if first else None)
            table.rows.append(row)
            first = first or ref
        tables.append(table)
    return tables


def reference_table(cx: Compare) -> Table:
    table = Table("reference", "Reference: the user's own logged numbers (kind=reference, one sample each) beside measured runs of the same rung, B and T", [
        ("rung", "rung"), ("batch", "B, T"), ("source", "source"), ("torch", "ref torch"), ("ref_ms", "ref ms"),
        ("ref_tokens_s", "ref tokens/s"), ("ref_mem", "ref MiB (nvidia-smi)"), ("measured", "measured on"),
        ("ms", "ms/step"), ("tokens_s", "tokens/s"), ("mem", "device used MiB"), ("d_tokens_s", "measured vs ref tokens/s"),
        ("differs", "conditions that differ")])
    measured: dict[tuple, list[Group]] = {}  # (rung, B, T) -> the measured groups that ran it, in their order
    for g in cx.ds.groups:
        for rung in dict.fromkeys(rung for _p, rung, _i in g.rungs):
            measured.setdefault((rung, g.workload.batch_size, g.workload.seq_len), []).append(g)
    for ref in cx.ds.references:
        r = ref.first
        info = r.reference
        base = {"rung": r.rung, "batch": ref.batch, "source": f"{info.source or '?'}:{info.line or '?'}",
                "torch": info.torch or "unknown"}
        if not r.ok:
            table.rows.append({**base, "ref_ms": r.status})
            continue
        ref_est = estimate(ref)
        base.update(ref_ms=ref.ms_per_step, ref_tokens_s=ref_est.point, ref_mem=ref.memory_bytes)
        matches = measured.get((r.rung, ref.workload.batch_size, ref.workload.seq_len), [])
        if not matches:
            table.rows.append({**base, "measured": "(none)"})
        for g in matches:
            conditions = reference_conditions(ref, g)  # typed, beside the column's text (not a column)
            table.rows.append({**base, "measured": f"{cx.name(g.gpu)} / {g.env}", "ms": g.ms_per_step, "tokens_s": g.throughput.point,
                               "mem": g.summary_median("device_used_bytes"),
                               "d_tokens_s": Cell(stats.ratio(ref_est, g.throughput, cx.floor)[0]),
                               "differs": conditions_text(conditions), "conditions": conditions})
    if not cx.ds.references:
        table.notes.append("no reference records read (they live in results/reference/)")
    else:
        table.notes.append("reference timings are the log's single 'Step 49' line: no noise estimate; "
                           "memory is nvidia-smi's (whole device), compared with the measured NVML device-used value")
    return table


def reference_conditions(ref: Group, g: Group) -> dict:
    """Known conditions of a reference record that a measured group does not share (GPU class, torch, workload):
    {"differ": [(what, reference value, measured value)], "unknown": [workload fields the log does not give]}."""
    differ = []
    classes = re.findall(r"[A-Z]\d{2,4}", ref.gpu)
    if classes and not any(c in g.gpu for c in classes):
        differ.append(("GPU", ref.gpu, g.gpu))
    ref_torch = ref.first.reference.torch
    if ref_torch and not str(g.torch_version or "").startswith(ref_torch):
        differ.append(("torch", ref_torch, g.torch_version or "unknown"))
    ref_workload, workload = ref.workload.to_dict(), g.workload.to_dict()
    known = {k: v for k, v in ref_workload.items() if v is not None and k not in NOT_IN_WORKLOAD_HASH}
    differ += [(k, v, workload.get(k)) for k, v in sorted(known.items()) if workload.get(k) != v]
    unknown = sorted(k for k, v in ref_workload.items()
                     if v is None and k not in NOT_IN_WORKLOAD_HASH + ("memory_budget_gib",))
    return {"differ": differ, "unknown": unknown}


def conditions_text(conditions: dict) -> str:
    text = "; ".join(f"{what} {a} vs {b}" for what, a, b in conditions["differ"]) or "none of the known ones"
    if conditions["unknown"]:
        text += f" (unknown in the log: {', '.join(conditions['unknown'])})"
    return text
