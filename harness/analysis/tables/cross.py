"""Cross-version and cross-GPU tables: each cell of a comparison set against its baseline env or GPU; the pairs the
comparability rule keeps apart, and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING

from harness.analysis import stats
from harness.analysis.cells import CONTENDED_NOTE, Cell, Table
from harness.analysis.dataset import outcome
from harness.analysis.differ import differences
from harness.analysis.group import Group, run_ids
from harness.record.device import isa_tag
from harness.record.model import OURS
from harness.record.view import RecordView

if TYPE_CHECKING:
    from harness.analysis.context import Compare


STATUS_TEXT = {"oom": "ran out of memory", "unsupported": "was unsupported", "error": "failed", "invalid": "was invalid",
               "contended": "was contended (left out; rerun it)"}


@dataclass
class CrossRow:
    """One cell of a comparison set beside its baseline cell: the same workload and flags, the same device (across
    env) or env (across gpu). A failed cell has no group (`failed` is its record) and no deltas."""

    across: str  # "env" or "gpu": what differs from the baseline
    same: str  # the device (across env) or env (across gpu) both cells share
    value: str  # this cell's env (across env) or device (across gpu)
    group: Group | None
    failed: RecordView | None
    base: Group | None  # the baseline cell's group (None where the baseline failed)
    base_gpu: str
    base_env: str
    base_status: str
    label: str  # the rung (group label)
    batch: str  # "B=.., T=.."
    batch_size: int | None
    d_tokens: stats.Delta | None = None  # None on the baseline row itself
    d_memory: stats.Delta | None = None
    isa: str | None = None  # across gpu on CPUs: how the two CPUs' ISA differ
    run_ids: list = field(default_factory=list)

    @property
    def is_baseline(self) -> bool:
        return self.value == (self.base_env if self.across == "env" else self.base_gpu)

    @property
    def gpu(self) -> str:
        return self.same if self.across == "env" else self.value

    @property
    def env(self) -> str:
        return self.value if self.across == "env" else self.same

    @property
    def status(self) -> str:
        return "ok" if self.group is not None else outcome(self.failed)


@dataclass
class Cross:
    """Every comparison set's cells against their baseline, across env (versions) or across gpu, and the notes that
    say what was not compared and why."""

    across: str
    rows: list[CrossRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def cross(cx: Compare, across: str) -> Cross:
    """The typed result the versions and gpus tables, the findings and the verdict read (computed once)."""
    return cx.cached(f"cross-{across}", lambda c: _cross_result(c, across))


def versions_table(cx: Compare) -> Table:
    return _table(cx, "versions", cross(cx, "env"))


def gpus_table(cx: Compare) -> Table:
    return _table(cx, "gpus", cross(cx, "gpu"))


def _table(cx: Compare, name: str, result: Cross) -> Table:
    across = result.across
    other = "gpu" if across == "env" else "env"
    what, same = ("env", cx.word) if across == "env" else (cx.word, "env")
    table = Table(name, f"Cross-{'version' if across == 'env' else cx.word}: same {same} and rung; each {what} vs the "
                  f"baseline {what}", [
        (other, same), ("rung", "rung"), ("batch", "B, T"), (across, what), ("runs", "runs"),
        ("baseline", f"baseline ({cx.word} / env)"), ("tokens_s", "tokens/s"), ("d_tokens_s", "delta tokens/s"),
        ("memory", "memory MiB"), ("d_memory", "delta memory")])
    show = {"gpu": cx.name, "env": str}
    for r in result.rows:
        row = {other: show[other](r.same), "rung": r.label, "batch": r.batch, across: show[across](r.value),
               "baseline": "(baseline)" if r.is_baseline else f"{cx.name(r.base_gpu)} / {r.base_env}",
               "run_ids": r.run_ids}
        if r.group is not None:
            row.update(runs=r.group.n_text, tokens_s=r.group.throughput.point, memory=r.group.memory_bytes)
        else:
            row["runs"] = outcome(r.failed)
        if r.isa:
            row["isa"] = r.isa
        if not r.is_baseline:
            row.update(d_tokens_s=Cell(r.d_tokens), d_memory=Cell(r.d_memory))
        table.rows.append(row)
    table.notes += result.notes
    return table


def _cross_result(cx: Compare, across: str) -> Cross:
    """Same comparison set, same GPU (across=env) or same env (across=gpu): each against the baseline.
    A cell whose run failed (the baseline GPU ran out of memory where the other GPU did not) is a row
    that says so: the other cell's numbers are shown, without a delta."""
    other = "gpu" if across == "env" else "env"
    rank = cx.env_rank if across == "env" else cx.gpu_rank
    other_rank = cx.gpu_rank if across == "env" else cx.env_rank
    what = "env" if across == "env" else "GPU"
    result = Cross(across)
    cells: dict[tuple, dict[str, dict]] = {}  # set_key -> other value -> across value -> Group or (record, gpu, env)
    for g in cx.ds.groups:
        cells.setdefault(g.set_key, {}).setdefault(getattr(g, other), {})[getattr(g, across)] = g
    for r, gpu, env in cx.failed_runs():
        row_cells = cells.get(r.set_key, {}).get(gpu if other == "gpu" else env)
        if row_cells is not None:  # beside an ok run of the same set only: a failure alone compares nothing
            row_cells.setdefault(env if across == "env" else gpu, (r, gpu, env))
    wanted = cx.baseline_env if across == "env" else cx.baseline_gpu
    rows, failed_base, contended, isa_notes, code_notes = [], 0, [], {}, {}
    for by_other in cells.values():
        for o, row_cells in by_other.items():
            if len(row_cells) < 2:
                continue
            g0 = next(c for c in row_cells.values() if isinstance(c, Group))
            order = sorted(row_cells, key=lambda v: (rank.get(v, len(rank)), v))
            if wanted and order[0] != wanted:
                result.notes.append(f"{o} {g0.label} ({g0.batch}): no run on baseline {what} {wanted}; not compared")
                continue
            base = row_cells[order[0]]
            base_gpu, base_env = (base.gpu, base.env) if isinstance(base, Group) else base[1:]
            failed_base += not isinstance(base, Group)
            for v in order:
                c = row_cells[v]
                group = c if isinstance(c, Group) else None
                row = CrossRow(across, o, v, group, None if group else c[0], base if isinstance(base, Group) else None,
                               base_gpu, base_env, "ok" if isinstance(base, Group) else outcome(base[0]), g0.label,
                               g0.batch, g0.workload.batch_size)
                if group is not None:
                    contended += [n for n in group.contended_notes if n not in contended]
                if across == "gpu" and v != order[0]:
                    row.isa = isa_difference(record_of(base), record_of(c))
                    if row.isa:
                        isa_notes.setdefault(f"{cx.ds.name(base_gpu)} vs {cx.ds.name(v)}: {row.isa}", None)
                row.run_ids = [i for cell in ((c,) if v == order[0] else (base, c))
                               for i in (run_ids(cell) if isinstance(cell, Group) else [cell[0].run_id])]
                if v != order[0]:
                    row.d_tokens, row.d_memory = _cross_deltas(cx, base, c)
                    note = _code_note(cx, across, o, g0, (order[0], base), (v, group))
                    if note:
                        code_notes.setdefault(note, None)
                key = (other_rank.get(o, len(other_rank)), g0.rungs[0][2] if g0.rungs[0][2] is not None else 1 << 30,
                       g0.label, g0.workload.batch_size or 0, g0.workload.seq_len or 0, rank.get(v, len(rank)), v)
                rows.append((key, row))
    rows.sort(key=lambda kr: kr[0])
    result.rows = [r for _k, r in rows]
    _add_notes(cx, result, failed_base, isa_notes, code_notes, contended)
    return result


def _add_notes(cx: Compare, result: Cross, failed_base: int, isa_notes: dict, code_notes: dict, contended: list) -> None:
    """A cross table's notes: failed baselines, ISA differences, pairs of different workload code, contended runs,
    the pairs the comparability rule kept apart, and why there is no row at all."""
    what = "env" if result.across == "env" else "GPU"
    if failed_base:
        result.notes.append(f"{failed_base} baseline cell(s) did not run ok (their status is under 'runs'): the other "
                            f"{what}'s runs of that rung and B are shown without a delta")
    result.notes += list(isa_notes)
    result.notes += list(code_notes)[:5] + ([f"... and {len(code_notes) - 5} more pairs of different workload code"]
                                            if len(code_notes) > 5 else [])
    if contended:
        result.notes += contended + [CONTENDED_NOTE]
    refused = refused_pairs(cx, result.across)
    result.notes += refused[:5] + ([f"... and {len(refused) - 5} more such pairs"] if len(refused) > 5 else [])
    if not result.rows:
        result.notes.append(_why_no_rows(cx, result.across, bool(refused)))


def _code_note(cx: Compare, across: str, o: str, g0: Group, base: tuple, cell: tuple) -> str | None:
    """A pair of cells whose runs were made by different workload code (harness.provenance.workload_code), said; None when
    their code is the same (or a side has no group)."""
    (v0, a), (v, b) = base, cell
    if not isinstance(a, Group) or not isinstance(b, Group) or set(a.workload_codes) == set(b.workload_codes):
        return None
    show = cx.ds.name if across == "gpu" else str
    where = o if across == "gpu" else cx.ds.name(o)
    return (f"{where} {g0.label} ({g0.batch}): {show(v0)} and {show(v)} ran different workload code "
            f"({', '.join(a.workload_codes)} vs {', '.join(b.workload_codes)}; harness.provenance.workload_code)")


def _cross_deltas(cx: Compare, base, c) -> tuple[stats.Delta, stats.Delta]:
    """(tokens/s, memory) deltas of one cell against its baseline cell; a failed side gives deltas that say why
    there are none."""
    if isinstance(base, Group) and isinstance(c, Group):
        return cx.delta(base, c), cx.mem_delta(base, c)
    failed = base if not isinstance(base, Group) else c
    status = outcome(failed[0])
    why = f"the baseline {STATUS_TEXT.get(status, status)}" if failed is base else f"this run {STATUS_TEXT.get(status, status)}"
    none = stats.Delta(None, verdict=why)
    return none, none


def refused_pairs(cx: Compare, across: str) -> list[str]:
    """Runs of one plan rung and (B, T) on the same GPU (across=env) or env (across=gpu) under two envs or GPUs
    that the comparability rule keeps apart, with what differs: the reason their row is missing."""
    other = "gpu" if across == "env" else "env"
    rank = cx.env_rank if across == "env" else cx.gpu_rank
    slots: dict[tuple, list[Group]] = {}
    for g in sorted(cx.ds.groups, key=lambda g: rank[getattr(g, across)]):
        for plan, rung, _i in g.rungs:
            slots.setdefault((getattr(g, other), plan, rung, g.workload.batch_size, g.workload.seq_len), []).append(g)
    other_rank = cx.gpu_rank if across == "env" else cx.env_rank
    out: dict[str, tuple] = {}  # in the ranks' order, never the names': renaming an env or device moves no line
    for (o, plan, rung, b, t), gs in slots.items():
        for a, c in combinations(gs, 2):
            if a.model != c.model:  # two models are a dimension of their own (--table models), not a refused pair
                continue
            if getattr(a, across) != getattr(c, across) and a.set_key != c.set_key:
                text = (f"not compared: {o}, {plan}/{rung} (B={b}, T={t}) under {getattr(a, across)} and "
                        f"{getattr(c, across)}: the runs differ in {differences(a, c)}")
                order = (other_rank[o], str(plan), a.rungs[0][2] if a.rungs[0][2] is not None else 1 << 30, b or 0, t or 0,
                         rank[getattr(a, across)], rank[getattr(c, across)], a.model != OURS,
                         differences(a, c))
                out[text] = min(order, out.get(text, order))
    return sorted(out, key=lambda text: out[text])


def _why_no_rows(cx: Compare, across: str, refused: bool) -> str:
    other = "gpu" if across == "env" else "env"
    what, same = ("env", "GPU") if across == "env" else ("GPU", "env")
    where: dict[str, set] = {}
    for g in cx.ds.groups:
        where.setdefault(getattr(g, across), set()).add(getattr(g, other))
    if len(where) < 2:
        return f"only one {what} in these records ({', '.join(where) or 'none'}): nothing to compare across {what}s"
    if refused:
        return f"no rung ran under two {what}s with the same workload and flags on one {same} (the pairs above differ)"
    return (f"no rung ran under two {what}s on the same {same}: " +
            "; ".join(f"{k} on {', '.join(sorted(v))}" for k, v in sorted(where.items(), key=lambda kv: str(kv[0]))))


def record_of(cell) -> RecordView:
    """The record that stands for a cross-table cell: a Group's first run, or a failed run's (record, device, env)."""
    return cell.first if isinstance(cell, Group) else cell[0]


def isa_difference(a: RecordView, b: RecordView) -> str | None:
    """'different CPU ISA: ...' when two CPU records' ISA flags (environment.cpu.isa) or torch's kernel path
    differ; None when they agree or either record does not say (an older record, a GPU)."""
    if a.is_cuda or b.is_cuda:
        return None
    isa_a, isa_b = a.cpu_isa, b.cpu_isa
    known_a, known_b = bool(isa_a), bool(isa_b)
    if known_a != known_b:
        return (f"CPU ISA recorded for one side only ({isa_tag(isa_a if known_a else isa_b)}): the other record does "
                f"not say, so a difference in ISA can be neither named nor ruled out")
    if not known_a:
        return None
    only_a = sorted(k for k, v in isa_a.items() if v and not isa_b.get(k))
    only_b = sorted(k for k, v in isa_b.items() if v and not isa_a.get(k))
    cap_a, cap_b = a.cpu_kernels, b.cpu_kernels
    parts = [f"{isa_tag(isa_a)} vs {isa_tag(isa_b)}"] if isa_tag(isa_a) != isa_tag(isa_b) else []
    if only_a:
        parts.append(f"only the first has {', '.join(only_a)}")
    if only_b:
        parts.append(f"only the second has {', '.join(only_b)}")
    if cap_a and cap_b and cap_a != cap_b:
        parts.append(f"torch's CPU kernels {cap_a} vs {cap_b}")
    return "different CPU ISA: " + "; ".join(parts) if parts else None
