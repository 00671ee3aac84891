"""The ladder tables: one per (plan, device, env, B, T), rungs in order, each against the previous and the first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.analysis.cells import CONTENDED_NOTE, MFU_SUSPECT_NOTE, Cell, Mfu, Table
from harness.analysis.group import Group, run_ids

if TYPE_CHECKING:
    from harness.analysis.context import Compare


def _mem_header(groups) -> str:
    metrics = {g.memory[0] for g in groups}
    return (metrics.pop() if len(metrics) == 1 else "memory") + " MiB"


def _mfu_header(groups) -> str:
    """summary.mfu is against the datasheet peak where the GPU is in the table, else the measured GEMM peak
    (harness/evidence/mfu.py summary_mfu): the header says which basis the column's numbers use."""
    bases = set()
    for g in groups:
        part = (g.explain or {}).get("mfu") or {}
        if part.get("mfu_datasheet") is not None:
            bases.add("datasheet peak")
        elif part.get("mfu_measured") is not None:
            bases.add("measured GEMM peak")
    if len(bases) == 1:
        return f"MFU ({bases.pop()})"
    return "MFU (datasheet, else measured peak)" if bases else "MFU"


def _brief_reason(reason: str | None, limit: int = 160) -> str:
    """A failure reason cut at a sentence end near `limit` characters (the full text is under "left out")."""
    if not reason:
        return "no reason given"
    if len(reason) <= limit:
        return reason
    cut = reason.rfind(". ", 0, limit)
    return reason[: cut + 1 if cut > 0 else limit] + " ... (in full under left out)"


def ladder_tables(cx: Compare) -> list[Table]:
    tables = []
    for (plan, gpu, env, b, t), rows in cx.ladders():
        groups = [g for _i, _r, g in rows if isinstance(g, Group)]
        table = Table("ladder", f"Ladder: plan {plan} on {gpu} / {env} (B={b}, T={t})", [
            ("rung", "rung"), ("runs", "runs"), ("ms", "ms/step"), ("tokens_s", "tokens/s"),
            ("memory", _mem_header(groups) if groups else "memory MiB"), ("mfu", _mfu_header(groups)),
            ("vs_previous", "vs previous rung"), ("vs_first", "vs first rung")])
        first = previous = None
        rung_of = {}  # rung name -> its first ok group in this table; "previous" is the previous rung's
        for _idx, rung, g in rows:
            if not isinstance(g, Group):
                table.rows.append({"rung": rung, "runs": g["status"], "run_ids": [g["run_id"]]})
                table.notes.append(f"{rung}: {g['status']}: {_brief_reason(g.get('reason'))}")
                continue
            if rung_of and rung not in rung_of:
                previous = rung_of[list(rung_of)[-1]]
            rung_of.setdefault(rung, g)
            mfu = g.summary_median("mfu")
            row = {"rung": rung if rung == g.label else f"{rung} (= {g.label})", "runs": g.n_text,
                   "ms": g.ms_median, "tokens_s": g.throughput.point, "memory": g.memory_bytes,
                   "mfu": None if mfu is None else Mfu(mfu),
                   "vs_previous": Cell(cx.delta(previous, g), "ratio") if previous else None,
                   "vs_first": Cell(cx.delta(first, g), "ratio") if first else None, "run_ids": run_ids(g)}
            table.rows.append(row)
            first = first or g
            if g.pooled_note and g.pooled_note not in table.notes:
                table.notes.append(g.pooled_note)
            table.notes += [n for n in g.contended_notes if n not in table.notes]
        if any(isinstance(r.get("mfu"), Mfu) and r["mfu"].suspect for r in table.rows):
            table.notes.append(MFU_SUSPECT_NOTE)
        if any(g.contended for g in groups):
            table.notes.append(CONTENDED_NOTE)
        tables.append(table)
    return tables
