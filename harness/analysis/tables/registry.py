"""The tables harness.compare and harness.report can show: name -> builder, in the order they are printed."""


from __future__ import annotations

from harness.analysis.cells import Table
from harness.analysis.context import Compare
from harness.analysis.tables import cross, fastest, knobs, ladder, loss, models, reference, sweeps, underneath

# name -> builder (a Table or a list of them), in the order harness.compare prints them
TABLES = {
    "ladder": ladder.ladder_tables,
    "versions": cross.versions_table,
    "gpus": cross.gpus_table,
    "knobs": knobs.knobs_table,
    "models": models.models_table,
    "factors": knobs.factors_table,
    "underneath": underneath.underneath_table,
    "libraries": underneath.libraries_table,
    "loss": loss.loss_table,
    "reference": lambda cx: [reference.reference_table(cx), *reference.reference_ladder_tables(cx)],
    "sweeps": sweeps.sweeps_table,
    "fastest": fastest.fastest_tables,
    "left-out": sweeps.left_out_table,
}


def build(cx: Compare, names=tuple(TABLES)) -> list[Table]:
    """The tables of the given names, in that order."""
    out = []
    for name in names:
        made = TABLES[name](cx)
        out += made if isinstance(made, list) else [made]
    return out


def one(cx: Compare, name: str) -> Table:
    """The first table of one name (most names make exactly one)."""
    return build(cx, [name])[0]
