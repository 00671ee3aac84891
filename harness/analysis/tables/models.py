"""The models table (`--table models`): the same rung, B and T on one device and env under two models (ours,
Hugging Face's GPT-2, a user's own: workload field model), side by side, so what the model implementation costs is
seen beside what the torch build costs (the versions table). Made only where the records hold such a pair."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.analysis import stats
from harness.analysis.cells import Cell, Change, Table, fmt_signed_pct
from harness.analysis.group import Group, run_ids
from harness.analysis.knob_pairs import measured_pairs
from harness.analysis.tables.loss import pair_parity
from harness.analysis.tables.underneath import kernel_diff

if TYPE_CHECKING:
    from harness.analysis.context import Compare


@dataclass(frozen=True)
class ModelPair:
    """One rung at one B and T in one (device, env) cell under two models: `a` the model first in the natural
    order (ours before transformers before a user's), `b` the other."""
    gpu: str
    env: str
    a: Group
    b: Group
    speed: stats.Delta  # b's tokens/s against a's
    memory: stats.Delta
    parity: dict  # pair_parity(a, b): the loss rule of every table
    kernel: tuple | None  # the kernel change with the largest time impact: (what, a, b, b - a us/step)


def model_pairs(cx: Compare) -> list[ModelPair]:
    """Every pair of runs that differ in the model alone (computed once per Compare)."""
    return cx.cached("model-pairs", _model_pairs)


GRAPHS = ("CompiledFxGraph", "CompiledFunction")  # a compiled graph's time, named by its hash: not a kernel


def _model_pairs(cx: Compare) -> list[ModelPair]:
    out = []
    for (gpu, env), a, b in measured_pairs(cx, "model"):
        diff = kernel_diff(a, b, top=None)
        ranked = [row for row in (diff[0] if diff else []) if row[3] is not None and not any(g in row[0] for g in GRAPHS)]
        out.append(ModelPair(gpu, env, a, b, cx.delta(a, b), cx.mem_delta(a, b), pair_parity(cx, a, b),
                             max(ranked, key=lambda row: abs(row[3]), default=None)))
    # in the plans' rung order, as the ladders (measured_pairs orders a cell's pairs by name)
    return sorted(out, key=lambda p: (cx.gpu_rank[p.gpu], cx.env_rank[p.env], p.a.rungs[0][2] if p.a.rungs[0][2] is not None
                                      else 1 << 30, p.a.workload.batch_size or 0, p.a.workload.seq_len or 0, p.b.model))


def _parity_text(p: dict) -> str:
    if p["parity"] in ("ok", "DRIFT"):
        return f"{p['parity']} (final {fmt_signed_pct(p['d_final'])}, mean {fmt_signed_pct(p['d_mean'])})"
    return p["parity"]


def models_table(cx: Compare) -> list[Table]:
    pairs = model_pairs(cx)
    if not pairs:
        return []  # one model in these records: nothing to set side by side
    table = Table("models", "Models side by side: the same rung, B and T on one device and env under two models", [
        ("gpu", cx.word), ("env", "env"), ("rung", "rung"), ("batch", "B, T"), ("models", "model A -> B"),
        ("tokens_s", "tokens/s A -> B"), ("d_tokens_s", "B vs A, tokens/s"), ("d_memory", "B vs A, memory"),
        ("loss", "loss B vs A"), ("kernel", "largest kernel change (us/step A -> B)")])
    for p in pairs:
        kernel = None if p.kernel is None else f"{p.kernel[0]}: {p.kernel[1]} -> {p.kernel[2]}"
        table.rows.append({"gpu": cx.name(p.gpu), "env": p.env, "rung": "+".join(sorted({r for _p, r, _i in p.a.rungs})),
                           "batch": p.a.batch, "models": f"{p.a.model} -> {p.b.model}",
                           "tokens_s": Change(p.a.throughput.point, p.b.throughput.point),
                           "d_tokens_s": Cell(p.speed), "d_memory": Cell(p.memory), "loss": _parity_text(p.parity),
                           "kernel": kernel, "run_ids": run_ids(p.a, p.b)})
    table.notes.append("loss: final and mean loss of B against A over their common timed steps (the loss rule of every "
                       f"table, tolerance {cx.loss_tol:.1%}); two models start from different weights, so only a drift "
                       "beyond it says they train differently")
    table.notes.append("kernel: the change with the largest |B - A| time per step (--table underneath lists more for "
                       "pairs across envs and devices)")
    return [table]
