"""Loss parity: the loss rule (loss_parity) and the table of every comparison set against its baseline cell."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.analysis.cells import Table, fmt_signed_pct
from harness.analysis.group import Group, run_ids

if TYPE_CHECKING:
    from harness.analysis.context import Compare


def loss_parity(base: Group, g: Group, upto: int | None, start: int, tol: float) -> dict:
    """The loss rule: g's loss at step upto-1 and its mean over steps start..upto-1 (repeats averaged), each relative
    to base's; parity "DRIFT" when either differs by more than tol, "ok" otherwise ("baseline" for base itself,
    "no loss" when neither can be computed). Keys: final, mean, d_final, d_mean, parity, steps."""
    bf, bm = base.losses(upto, start)
    f, m = g.losses(upto, start)
    df = None if None in (f, bf) or not bf else (f - bf) / abs(bf)
    dm = None if None in (m, bm) or not bm else (m - bm) / abs(bm)
    if g is base:
        parity = "baseline"
    elif df is None and dm is None:
        parity = "no loss"
    else:
        parity = "DRIFT" if any(d is not None and abs(d) > tol for d in (df, dm)) else "ok"
    return {"final": f, "mean": m, "d_final": df, "d_mean": dm, "parity": parity, "steps": upto}


def pair_parity(cx: Compare, base: Group, other: Group) -> dict:
    """The loss rule of loss_table for two groups (a knob's run against its starting point): over their common
    steps, from the longer warm-up of the two."""
    upto = min((g.loss_steps for g in (base, other) if g.loss_steps), default=None)
    start = max(base.warmup_steps, other.warmup_steps)
    return loss_parity(base, other, upto, start, cx.loss_tol)


@dataclass
class ParityRow:
    """One cell of a comparison set against the set's baseline cell under the loss rule (loss_parity's values)."""

    group: Group
    base: Group
    steps: int | None
    final: float | None
    mean: float | None
    d_final: float | None
    d_mean: float | None
    parity: str  # "baseline", "ok", "DRIFT" or "no loss"

    @property
    def run_ids(self) -> list[str]:
        return run_ids(self.group) if self.group is self.base else run_ids(self.base, self.group)


def parity_rows(cx: Compare) -> list[ParityRow]:
    """Every comparison set that ran in more than one (device, env) cell, each cell against the first (computed once)."""
    return cx.cached("parity", _parity_rows)


def _parity_rows(cx: Compare) -> list[ParityRow]:
    out = []
    for groups in cx.sets().values():
        if len(groups) < 2:
            continue
        groups = sorted(groups, key=lambda g: (cx.gpu_rank[g.gpu], cx.env_rank[g.env]))
        upto = min((g.loss_steps for g in groups if g.loss_steps), default=None)
        start = max(g.warmup_steps for g in groups)
        base = groups[0]
        for g in groups:
            p = loss_parity(base, g, upto, start, cx.loss_tol)
            out.append(ParityRow(g, base, upto, p["final"], p["mean"], p["d_final"], p["d_mean"], p["parity"]))
    return out


def loss_table(cx: Compare) -> Table:
    tol = cx.loss_tol
    table = Table("loss", f"Loss parity: same workload, flags and steps across cells; flagged when final or mean loss differs from the baseline cell by more than {tol:.1%} (relative)", [
        ("rung", "rung"), ("batch", "B, T"), ("gpu", cx.word), ("env", "env"), ("steps", "steps"), ("final", "final loss"),
        ("mean", "mean loss"), ("d_final", "delta final"), ("d_mean", "delta mean"), ("parity", "parity")])
    for r in parity_rows(cx):
        g, is_base = r.group, r.group is r.base
        table.rows.append({"rung": g.label, "batch": g.batch, "gpu": cx.name(g.gpu), "env": g.env, "steps": r.steps,
                           "final": _round(r.final), "mean": _round(r.mean),
                           "d_final": None if is_base else fmt_signed_pct(r.d_final),
                           "d_mean": None if is_base else fmt_signed_pct(r.d_mean), "parity": r.parity,
                           "run_ids": r.run_ids})
    if not table.rows:
        table.notes.append("no comparison set ran in more than one (GPU, env) cell")
    table.notes.append(f"tolerance: {tol:.1%} relative, on the loss at the last common step and on the mean from the "
                       f"longest warm-up of the set to that step; repeats averaged. Same seed and data on both sides.")
    return table


def _round(x):
    return None if x is None else round(x, 4)
