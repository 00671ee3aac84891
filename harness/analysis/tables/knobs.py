"""Knob effects (runs that differ in one knob, in every (GPU, env) cell where both sides ran) and their split into a
GPU and a version factor over a 2x2 of GPUs x envs."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations, pairwise
from typing import TYPE_CHECKING

from harness.analysis import stats
from harness.analysis.cells import Cell, Change, Table
from harness.analysis.differ import field_diff, show_value, value_key, variant_labels
from harness.analysis.group import Group, run_ids
from harness.analysis.tables.ladder import plan_is_cumulative
from harness.runner.flags import own_flags

if TYPE_CHECKING:
    from harness.analysis.context import Compare


def _knob_order(cx: Compare, a: Group, b: Group) -> tuple[Group, Group]:
    plans_a = {p: i for p, _r, i in a.rungs if i is not None}
    for p, _r, i in b.rungs:
        if p in plans_a and i is not None and plans_a[p] != i:
            return (a, b) if plans_a[p] < i else (b, a)
    diff = field_diff(a, b)
    if diff:
        name, va, vb = diff[0]
        if value_key(name, va) > value_key(name, vb):
            return b, a
    return a, b


def knob_effects(cx: Compare) -> dict[tuple, dict]:
    """{(knob, context): {(gpu, env): (a, b, Delta, boot)}} for pairs that differ in one knob,
    and for adjacent rungs of a ladder (whatever they change). Computed once per Compare."""
    return cx.cached("knob-effects", _knob_effects)


def _knob_effects(cx: Compare) -> dict[tuple, dict]:
    pairs: dict[tuple, None] = {}  # in the order found: a set's order changes with the hash seed, and the first
    # pair of a (knob, context) names its entry's 'at'
    for (plan, _gpu, _env, _b, _t, _model), rows in cx.ladders():
        if not plan_is_cumulative(plan):  # neighbours differ in two things; each rung's one pair with the base
            continue                      # is found below, among the runs of its cell
        groups = [g for _i, _r, g in rows if isinstance(g, Group)]
        for a, b in pairwise(groups):
            if a is not b:
                pairs[(a.key, b.key)] = None
    for groups in cx.cells().values():
        plain = [g for g in groups if g.in_ladder]
        for a, b in combinations(plain, 2):
            wdiff = [d for d in field_diff(a, b) if not d[0].startswith("flag:")]
            if len(wdiff) == 1:  # one workload field, and only the flags it implies (sdpa follows sdpa_backend)
                one_knob = own_flags(a.workload.to_dict(), a.flags) == own_flags(b.workload.to_dict(), b.flags)
            else:  # or the flags alone
                one_knob = not wdiff and a.flags_hash != b.flags_hash
            if one_knob:
                a2, b2 = _knob_order(cx, a, b)
                pairs[(a2.key, b2.key)] = None
    by_key = {g.key: g for g in cx.ds.groups}
    out: dict[tuple, dict] = {}
    for ka, kb in pairs:
        a, b = by_key[ka], by_key[kb]
        diff = field_diff(a, b)
        knob = ", ".join(f"{n} {show_value(va)} -> {show_value(vb)}" for n, va, vb in diff if not n.startswith("flag:"))
        flag_diff = [(n.removeprefix("flag:"), va, vb) for n, va, vb in diff if n.startswith("flag:")]
        if knob and flag_diff:  # flags that follow from the workload change: named, not spelled out
            knob += f" (flags: {', '.join(n for n, _va, _vb in flag_diff)})"
        elif flag_diff:
            knob = "flags: " + ", ".join(f"{n} {show_value(va)} -> {show_value(vb)}" for n, va, vb in flag_diff)
        # One knob effect across cells only where every "before" run is one comparison set and every "after"
        # run another (the comparability rule): a cell whose runs differ in a flag or hash is its own entry.
        context = (a.set_key, b.set_key)
        delta, boot = stats.ratio(a.throughput, b.throughput, cx.floor)
        entry = out.setdefault((knob, context), {"at": f"{a.label} ({a.batch})", "cells": {}})
        entry["cells"][(a.gpu, a.env)] = (a, b, delta, boot)
    variants: dict[tuple, list[dict]] = {}
    for (knob, _ctx), entry in out.items():
        entry["at_plain"] = entry["at"]
        variants.setdefault((knob, entry["at"]), []).append(entry)
    for entries in variants.values():  # the same knob at the same rung, kept apart: say what differs
        if len(entries) > 1:
            befores = [next(iter(e["cells"].values()))[0] for e in entries]
            afters = [next(iter(e["cells"].values()))[1] for e in entries]
            labels = variant_labels(befores)
            if len(set(labels)) < len(labels):
                labels = variant_labels(afters)
            for e, label in zip(entries, labels, strict=True):
                e["variant"] = label
                e["at"] = f"{e['at_plain']} [{label}]"
    return dict(sorted(out.items(), key=lambda kv: (min(g.rungs[0][2] or 0 for g, *_ in kv[1]["cells"].values()), kv[1]["at"], kv[0][0])))


def knobs_table(cx: Compare) -> Table:
    effects = knob_effects(cx)
    table = Table("knobs", f"Knob effects: one change, in every ({cx.word}, env) cell where both sides ran", [
        ("knob", "knob"), ("at", "at"), ("gpu", cx.word), ("env", "env"), ("tokens_s", "tokens/s before -> after"),
        ("d_tokens_s", "effect on tokens/s"), ("d_memory", "effect on memory")])
    for (knob, _ctx), entry in effects.items():
        for (gpu, env), (a, b, delta, _boot) in sorted(entry["cells"].items(), key=lambda kv: (cx.gpu_rank[kv[0][0]], cx.env_rank[kv[0][1]])):
            table.rows.append({"knob": knob, "at": entry["at"], "gpu": cx.name(gpu), "env": env,
                               "tokens_s": Change(a.throughput.point, b.throughput.point),
                               "d_tokens_s": Cell(delta), "d_memory": Cell(cx.mem_delta(a, b)), "run_ids": run_ids(a, b)})
    if not table.rows:
        table.notes.append("no two runs in one (GPU, env) cell differ in exactly one knob")
    return table


@dataclass
class Split:
    """A knob's effect on 2 GPUs x 2 envs, split into a GPU factor, a version factor and their interaction (each a
    difference of effects, in percentage points), and the cell furthest from the other three."""

    knob: str
    at: str
    gpus: tuple[str, str]
    envs: tuple[str, str]
    cells: dict  # (gpu, env) -> the effect there (stats.Delta), in the order (g1,v1), (g1,v2), (g2,v1), (g2,v2)
    gpu_factor: stats.Delta
    version_factor: stats.Delta
    interaction: stats.Delta
    standout: tuple | None
    run_ids: list

    @property
    def interaction_dominates(self) -> bool:
        """The interaction is beyond noise and larger than both factors."""
        g, v, i = self.gpu_factor, self.version_factor, self.interaction
        return i.beyond and all(d.value is not None and abs(i.value) > abs(d.value) for d in (g, v))

    def verdict(self, name=str) -> str:
        """What the split says, in words: which factor is real and larger, or that the interaction is larger than
        both (then the effect belongs to one GPU together with one torch build, not to either alone)."""
        g, v, i = self.gpu_factor, self.version_factor, self.interaction
        if self.interaction_dominates:
            text = "the interaction is larger than both factors, so the effect is not the GPU's or the torch version's alone"
            if self.standout:
                gpu, env = self.standout
                here = self.cells[self.standout]
                others = sorted(d.value for q, d in self.cells.items() if q != self.standout)
                text += (f": it comes from {name(gpu)} together with {env} ({Cell(here).brief()} there, "
                         f"{others[0] * 100:+.1f}% to {others[-1] * 100:+.1f}% in the other three cells)")
            return text
        real = [(name, d) for name, d in (("the GPU", g), ("the torch version", v)) if d.beyond]
        if not real:
            text = "neither factor is beyond noise"
        elif len(real) == 1:
            text = f"only {real[0][0]} factor is beyond noise"
        else:
            text = f"both are beyond noise; the larger is {max(real, key=lambda nd: abs(nd[1].value))[0]}"
        if i.beyond:
            text += "; the interaction is beyond noise too: the version change differs between the GPUs"
        return text


@dataclass
class Splits:
    rows: list[Split] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def splits(cx: Compare) -> Splits:
    """Where a knob's effect exists on 2 GPUs x 2 envs: its split (computed once per Compare)."""
    return cx.cached("splits", _splits)


def _splits(cx: Compare) -> Splits:
    effects = knob_effects(cx)
    result = Splits()
    for (knob, _ctx), entry in effects.items():
        cells = {k: (d, boot) for k, (_a, _b, d, boot) in entry["cells"].items()}
        gpus = sorted({g for g, _e in cells}, key=cx.gpu_rank.get)
        envs = sorted({e for _g, e in cells}, key=cx.env_rank.get)
        for g1, g2 in combinations(gpus, 2):
            for v1, v2 in combinations(envs, 2):
                quad = [(g1, v1), (g1, v2), (g2, v1), (g2, v2)]
                if not all(q in cells for q in quad):
                    continue
                e11, e12, e21, e22 = (cells[q] for q in quad)
                gpu_f = stats.combine([(0.5, e21), (-0.5, e11), (0.5, e22), (-0.5, e12)], cx.floor)
                ver_f = stats.combine([(0.5, e12), (-0.5, e11), (0.5, e22), (-0.5, e21)], cx.floor)
                inter = stats.combine([(1, e22), (-1, e21), (-1, e12), (1, e11)], cx.floor)
                values = {q: cells[q][0].value for q in quad}
                # the cell furthest from the mean of the other three: where an interaction comes from
                standout = None if None in values.values() else max(
                    quad, key=lambda q: abs(values[q] - sum(values[o] for o in quad if o != q) / 3))
                result.rows.append(Split(knob, entry["at"], (g1, g2), (v1, v2), {q: cells[q][0] for q in quad},
                                         gpu_f, ver_f, inter, standout,
                                         run_ids(*(g for q in quad for g in entry["cells"][q][:2]))))
    result.notes += _unsplit_notes(cx, effects)
    if not result.rows:
        envs, gpus = sorted({g.env for g in cx.ds.groups}), sorted({g.gpu for g in cx.ds.groups})
        if len(envs) < 2 or len(gpus) < 2:
            what, names = ("env", envs) if len(envs) < 2 else ("GPU", gpus)
            result.notes.append(f"only one {what} in these records ({', '.join(names) or 'none'}): a knob's effect needs "
                                f"2 GPUs x 2 envs to be split")
        else:
            result.notes.append("no knob was measured on 2 GPUs x 2 envs with comparable runs; run the same plan on both "
                                "GPUs under both envs to split its effect")
    result.notes.append("effects in %; factors in percentage points: GPU factor = effect on GPU B minus on GPU A, averaged "
                        "over the two envs; version factor = effect under env 2 minus env 1, averaged over the two GPUs; "
                        "interaction = how much the version change differs between the GPUs")
    return result


def factors_table(cx: Compare) -> Table:
    """The 2x2 splits as a table."""
    result = splits(cx)
    table = Table("factors", "Is it the GPU or the torch version? A knob's effect split over a 2x2 of GPUs x envs", [
        ("knob", "knob"), ("at", "at"), ("gpus", "GPU A -> B"), ("envs", "env 1 -> 2"), ("effects", "effect per cell"),
        ("gpu_factor", "GPU factor (B - A)"), ("version_factor", "version factor (2 - 1)"), ("interaction", "interaction")])
    for r in result.rows:
        table.rows.append({
            "knob": r.knob, "at": r.at, "gpus": " -> ".join(map(cx.ds.name, r.gpus)), "envs": " -> ".join(r.envs),
            "effects": "; ".join(f"{cx.ds.name(g)}/{v} {Cell(d).brief()}" for (g, v), d in r.cells.items()),
            "gpu_factor": Cell(r.gpu_factor, "pp"), "version_factor": Cell(r.version_factor, "pp"),
            "interaction": Cell(r.interaction, "pp"), "run_ids": r.run_ids})
    table.notes += result.notes
    return table


def _unsplit_notes(cx: Compare, effects: dict) -> list[str]:
    """A 2x2 that exists only by mixing runs the comparability rule keeps apart is not split: say why."""
    notes = []
    by_at: dict[tuple, list[dict]] = {}
    for (knob, _ctx), entry in effects.items():
        by_at.setdefault((knob, entry["at_plain"]), []).append(entry)
    for (knob, at), entries in by_at.items():
        if len(entries) < 2:
            continue
        split = [set(e["cells"]) for e in entries]
        cells = set().union(*split)
        gpus, envs = {g for g, _e in cells}, {e for _g, e in cells}
        quads = [{(g1, v1), (g1, v2), (g2, v1), (g2, v2)} for g1, g2 in combinations(gpus, 2) for v1, v2 in combinations(envs, 2)]
        if any(q <= cells and not any(q <= part for part in split) for q in quads):
            notes.append(f"not split: {knob} at {at}: its cells are not comparable with one another: " + "; ".join(
                f"{', '.join(f'{cx.ds.name(g)}/{v}' for g, v in sorted(e['cells']))} ran with {e['variant']}" for e in entries)
                + " (the same rule keeps them out of the cross-version and loss tables)")
    return notes
