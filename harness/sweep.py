"""Moved to harness.analysis.sweep (issue 28: the sweep rules are analysis). This name stays only for
harness/report/charts.py, which issue 29 rewrites; nothing else imports it. Remove it once charts.py imports
harness.analysis.sweep."""

from harness.analysis.sweep import (
    KNEE_TOLERANCE,
    MEMORY_DEFINITION,
    MEMORY_NAME,
    MISSING,
    SweepError,
    curve_key,
    knee,
    knee_definition,
    sweep_curves,
    sweep_notes,
    sweep_rows,
    value_key,
)

__all__ = ["KNEE_TOLERANCE", "MEMORY_DEFINITION", "MEMORY_NAME", "MISSING", "SweepError", "curve_key", "knee",
           "knee_definition", "sweep_curves", "sweep_notes", "sweep_rows", "value_key"]
