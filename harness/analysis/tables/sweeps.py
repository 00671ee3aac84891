"""The sweeps table (harness.analysis.sweep's curves) and the left-out table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.analysis import sweep as sweepmod
from harness.analysis.cells import Number, Table, fmt_pct, shorten
from harness.record.view import RecordView

if TYPE_CHECKING:
    from harness.analysis.context import Compare


def sweep_records(cx: Compare) -> list[RecordView]:
    """Every measured record that belongs to a sweep, ok or not (the filters applied); a failed one that does
    not say its device is under "left out" only, as everywhere. Found once per Compare (read, never changed, by the
    table, the findings, the answers and the charts)."""
    return cx.cached("sweep-records", _sweep_records)


def sweep_curves(cx: Compare) -> list[dict]:
    """harness.analysis.sweep's curves of sweep_records, computed once per Compare (read, never changed)."""
    return cx.cached("sweep-curves", lambda cx: sweepmod.sweep_curves(sweep_records(cx)))


def _sweep_records(cx: Compare) -> list[RecordView]:
    records = [r for g in cx.ds.groups for r in g.records] + [r for r, _gpu, _env in cx.failed_runs() if not r.ok]
    return [r for r in records if r.sweep]


def sweeps_table(cx: Compare) -> Table:
    """One row per swept value of each curve (harness.analysis.sweep: a sweep of one rung in one env on one device),
    with the knee and the lm_head GEMM kernel, so a size change that switched kernels shows."""
    table = Table("sweeps", "Sweeps: throughput and memory against the swept value", [
        ("sweep", "sweep"), ("rung", "rung"), ("gpu", cx.word), ("env", "env"), ("value", "value"), ("status", "status"),
        ("runs", "runs"), ("tokens_s", "tokens/s"), ("vs_best", "vs best"), ("memory", "peak MiB"),
        ("memory_source", "memory"), ("lm_head", "lm_head kernel"), ("mark", "note")])
    for row in sweepmod.sweep_rows(sweep_records(cx)):
        table.rows.append({"sweep": f"{row['sweep']} ({row['field']})", "rung": row["rung"], "gpu": cx.name(row["device"]),
                           "env": row["env"], "value": row["value"], "status": row["status"], "runs": row["runs"],
                           "tokens_s": row["tokens_per_s"], "vs_best": Number(row["vs_best"], fmt_pct),
                           "memory": row["peak_memory_bytes"], "memory_source": row["memory_source"],
                           "lm_head": shorten(row["lm_head_kernel"], 60), "mark": row["mark"]})
    if table.rows:
        table.notes += sweepmod.sweep_notes()
    else:
        table.notes.append("no sweep records")
    return table


def left_out_table(cx: Compare) -> Table:
    table = Table("left-out", "Left out, and why", [("what", "record"), ("why", "why")])
    table.rows = [{"what": x.what, "why": x.why} for x in cx.ds.left_out]
    table.notes = list(cx.ds.notes)
    return table
