"""The plan and the closing summary as text that fits 120 columns (harness.console.render's widths rule)."""

from __future__ import annotations

import textwrap

from tabulate import tabulate

from harness.console.render import WIDTH, fit_widths
from harness.gpu_check.budget import Outcome
from harness.gpu_check.plan import Tier


def table(headers: list[str], rows: list[list]) -> str:
    """A plain table, its widest cells wrapped so that it fits WIDTH."""
    rows = [["" if c is None else str(c) for c in r] for r in rows]
    fit = fit_widths(headers, rows)
    if fit == []:  # too many columns for WIDTH even wrapped: each row as "column: value; ..." (as harness.compare does)
        return "\n".join(wrap("- " + "; ".join(f"{h}: {c}" for h, c in zip(headers, r) if c), "  ") for r in rows)
    if fit:
        cells, heads = fit
        rows = [[c if w is None or len(c) <= w else "\n".join(textwrap.wrap(c, w))
                 for c, w in zip(r, cells)] for r in rows]
        headers = [h if w is None or len(h) <= w else "\n".join(textwrap.wrap(h, w)) for h, w in zip(headers, heads)]
    return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)


def wrap(text: str, indent: str = "  ") -> str:
    return "\n".join(textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False))


def runs_table(outcomes: list[Outcome], dry_run: bool, start_s: float = 0.0) -> str:
    """One row per planned run. The dry run: its estimate, when it would end counting from the call's start (the
    sanity check first) and what the estimate rests on; a call: its estimate, its time, status, tokens/s and memory."""
    rows, clock = [], start_s
    for i, o in enumerate(outcomes, 1):
        r = o.run
        if dry_run:
            head = [i, r.tier, r.rung, r.b_text, r.steps_text, "yes" if r.capture else "no", f"{o.estimate_s:.0f}"]
            clock += (o.seconds or 0.0) if o.started else 0.0
            rows.append([*head, f"{clock:.0f}" if o.started else "", "runs" if o.started else "not started", o.basis])
        else:
            took = "" if o.seconds is None else f"{o.seconds:.0f}"
            tokens = "" if o.tokens_s is None else f"{o.tokens_s:,.0f}"
            rows.append([i, r.tier, r.rung, r.b_text, f"{o.estimate_s:.0f}", took, o.status, tokens, o.memory or "",
                         o.note or ""])
    if dry_run:
        return table(["#", "tier", "rung", "B", "steps", "capture", "est s", "ends s", "status", "estimated from"], rows)
    return table(["#", "tier", "rung", "B", "est s", "took s", "status", "tokens/s", "peak MiB", "note"], rows)


def tier_lines(tiers: list[Tier], outcomes: list[Outcome]) -> list[str]:
    """Per tier: its plan, how many of its runs started, why the others did not, and what it answers."""
    out = []
    for t in tiers:
        mine = [o for o in outcomes if o.run.tier == t.name]
        done = sum(o.started for o in mine)
        why = next((o.note for o in mine if not o.started), "")
        state = "complete" if done == len(mine) else ("partial" if done else "not started")
        plans = ", ".join(dict.fromkeys(r.plan for r in t.runs))
        out.append(wrap(f"{t.name} (plan {plans}; {done} of {len(mine)} runs, {state}{': ' + why if why else ''}): "
                        f"{t.answers}"))
    return out


def choice_lines(choices: list[str], head: str) -> list[str]:
    """What the call decided ("tier: decision"), tiers that decided alike on one line."""
    if not choices:
        return []
    by_what: dict[str, list[str]] = {}
    for c in choices:
        tier, _, what = c.partition(": ")
        by_what.setdefault(what, []).append(tier)
    return [wrap(f"{head}:")] + [wrap(f"- {', '.join(tiers)}: {what}", "    ") for what, tiers in by_what.items()]
