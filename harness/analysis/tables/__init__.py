"""The tables of harness.compare, one module per theme, and their registry
(harness.analysis.tables.registry: TABLES, name -> builder).

Each theme module computes a typed result once per Compare (ladder.ladders, cross.cross, knobs.splits, loss.parity_rows,
harness.analysis.fastest.overviews, ...) and builds its Table(s) from it; the findings, the verdict and the report read
the same typed results. Rows hold numbers and typed values (harness.analysis.cells), never display strings a reader
has to parse back.
"""
