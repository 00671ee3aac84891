"""The ladder tables: one per (plan, device, env, B, T), rungs in order, each against the previous and the first."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING

from harness.analysis import stats
from harness.analysis.cells import CONTENDED_NOTE, MFU_SUSPECT_NOTE, Cell, Mfu, Table
from harness.analysis.dataset import outcome
from harness.analysis.group import Group, run_ids
from harness.record.model import OURS
from harness.record.view import RecordView

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
        if g.mfu("mfu_datasheet") is not None:
            bases.add("datasheet peak")
        elif g.mfu("mfu_measured") is not None:
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


@dataclass
class LadderStep:
    """One rung of a ladder: its group (None where the run did not go ok: `failed` is that record) and its tokens/s
    against the previous rung's and the first rung's."""

    rung: str
    group: Group | None
    failed: RecordView | None = None
    vs_previous: stats.Delta | None = None
    vs_first: stats.Delta | None = None

    @property
    def tokens_per_s(self) -> float | None:
        return self.group.throughput.point if self.group is not None else None


@cache
def plan_is_cumulative(name: str) -> bool:
    """Whether each rung of the plan builds on the one before (seed-ladder) or changes one thing against a base
    (beyond-ladder, padding: `cumulative: false`). Read from the built-in plan of that name; a plan this checkout
    lacks counts as a ladder, as every plan did before."""
    from harness.runner.plan import builtin_plans, load_plan

    return load_plan(name).cumulative if name in builtin_plans() else True


@dataclass
class Ladder:
    """The rungs of one plan in one (device, env) cell at one B and T, in rung order. In a plan that is not cumulative
    neighbouring rungs differ in two things, so a rung is compared with the first (the base) only."""

    plan: str
    gpu: str
    env: str
    batch_size: int | None
    seq_len: int | None
    model: str = OURS
    steps: list[LadderStep] = field(default_factory=list)

    @property
    def cumulative(self) -> bool:
        return plan_is_cumulative(self.plan)

    def title(self, name=str) -> str:
        model = "" if self.model == OURS else f", model {self.model}"
        return f"plan {self.plan} on {name(self.gpu)} / {self.env} (B={self.batch_size}, T={self.seq_len}{model})"

    @property
    def groups(self) -> list[Group]:
        return [s.group for s in self.steps if s.group is not None]


def ladders(cx: Compare) -> list[Ladder]:
    """Every ladder of the dataset (computed once per Compare)."""
    return cx.cached("ladders", _ladders)


def _ladders(cx: Compare) -> list[Ladder]:
    out = []
    for (plan, gpu, env, b, t, model), rows in cx.ladders():
        ladder = Ladder(plan, gpu, env, b, t, model)
        first = previous = None
        rung_of = {}  # rung name -> its first ok group in this ladder; "previous" is the previous rung's
        for _idx, rung, g in rows:
            if not isinstance(g, Group):
                ladder.steps.append(LadderStep(rung, None, failed=g))
                continue
            if rung_of and rung not in rung_of:
                previous = rung_of[list(rung_of)[-1]]
            rung_of.setdefault(rung, g)
            vs_previous = cx.delta(previous, g) if previous and ladder.cumulative else None
            vs_first = cx.delta(first, g) if first else None
            ladder.steps.append(LadderStep(rung, g, vs_previous=vs_previous, vs_first=vs_first))
            first = first or g
        out.append(ladder)
    return out


class _FailedRuns:
    """A ladder's runs that gave no number: one row per rung and outcome, where its first run fell, and one note per
    distinct note text, each counting its runs where there are several (a year of nightly runs: a rung that fails
    every night is one row, not hundreds)."""

    def __init__(self, table: Table):
        self.table, self.rows, self.notes = table, {}, {}  # (rung, outcome) -> row; note -> [its index, runs]

    def add(self, rung: str, f: RecordView) -> None:
        key = (rung, outcome(f))
        if key not in self.rows:
            self.rows[key] = {"rung": rung, "runs": outcome(f), "run_ids": []}
            self.table.rows.append(self.rows[key])
        self.rows[key]["run_ids"].append(f.run_id)
        if outcome(f) == "contended":
            note = f"{rung}: contended ({f.contention_reason}): no number; rerun: {f.rerun_command}"
        else:
            note = f"{rung}: {f.status}: {_brief_reason(f.reason)}"
        if note not in self.notes:
            self.notes[note] = [len(self.table.notes), 0]
            self.table.notes.append(note)
        self.notes[note][1] += 1

    def count(self) -> None:
        """Say how many runs a row and a note stand for, where more than one."""
        for (_rung, what), row in self.rows.items():
            if len(row["run_ids"]) > 1:
                row["runs"] = f"{what} ({len(row['run_ids'])} runs)"
        for note, (at, runs) in self.notes.items():
            if runs > 1:
                self.table.notes[at] = f"{note} ({runs} runs)"


def ladder_tables(cx: Compare) -> list[Table]:
    tables = []
    for ladder in ladders(cx):
        groups = ladder.groups
        table = Table("ladder", f"Ladder: {ladder.title(cx.name)}", [
            ("rung", "rung"), ("runs", "runs"), ("ms", "ms/step"), ("tokens_s", "tokens/s"),
            ("memory", _mem_header(groups) if groups else "memory MiB"), ("mfu", _mfu_header(groups)),
            *([("vs_previous", "vs previous rung")] if ladder.cumulative else []), ("vs_first", "vs first rung")])
        failed = _FailedRuns(table)
        for step in ladder.steps:
            g, rung = step.group, step.rung
            if g is None:
                failed.add(rung, step.failed)
                continue
            mfu = g.summary_median("mfu")
            table.rows.append({"rung": rung if rung == g.rung_label else f"{rung} (= {g.rung_label})", "runs": g.n_text,
                               "ms": g.ms_per_step, "tokens_s": g.throughput.point, "memory": g.memory_bytes,
                               "mfu": None if mfu is None else Mfu(mfu),
                               "vs_previous": Cell(step.vs_previous, "ratio") if step.vs_previous else None,
                               "vs_first": Cell(step.vs_first, "ratio") if step.vs_first else None, "run_ids": run_ids(g)})
            for note in (g.pooled_note, g.code_note):
                if note and note not in table.notes:
                    table.notes.append(note)
            table.notes += [n for n in g.contended_notes if n not in table.notes]
        failed.count()
        if any(isinstance(r.get("mfu"), Mfu) and r["mfu"].suspect for r in table.rows):
            table.notes.append(MFU_SUSPECT_NOTE)
        if any(g.contended for g in groups):
            table.notes.append(CONTENDED_NOTE)
        tables.append(table)
    return tables
